"""TRAK (Park, Georgiev, Ilyas, Leclerc & Madry, ICML 2023) for one trained model.

One model, no ensemble over retrained models, no sparsification of the scores; on the CPU,
without the ``traker`` package (its ``BasicProjector`` is the reference design of the
projection here).

**Model output function.** TRAK linearises the model around θ̂ in the output

    f(z; θ) = z_y − log Σ_{j≠y} exp(z_j)     multiclass logits z (output (n, C), C ≥ 2,
                                             integer targets y), the "margin";
    f(z; θ) = (2y − 1)·z                     one logit z (output (n,) or (n, 1), targets 0/1),

chosen so that, for both, the probability of the correct class is p = σ(f) (σ the logistic
function: σ(z_y − logsumexp_{j≠y} z_j) = softmax(z)_y) and the cross entropy is
ℓ = −log p = −log σ(f). Hence

    ∇_θ ℓ = −(1 − p)·∇_θ f,

which :func:`margin_gradients` and :func:`correct_class_probabilities` give with
:func:`genlab.analyses.influence.exact.per_example_gradients` for the ``cross_entropy`` and
``binary_cross_entropy`` losses.

**Scores.** With gᵢ = ∇_θ f(zᵢ; θ̂) (the trainable parameters in ``model.parameters()`` order,
flattened), R a (P, k) random projection (:func:`projection_matrix`), φᵢ = Rᵀgᵢ the projected
features, Φ the (n_train, k) matrix of the training rows φᵢᵀ and λ ≥ 0 a damping, TRAK's
attribution of test example z_t to training example zᵢ is

    τ[t, i] = φ_tᵀ (ΦᵀΦ + λI)⁻¹ φᵢ (1 − pᵢ).

It is the one-step Newton estimate of f(z_t; θ̂) − f(z_t; θ̂₋ᵢ), the change in the test output
that *including* zᵢ causes, for logistic regression on the features φ, with the curvature
ΦᵀWΦ (W = diag(pⱼ(1 − pⱼ)), the Hessian of Σⱼ ℓⱼ) replaced by ΦᵀΦ, as the paper does.
ΦᵀΦ is a sum over the training set, not a mean: τ is on the scale of one example's removal.

**Why the factor (1 − pᵢ).** Removing zᵢ moves the optimum along (curvature)⁻¹∇ℓᵢ, and
∇ℓᵢ = −(1 − pᵢ)gᵢ: the pull that an example exerts on the parameters at the optimum is its
residual 1 − pᵢ (the probability the model still gives to the wrong classes) times gᵢ. An
example the model already fits with certainty (pᵢ → 1) contributes nothing to the gradient of the
training loss, so the optimum does not depend on it to first order. There is no matching factor
on the test side because τ measures the test *output* f_t, not the test loss: the test loss
changes by ∂ℓ_t/∂f_t = −(1 − p_t) times the change in f_t.

**Sign convention.** τ > 0 means that including (upweighting) zᵢ raises f_t, i.e. raises p_t and
lowers the test loss ℓ_t. genlab's influence scores
(:mod:`genlab.analyses.influence.exact`) are positive when upweighting zᵢ *raises* the test
loss, so :func:`trak_scores` returns **−τ**: positive = harmful, negative = helpful, comparable
in sign with ``exact_influence`` entry for entry. For a generalised linear model (f linear in θ)
without projection, ``exact_influence`` with the GGN is
−(1 − p_t)(1 − pᵢ) g_tᵀ (G + λI)⁻¹ gᵢ with G = (1/n) Σⱼ pⱼ(1 − pⱼ) gⱼgⱼᵀ, while −τ is
−(1 − pᵢ) g_tᵀ (Σⱼ gⱼgⱼᵀ)⁻¹ gᵢ: the same up to the weights pⱼ(1 − pⱼ) in the curvature, the
damping and the positive factor n(1 − p_t) of each test row. Put the weights and the damping
back (features √wⱼ gⱼ, residuals (1 − pᵢ)/√wᵢ and damping nλ in :func:`trak_from_features`)
and n(1 − p_t)·(−τ) is exactly the GGN influence; the weights are what TRAK gives up, and where
they spread over orders of magnitude (confident and unsure examples) the two rankings differ.

**Projection.** Entries of R are independent Rademacher (±1) or standard normal numbers scaled
by 1/√k, so E[RRᵀ] = I and ⟨Rᵀa, Rᵀb⟩ is an unbiased estimate of ⟨a, b⟩, with variance
(‖a‖²‖b‖² + (a·b)²)/k for Gaussian entries (2 Σₘ aₘ²bₘ²/k less for Rademacher ones).
R is drawn from ``seed`` through :func:`genlab.seeding.torch_generator`, so the same seed gives
the same matrix and the same scores. With k ≥ P and R of full rank P the projection loses
nothing: the scores are those of the unprojected features (k = P: R is invertible; k > P: see
the solve below). Gaussian R has rank min(P, k) almost surely; a ±1 matrix is singular with a
small but real probability when P and k are small (seed 0 at P = k = 11 is).

**Memory.** Gradients are formed ``chunk_size`` examples at a time (vmap(grad), as in
:mod:`~genlab.analyses.influence.exact`) and projected at once, so the peak is the (P, k)
projection, one (chunk_size, P) block of gradients, the (n, k) features and the
(n_test, n_train) scores; the (n, P) gradient matrix is never formed. R is held whole, in
float64: P·k·8 bytes (traker regenerates it block by block instead; not needed at the sizes
genlab runs this on).

**Solve.** (ΦᵀΦ + λI) is factorised by Cholesky (relative error about cond·ε). When it is
singular or numerically so (the factorisation fails, or the squared ratio of the smallest to the
largest diagonal entry of the factor, which is at least 1/cond, is below k·ε) the scores come
from the singular value decomposition of Φ instead. With λ = 0 that happens whenever k exceeds
the rank of the gradients: k > n_train, k > P, and for every multiclass model with a linear last
layer once k > P − (h + 1) (softmax, hence f, is unchanged by adding one number to all logits, so
∇f is orthogonal to the h + 1 directions that shift every row of the last weight matrix and its
bias alike, h the width of its input). The SVD gives a minimum-norm least-squares solve:
Φ = U S Vᵀ, singular values below
max(n_train, k)·ε·s_max dropped, and τ[t, i] = φ_tᵀ V (S² + λ)⁻¹ Vᵀ φᵢ (1 − pᵢ), which for
λ = 0 is φ_tᵀ (ΦᵀΦ)⁺ φᵢ (1 − pᵢ) (⁺ the pseudo-inverse). Every φᵢ lies in the row space of Φ,
so the part of φ_t outside it, on which a pseudo-inverse and an inverse differ, never contributes.
"""

