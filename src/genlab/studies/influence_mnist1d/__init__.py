"""Data attribution on dattri's protocol, on real data (MNIST-1D).

The influence study checks influence functions on a synthetic logistic teacher; this one asks
whether they, and their cheaper approximations, predict retraining on a real dataset, with the
benchmark protocol of dattri (Deng et al. 2024) and TRAK (Park et al. 2023): on a fixed training
set, the linear datamodeling score (LDS) of each method against models retrained on random
halves of it.

Setup: each seed draws its own MNIST-1D set (Greydanus 2020; 40-step series, 10 classes; the
cpu preset 1,000 training and 250 test series). Two models with ten logits and the cross
entropy: multinomial L2 logistic regression (410 parameters) and a 40-16-10 tanh MLP (826),
both fitted in float64 to a stationary point of (1/n) Σ ℓᵢ + (λ/2)‖θ‖² (max|∇| ≤ 1e-9,
:mod:`genlab.train.full_batch`), λ = 1e-2, the influence damping. dattri trains its MNIST models
by SGD; fitting to the optimum is Koh & Liang's setting, where the influence function is defined,
and makes the logistic regression's retrainings independent of their start.

Methods (:mod:`genlab.analyses.influence.methods`): exact influence with the damped GGN (dense;
CG converges to it, which the influence study checks, so it is not rerun here), with the damped
Hessian, LiSSA on the GGN system, EK-FAC (kronfluence), grad-dot (TracIn at the final
checkpoint), TRAK on the model alone (no ensemble) with its margin gradients projected to k
dimensions (:mod:`genlab.analyses.influence.trak`), and random scores.

Ground truth (dattri's LDS): M random subsets of α·n training series (α = 1/2), each retrained
from scratch from R fixed initialisations (the same R for every subset), to max|∇| ≤
``lds.grad_tol`` by L-BFGS; measured on each test series: the margin, the correct logit minus
the log-sum-exp of the others, averaged over the R retrainings. LDS_t = Spearman over subsets
between the method's additive prediction and that margin, averaged over test series
(:func:`genlab.analyses.influence.ground_truth.linear_datamodeling_score`). The run's history
is the per-test-series LDS of every method.

Claims, over seeds (each its own MNIST-1D draw, initialisation and subsets), by the interval
rule: exact influence's LDS for logistic regression and for the MLP; exact influence above
grad-dot (curvature matters: the gap the TRAK and dattri benchmarks show between influence
functions and TracIn-style dot products), per model. Control: random scores at chance. LiSSA's
agreement with the dense solve (cosine per test gradient) is in each run's metrics. dattri's
published MNIST-10 figures (its README's benchmark chart: IF (CG), LiSSA, grad-dot, TRAK-1) are
shown beside the table as a reference point, not a claim: its data, training and sizes differ.
"""
