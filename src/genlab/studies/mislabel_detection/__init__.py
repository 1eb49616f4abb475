"""Finding mislabelled training points by self-influence (Koh & Liang 2017, §5.4).

Claim: ranking the training points by their self-influence −I(zᵢ, zᵢ) = ∇ℓᵢᵀ H⁻¹ ∇ℓᵢ (how much
upweighting a point lowers its own loss) puts the points whose labels were flipped first: for
L2 logistic regression, and for a network that memorises the flipped labels (100% training
accuracy), where the training loss no longer singles them out as plainly. Koh & Liang report
that influence finds the flips faster than the loss ranking on Enron spam; whether it does here
is reported, not claimed (piloted: logistic 0.97 vs loss 0.98; interpolating MLP 0.93 vs loss
0.92).

Setup: a logistic teacher, x ~ N(0, diag(s)²) with s log-spaced over 10^±0.5, d = 10,
noise-free labels y = 1[z > 0], n = 300, and exactly 10% of the training labels flipped to the
other class (:mod:`genlab.data.logistic_teacher`, which records which). Two models with one
logit and the binary cross entropy, trained in float64 to a stationary point of
(1/n) Σ ℓᵢ + (λ/2)‖θ‖² (:mod:`genlab.train.full_batch`) on the flipped labels: L2 logistic
regression (λ = 1e-2) and a 10-64-1 tanh MLP with λ = 1e-3, small enough that it fits every
flipped label.

Rankings (higher = inspect first): ``exact``, −I(zᵢ, zᵢ) with the damped GGN (the Hessian for
logistic regression), damping = λ; ``ekfac``, the same with kronfluence's EK-FAC; ``grad_dot``,
‖∇ℓᵢ‖² (TracIn's self-influence at the final checkpoint); ``loss``, the training loss under the
(flipped) training labels; ``random``. Each ranking's ROC AUC for separating flipped from clean
points (the Mann-Whitney statistic, ties counted half) and the fraction of flips found after
checking 5%, 10%, ..., 100% of the data (Koh & Liang's Fig. 6) go into the metrics, and every
wall time under ``metrics["seconds"]`` (the only entry that differs between two identical
runs). The run's history table is the long score table: train_id, method, score (the ranking
score), flipped.
"""