from __future__ import annotations

import math
import numbers
from typing import Literal

import torch
from torch import Tensor, nn

from genlab.analyses.curvature.hessian import curvature_model
from genlab.analyses.influence.exact import (
    _as_dtype,
    _check_pairs,
    _gradient_chunks,
    _num_parameters,
    per_example_gradients,
)
from genlab.seeding import torch_generator

ProjectionKind = Literal["rademacher", "gaussian"]
OutputKind = Literal["multiclass", "binary"]


# ---------------------------------------------------------------------- model output function


def margin(output: Tensor, target: Tensor) -> Tensor:
    """(n,) TRAK's model output function f for a batch (module docstring): z_y − logsumexp of the
    other logits for (n, C) outputs (C ≥ 2, integer targets), (2y − 1)z for (n,) or (n, 1)
    outputs (targets 0/1). σ(f) is the probability of the correct class and −log σ(f) the cross
    entropy. Works inside vmap (no data-dependent control flow)."""
    if output.ndim == 2 and output.shape[1] >= 2:
        correct = torch.arange(output.shape[1], device=output.device) == target[:, None]
        own = output.gather(1, target[:, None].long()).squeeze(1)
        others = torch.logsumexp(output.masked_fill(correct, -math.inf), dim=1)
        return own - others
    if output.ndim == 1 or (output.ndim == 2 and output.shape[1] == 1):
        return (2 * target.to(output.dtype) - 1) * output.reshape(len(output))
    raise ValueError(f"the model output must be (n, C ≥ 2) logits or one logit per example "
                     f"((n,) or (n, 1)), got shape {tuple(output.shape)}")


