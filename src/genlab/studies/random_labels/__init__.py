"""Random labels: networks fit noise (Zhang et al., ICLR 2017).

Claim: a standard network reaches 100% training accuracy whatever the fraction p of randomly
relabelled training points, its test accuracy falls to chance as p -> 1, and fitting random labels
is slower only by a small constant factor.

Setup (scaled down, notes/science.md section 1): a Gaussian mixture (C = 10, d = 32), an MLP
32-512-512-10 trained by SGD (lr 0.05, momentum 0.9, batch 100) until train accuracy is 1.0,
checked every 10 steps; fit_step(p) is the first such step.
"""
