"""Neural collapse in the terminal phase of training (Papyan, Han & Donoho, PNAS 2020).

Claim: trained past zero training error (the terminal phase of training, TPT) with weight decay,
a classifier's last-layer features collapse to their class means (NC1 falls), the centred class
means approach a simplex equiangular tight frame, pairwise cosines → −1/(C − 1) (NC2), the
classifier's rows align with the centred class means (NC3 falls), and the network's decision
becomes the nearest-class-centre rule (NC4 → 0). The metrics are
:func:`genlab.analyses.measures.collapse.neural_collapse`, whose docstring gives the formulas.

Setup (scaled down, notes/science.md section 7): C = 4 Gaussian classes in ℝ¹⁶ (well separated,
so 100% training accuracy needs no memorised outliers), an MLP 16-128-128-4 (ReLU) trained by
SGD with momentum 0.9 and weight decay 5e-4 on the cross-entropy, the step size divided by 10 at
1/3 and 2/3 of the budget as in the paper, for many times the step at which training accuracy
first reaches 100%. NC1-NC4 of the last hidden layer's features on the training set are tracked
every ``track_every`` steps. The TPT starts at the first tracked step with train accuracy 1.0;
the claims are decided on the tracked steps from there to the end.

The mean-cosine criterion is weak: Σ_c n_c (μ_c − μ_G) = 0, so with balanced classes and
near-equal norms the mean cosine is near −1/(C − 1) already at initialisation; the metrics keep
its initial value, and NC2's equiangularity (the cosines' spread), beside it.
"""
