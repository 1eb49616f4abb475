"""Intrinsic dimension: of data, of representations, of objective landscapes, and of learning.

Four parts, each a kind of run (the run id starts with the kind):

1. ``estimate-<embedding>-s<seed>``: the estimators themselves. For each true dimension d in
   ``estimators.dims``, n points with Gaussian latents z ~ N(0, I_d) embedded in R^D
   (:mod:`genlab.data.manifolds`: linearly, x = Q z, or through tanh, x = tanh(scale Q z + b)),
   drawn from the run's seed; TwoNN (Facco et al. 2017, 10% of the ratios discarded) and MLE
   (Levina & Bickel 2004, k neighbours) with both averages: MacKay & Ghahramani's inverse
   average, divisor k - 1 (the library default), and Levina & Bickel's arithmetic mean of
   (k - 2)/S_k. No model is trained (the run's weights are empty).
   Claim: within ±10% of d for d ≤ 10 and within [0.7d, 1.05d] for d = 20 (a known low bias at
   n = 2000), per estimator (TwoNN; MLE with the inverse average), on the seed-mean estimate.
2. ``layers-<clean|random>-s<seed>``: representation ID across depth (Ansuini et al. 2019) on
   the study's one dataset (``data``: a d-dimensional latent tanh-embedded in R^D, labelled by a
   random teacher on the latent). An MLP (``layers.model``) is trained on the true labels
   (``clean``; a word, not YAML's boolean ``true``) or on fully random ones (every training
   label replaced by the dataset's uniform class draw, ``corrupt_labels(p = 1)``). TwoNN of
   every layer's activations on the n_test test inputs (input, each hidden layer after its
   nonlinearity, logits), at initialisation and after training. Claim: the trained
   true-label model's last-hidden-layer ID (seed mean) is below its value at init and below the
   random-label model's.
3. ``subspace-w<width>-s<seed>``: d_int90 (Li et al. 2018) of the MLP with ``subspace.depth``
   hidden layers of ``width`` units on one teacher-student task (``subspace.data``, the same for
   every width; drawn in the run from that block's own seed). The full model is trained with
   ``subspace.full_train``; then θ = θ₀ + P z is trained with ``subspace.train`` from the same
   θ₀ for each d in ``subspace.dims`` (optionally stopping at the first d that reaches the
   target); a run's d_int90 = the smallest d whose test accuracy reaches ``threshold`` (0.9) ×
   its full model's, and a width's is the median over its seeds. Claim: d_int90(widest) /
   d_int90(narrowest) ≤ 2.5 while their parameter counts differ ≥ 5×.
4. ``scaling-d<d_data>-s<seed>``: test error vs training-set size (Pope et al. 2021; Konz &
   Mazurowski 2024). Data from the run's seed: a ``d_data``-dimensional Gaussian latent
   embedded in R^D as ``scaling`` says, labelled by a random teacher on the latent; the N
   training points for each N in ``scaling.sizes`` are the first N of one draw (nested sets),
   and every N is tested on the same ``scaling.n_test`` points. Claim: at every N, the
   seed-mean test error strictly increases with d_data. Reported, not claimed: the fitted slope
   of log error on log N beside the law's -1/d_data.

Every run that has data records its d_data (TwoNN and MLE on its training inputs) next to the
generator's true intrinsic dimension, and the label sharpness K̂_F (Konz & Mazurowski) of the
labels it was trained on, with its resolution (features per input) and normalisation (the input
range and RMS). Runs that train several models in one process (subspace, scaling) restart from
scratch if killed (no checkpoints); layers runs checkpoint like any single-model run.
"""
