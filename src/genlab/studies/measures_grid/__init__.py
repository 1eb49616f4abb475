"""Generalization measures on a hyperparameter grid (Jiang et al., ICLR 2020), at small scale.

Jiang, Neyshabur, Mobahi, Krishnan & Bengio trained 2187 = 3⁷ networks on CIFAR-10 over a grid of
seven hyperparameters (depth, width, batch size, dropout, learning rate, weight decay,
optimizer), each to a training cross-entropy of 0.01, dropped the models below 99% training
accuracy, and asked which of 40 complexity measures rank the models by their generalization gap:
Kendall τ over all models, the granulated Kendall Ψ (the mean over hyperparameters i of ψ_i, τ
within the groups where only hyperparameter i varies) and a conditional-mutual-information score
(the least information a measure carries about the gap once any one or two hyperparameters are
known). :mod:`genlab.analyses.measures.ranking` has the three statistics.

Setup (scaled down, notes/science.md section 6): a random tanh teacher labels Gaussian inputs;
ReLU MLPs over depth × width × learning rate × batch size × weight decay (× seed), SGD with
momentum on the cross-entropy until the training accuracy reaches ``recipe.stop_at_train_acc``
within ``recipe.max_steps``. A run that does not reach it (budget) or diverges is excluded from
the ranking and counted. Each run's measures (every measure in
:data:`genlab.analyses.measures.MEASURES`) are computed in the training stage, on the training
set, with the model at initialisation rebuilt from the run seed; the gap is train accuracy −
test accuracy (Jiang et al.'s, which at 100% training accuracy is the test error).

Differences from Jiang et al. A run stops at a training *accuracy*, not at a cross-entropy of
0.01: the vectorised trainer (:func:`genlab.train.ensemble.train_classifier_ensemble`) stops on
accuracy only. Dropout and the optimizer are not varied. The runs are trained in groups that
share (depth, width, batch size), the ensemble's constraint; within a group the learning rate,
weight decay and seed vary per model.

Claims (Jiang et al.'s findings that a small grid can test, in :data:`CLAIMS` with their
criteria, decided by :func:`check_claims` and never tuned to this grid):

1. Sharpness-based measures, the PAC-Bayes flatness 1/σ′² and especially its magnitude-aware
   variant, are among the best predictors of the gap (ranked by Ψ).
2. The product of spectral norms Π‖W_i‖₂² correlates negatively with the gap (τ < 0).
"""