def _summed_margin(output: Tensor, target: Tensor) -> Tensor:
    """f as a scalar "loss" for exact.py's per-example gradient helpers (a batch of one)."""
    return margin(output, target).sum()


def _model_dtype(model: nn.Module) -> torch.dtype:
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise ValueError("the model has no trainable parameters")
    return trainable[0].dtype


def _output_kind(net: nn.Module, X: Tensor, dtype: torch.dtype) -> tuple[OutputKind, int]:
    """Which f applies, from the output on the first example; and the number of classes."""
    with torch.no_grad():
        output = net(_as_dtype(X[:1], dtype))
    if output.ndim == 2 and output.shape[1] >= 2:
        return "multiclass", output.shape[1]
    if output.ndim == 1 or (output.ndim == 2 and output.shape[1] == 1):
        return "binary", 2
    raise ValueError(f"the model output must be (n, C ≥ 2) logits or one logit per example "
                     f"((n,) or (n, 1)), got shape {tuple(output.shape)} for one example")


def _check_data(net: nn.Module, X: Tensor, y: Tensor, dtype: torch.dtype, what: str) -> None:
    _check_pairs(X, y, what)
    if y.ndim != 1:
        raise ValueError(f"{what}: y must be one target per example, (n,), got "
                         f"{tuple(y.shape)}")
    kind, classes = _output_kind(net, X, dtype)
    if kind == "multiclass":
        if y.is_floating_point() or y.dtype == torch.bool:
            raise ValueError(f"{what}: a multiclass model needs integer class targets, got "
                             f"{y.dtype}")
        if bool(((y < 0) | (y >= classes)).any()):
            raise ValueError(f"{what}: class targets must lie in [0, {classes}), got "
                             f"[{int(y.min())}, {int(y.max())}]")
    elif not bool(((y == 0) | (y == 1)).all()):
        raise ValueError(f"{what}: a single-logit model needs targets in {{0, 1}}")


def margins(model: nn.Module, X: Tensor, y: Tensor, *, chunk_size: int = 256) -> Tensor:
    """(n,) f(zᵢ; θ̂) (:func:`margin`), ``chunk_size`` examples at a time, in eval mode and the
    model's dtype (the model is left as it was)."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    dtype = _model_dtype(model)
    with curvature_model(model, dtype) as net, torch.no_grad():
        _check_data(net, X, y, dtype, "margins")
        return torch.cat([margin(net(xs), ts) for xs, ts in
                          zip(_as_dtype(X, dtype).split(chunk_size), y.split(chunk_size),
                              strict=True)])


def correct_class_probabilities(model: nn.Module, X: Tensor, y: Tensor, *,
                                chunk_size: int = 256) -> Tensor:
    """(n,) pᵢ = σ(f(zᵢ; θ̂)): the probability the model gives to the correct class
    (softmax(z)_y, or σ(z) for y = 1 and 1 − σ(z) for y = 0 with one logit). 1 − p is
    σ(−f), which is how :func:`trak_scores` computes it (no cancellation as p → 1)."""
    return torch.sigmoid(margins(model, X, y, chunk_size=chunk_size))


def margin_gradients(model: nn.Module, X: Tensor, y: Tensor, *, chunk_size: int = 256) -> Tensor:
    """(n, P) rows ∇_θ f(zᵢ; θ̂) for the trainable parameters (``model.parameters()`` order,
    flattened): :func:`genlab.analyses.influence.exact.per_example_gradients` (vmap(grad),
    ``chunk_size`` examples at a time, eval mode) with f as the "loss", in the model's dtype.
    ∇ℓᵢ = −(1 − pᵢ)·this row for the cross entropy (module docstring). Materialises all n rows;
    :func:`projected_margin_gradients` streams them."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    dtype = _model_dtype(model)
    with curvature_model(model, dtype) as net:
        _check_data(net, X, y, dtype, "margin_gradients")
    return per_example_gradients(model, _summed_margin, X, y, chunk_size=chunk_size, dtype=dtype)


