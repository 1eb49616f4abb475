"""Influence functions against retraining (Koh & Liang 2017; Bae et al. 2022; Park et al. 2023).

Claims: for L2-regularised logistic regression, the influence function −∇ℓ_tᵀH⁻¹∇ℓᵢ predicts
what retraining without a training point does to each test loss (leave-one-out, LOO) nearly
exactly, and the effect of retraining on random halves of the data (the linear datamodeling
score, LDS); for a small tanh MLP it still predicts LOO retraining *warm-started* from the trained
model (what influence functions approximate: Bae et al. 2022's proximal Bregman response), and
ranks half-data retrainings better than chance; and iterative inverse-Hessian-vector solvers (CG,
LiSSA) reach the dense solution. The MLP's two claims are judged twice, each a declared
condition: on the exact GGN's scores (the first setting, Bae et al.'s curvature) and on the exact
Hessian's (Koh & Liang's), added after the GGN's warm-started agreement came out not reproduced
at 10 seeds; the report's "why these verdicts" gives every method's agreement side by side.

Setup (notes/science.md §5 and finding 0.6): a logistic teacher, x ~ N(0, diag(s)²) with
anisotropic scales s (10^±0.5), d = 10, n = 300 Bernoulli labels, 50 test points
(:mod:`genlab.data.logistic_teacher`); two models with one logit and the binary cross entropy,
L2 logistic regression and a 10-32-1 tanh MLP, both trained in float64 to a stationary point of
(1/n) Σ ℓᵢ + (λ/2)‖θ‖² (max|∇| ≤ 1e-9, :mod:`genlab.train.full_batch`), λ = 1e-2. The influence
damping is exactly λ (the penalty's Hessian), never an extra knob.

Methods (scores I[t, i] in :mod:`genlab.analyses.influence`'s convention: positive = upweighting
training point i raises test loss t, removing it changes that loss by ≈ −I/n):

- ``exact``: the damped Gauss-Newton matrix G + λI, dense Cholesky solve (for logistic
  regression G is the Hessian);
- ``exact_hessian``: the true Hessian + λI, dense (LU where indefinite; the same as ``exact`` for
  logistic regression);
- ``cg`` and ``lissa``: the same GGN system solved by conjugate gradients and by LiSSA
  (minibatches, Koh & Liang's stochastic recursion), with their solutions' cosine to the dense
  one (``inverse_hvp`` in the metrics);
- ``ekfac``: kronfluence's EK-FAC approximation of the Fisher (= GGN here), damping λ;
- ``grad_dot``: −∇ℓ_tᵀ∇ℓᵢ, TracIn at the final checkpoint (the curvature replaced by I);
- ``random``: standard normal scores (the chance baseline).

Ground truth, all retrained to the same stationarity (Park et al.'s and Koh & Liang's protocol):

- ``loo_warm``: K training points drawn at random, each removed in turn and the model retrained
  from the trained one (θ̂); measured: each test loss's change Δ. Stored as the score −n·Δ, in the
  influence's units (so a perfect method's score equals it);
- ``loo_scratch``: the first K_s of them, retrained from the same initialisation as the full
  model (for the convex logistic regression both coincide);
- LDS: M random subsets of α·n points, each retrained from the initialisation; measured: the test
  margins (2y − 1)·f(x); LDS_t = Spearman over subsets between −Σ_{i∈S} I[t, i] and the margin,
  averaged over test points (for a binary model the loss is a decreasing function of the margin,
  so this equals the loss-based LDS exactly).

Each method's Pearson and Spearman correlation with both LOO ground truths and its LDS go into
the run's metrics, and every wall time (fit, each method, each ground truth) under
``metrics["seconds"]``, the only entry that differs between two runs of the same settings.
**The run's history table is the long score table** (train_id, test_id, score, method) of every
method and of both LOO ground truths, written by the pipeline as history.parquet. The summary
table has one row per (run, method); the report shows the methods side by side, the LOO scatter,
their cost, and, for a few test points (the highest test losses), the top proponents and
opponents by exact influence with EK-FAC's score and the measured LOO change where sampled.
"""
