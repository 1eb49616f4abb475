"""Benign oscillation: large-step SGD learns the weak feature (Lu, Wu, Yang, Zou, ICLR 2024).

Claim: on data whose points carry a weak feature v (small norm, in every point), a strong feature u
(large norm, in most points) and noise, SGD with a large learning rate keeps oscillating, and the
oscillation makes the network learn v as well; small-step SGD converges on u alone. So only the
large-step model classifies test points that carry the weak feature alone.

Setup (notes/science.md section 3): the feature-noise data (d = 64, u = e1, v = 0.1 e2, n = 16 of
which 2 weak-only), the two-layer ReLU² patch network f = F₊ − F₋ with m = 8 filters per sign and
N(0, 0.01²) initialisation, loss (1 − y f)², SGD with batch size 1, η ∈ {0.5, 2.5}, 3000 steps,
several seeds (seed variance is high: every seed is reported).
"""