# --------------------------------------------------------------------------------- projection


def _check_projection_dim(projection_dim: int) -> None:
    if isinstance(projection_dim, bool) or not isinstance(projection_dim, numbers.Integral) \
            or projection_dim < 1:
        raise ValueError(f"projection_dim must be an integer ≥ 1, got {projection_dim!r}")


def _check_damping(damping: float) -> None:
    if isinstance(damping, bool) or not isinstance(damping, numbers.Real) \
            or not (math.isfinite(damping) and damping >= 0):
        raise ValueError(f"damping must be a finite number ≥ 0, got {damping!r}")


def projection_matrix(num_parameters: int, projection_dim: int, seed: int,
                      kind: ProjectionKind = "rademacher", *,
                      dtype: torch.dtype = torch.float64) -> Tensor:
    """(P, k) random projection R from ``seed``: independent ±1 (``rademacher``) or N(0, 1)
    (``gaussian``) entries scaled by 1/√k, so E[RRᵀ] = I and ⟨Rᵀa, Rᵀb⟩ estimates ⟨a, b⟩ without
    bias (variance in the module docstring). The same (P, k, seed, kind) gives the same matrix;
    the stream is :func:`genlab.seeding.torch_generator` (seed, "influence", "trak-projection",
    kind)."""
    if num_parameters < 1:
        raise ValueError(f"num_parameters must be positive, got {num_parameters}")
    _check_projection_dim(projection_dim)
    if kind not in ("rademacher", "gaussian"):
        raise ValueError(f"unknown projection {kind!r}; known: rademacher, gaussian")
    if not dtype.is_floating_point:
        raise ValueError(f"the projection dtype must be floating point, got {dtype}")
    generator = torch_generator(seed, "influence", "trak-projection", kind)
    shape = (int(num_parameters), int(projection_dim))
    if kind == "rademacher":
        signs = torch.randint(0, 2, shape, generator=generator, dtype=torch.int8)
        matrix = signs.to(dtype).mul_(2).sub_(1)
    else:
        matrix = torch.randn(shape, generator=generator, dtype=dtype)
    return matrix.div_(math.sqrt(shape[1]))


def projected_margin_gradients(model: nn.Module, X: Tensor, y: Tensor, projection: Tensor, *,
                               chunk_size: int = 256) -> Tensor:
    """(n, k) features φᵢ = Rᵀ∇_θ f(zᵢ; θ̂), R = ``projection`` (P, k): gradients formed in the
    model's dtype ``chunk_size`` examples at a time and multiplied by R in R's dtype (memory
    P·k + chunk_size·P, never n·P)."""
    dtype = _model_dtype(model)
    with curvature_model(model, dtype) as net:
        P = _num_parameters(net)
        if projection.ndim != 2 or projection.shape[0] != P:
            raise ValueError(f"projection must be (P={P}, k), got {tuple(projection.shape)}")
        _check_data(net, X, y, dtype, "projected_margin_gradients")
        features = torch.empty(len(X), projection.shape[1], dtype=projection.dtype,
                               device=projection.device)
        for start, G in _gradient_chunks(net, _summed_margin, X, y, chunk_size, dtype):
            features[start:start + len(G)] = G.to(projection) @ projection
    return features


# ------------------------------------------------------------------------------------- scores


def _singular(factor: Tensor, info: Tensor) -> bool:
    """Whether a Cholesky factor L of a k × k matrix is unusable: the factorisation failed, or
    (min Lᵢᵢ/max Lᵢᵢ)² (≥ 1/cond) is below k·ε."""
    if int(info) != 0:
        return True
    diagonal = factor.diagonal()
    ratio = float(diagonal.min() / diagonal.max())
    return not ratio * ratio > factor.shape[0] * torch.finfo(factor.dtype).eps


