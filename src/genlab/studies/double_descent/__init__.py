"""Double descent in random-features regression (Advani & Saxe 2017; Belkin et al. 2019).

Claim: the test error of the minimum-norm least-squares fit on P random ReLU features peaks where
P crosses the number of training points N (the interpolation threshold), and falls again beyond
it. Advani & Saxe also predict that gradient descent stopped at its best validation step flattens
the peak; that is reported, not claimed.

Setup (notes/science.md; issue "training engine"): N = 200 points x ~ N(0, I_20), targets from a
linear teacher (weights ~ N(0, 1/d), so signal variance ≈ 1) plus noise σ = 0.5; P swept from N/8
to 8N with features nested across P (the first P rows of one W); each run is one draw of W.
"""
