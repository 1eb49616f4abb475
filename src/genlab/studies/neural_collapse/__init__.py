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

Why NC1 does not reproduce (issue 38; measured 2026-12-07, seed 0, one thread; each run's
metrics carry the numbers, the report's "why these verdicts" their means). Not the metric: NC1
is tested against exactly collapsed simplex-ETF features and an independent numpy version. Not
the schedule's length: at spread 2 the terminal phase starts at the first tracked step (50),
NC1 is 0.045 at initialisation, 0.021 there and 0.0135 after the 10,000 steps (0.20 orders of
magnitude), and the training loss, 1e-5 by step 400, rises to 2.5e-4 and is flat from step
~2,400, where weight decay balances it; the same run for the paper's 136,850 steps (350 epochs
of CIFAR-10 at batch 128; weight decay's exposure λ·Σ η_t 1.27 against 0.093) ends at NC1
0.0117, 0.26 orders; at spread 1, 0.090 → 0.062 (0.16) in 10,000 steps and 0.086 → 0.056
(0.19) in 136,850. Nor more weight decay: λ = 9e-3 gives NC1 0.021 → 0.0124. Off the study's
conditions, the same MLP on scikit-learn's digits goes from NC1 0.94 at initialisation to 0.50
when the TPT starts (step 650) and 0.46 at the end; with four hidden layers of 128, 0.26 →
0.25. At this scale the features are as collapsed as they get by the time the training error
vanishes: a finding of the setting, reported as not reproduced with its numbers.
"""