def trak_from_features(train_features: Tensor, test_features: Tensor,
                       train_residuals: Tensor, damping: float = 0.0) -> Tensor:
    """(n_test, n_train) −τ[t, i] = −φ_tᵀ (ΦᵀΦ + λI)⁻¹ φᵢ rᵢ from the (n_train, k) features Φ,
    the (n_test, k) test features, rᵢ = 1 − pᵢ (``train_residuals``, (n_train,)) and
    λ = ``damping``, in float64: genlab's sign (module docstring: positive = upweighting zᵢ raises
    the test loss). Cholesky solve, or the SVD of Φ when ΦᵀΦ + λI is (numerically) singular
    (module docstring, "Solve")."""
    _check_damping(damping)
    if train_features.ndim != 2 or test_features.ndim != 2 \
            or train_features.shape[1] != test_features.shape[1]:
        raise ValueError(f"features must be (n_train, k) and (n_test, k), got "
                         f"{tuple(train_features.shape)} and {tuple(test_features.shape)}")
    if train_residuals.shape != (len(train_features),):
        raise ValueError(f"train_residuals must be ({len(train_features)},), got "
                         f"{tuple(train_residuals.shape)}")
    Phi = train_features.to(torch.float64)
    Phi_test = test_features.to(Phi)
    residuals = train_residuals.to(Phi)
    gram = Phi.T @ Phi
    gram.diagonal().add_(float(damping))
    factor, info = torch.linalg.cholesky_ex(gram)
    if not _singular(factor, info):
        solved = torch.cholesky_solve(Phi_test.T, factor)  # (k, n_test) (ΦᵀΦ + λI)⁻¹φ_t
        return -(solved.T @ Phi.T) * residuals
    _, s, Vh = torch.linalg.svd(Phi, full_matrices=False)  # Φ = U diag(s) Vh
    keep = s > max(Phi.shape) * torch.finfo(Phi.dtype).eps * s.max()
    s, Vh = s[keep], Vh[keep]
    test_coordinates = Phi_test @ Vh.T / (s.square() + float(damping))  # (n_test, r)
    return -(test_coordinates @ (Phi @ Vh.T).T) * residuals


def trak_scores(model: nn.Module, X_train: Tensor, y_train: Tensor, X_test: Tensor,
                y_test: Tensor, *, projection_dim: int, seed: int, chunk_size: int = 256,
                damping: float = 0.0, projection: ProjectionKind = "rademacher") -> Tensor:
    """(n_test, n_train) float64 TRAK scores of one trained model in genlab's sign convention:

        score[t, i] = −τ[t, i] = −φ_tᵀ (ΦᵀΦ + λI)⁻¹ φᵢ (1 − pᵢ),

    φ = Rᵀ∇_θ f the projected gradients of the model output function f (module docstring),
    R the (P, ``projection_dim``) ``projection`` drawn from ``seed``, pᵢ = σ(fᵢ), λ =
    ``damping``. Positive = upweighting zᵢ raises test loss t (lowers f_t); negative = zᵢ
    helps test example t. The model is used in eval mode and its own dtype (left as it was);
    gradients ``chunk_size`` examples at a time (memory: module docstring); the Cholesky solve
    falls back to the SVD of Φ when ΦᵀΦ + λI is singular (e.g. ``projection_dim`` > n_train or
    > P with λ = 0)."""
    _check_projection_dim(projection_dim)
    _check_damping(damping)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    _check_pairs(X_train, y_train, "train")
    _check_pairs(X_test, y_test, "test")
    if X_train.shape[1:] != X_test.shape[1:]:
        raise ValueError(f"train and test inputs must have the same shape per example, got "
                         f"{tuple(X_train.shape[1:])} and {tuple(X_test.shape[1:])}")
    R = projection_matrix(_num_parameters(model), projection_dim, seed, projection)
    Phi = projected_margin_gradients(model, X_train, y_train, R, chunk_size=chunk_size)
    Phi_test = projected_margin_gradients(model, X_test, y_test, R, chunk_size=chunk_size)
    del R
    residuals = torch.sigmoid(-margins(model, X_train, y_train, chunk_size=chunk_size))
    return trak_from_features(Phi, Phi_test, residuals, damping)


__all__ = ["OutputKind", "ProjectionKind", "correct_class_probabilities", "margin",
           "margin_gradients", "margins", "projected_margin_gradients", "projection_matrix",
           "trak_from_features", "trak_scores"]
