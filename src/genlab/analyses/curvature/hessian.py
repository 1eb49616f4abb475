"""Sharpness: the top eigenvalues, trace and spectral density of the loss curvature.

The loss is the training loss, the mean over the n examples,
L(θ) = (1/n) Σᵢ ℓ(f_θ(xᵢ), yᵢ), and the curvature is either

- the Hessian H = ∇²_θ L, or
- the generalised Gauss-Newton matrix G = (1/n) Σᵢ Jᵢᵀ (∇²_f ℓ) Jᵢ with Jᵢ = ∂f_θ(xᵢ)/∂θ
  (Schraudolph 2002), positive semi-definite for a convex ℓ (MSE, cross-entropy): H without
  the term (1/n) Σᵢ Σ_c (∂ℓ/∂f_c) ∇²_θ f_c(xᵢ), which vanishes where the model fits exactly
  under MSE.

Products with the Hessian come from :class:`genlab.analyses.curvature.products.HessianProducts`
(double backward through a kept gradient graph: ~1-2× a gradient per product where curvlinops'
``HessianLinearOperator`` took 5×), with the GGN from curvlinops' ``GGNLinearOperator`` (pinned
at 3.0.1); the estimators on top are ours (:mod:`genlab.analyses.curvature.lanczos`,
:mod:`genlab.analyses.curvature.trace`) because each needs something curvlinops 3.0.1 lacks:

- top eigenvalues: scipy's ``eigsh`` with a capped ``maxiter`` raises ``ArpackNoConvergence``
  carrying only the pairs that converged (none for k=5, ncv=12, maxiter=1 on a 111-parameter
  MLP here), so a fixed budget of products gives no answer; uncapped, it took 100-300 s per
  call (notes/science.md §0.4). Lanczos with full reorthogonalisation, capped at ``max_iter``
  products and warm-started from the previous top eigenvector, always returns its best Ritz
  pairs and their residuals.
- trace: curvlinops' Hutchinson/Hutch++ return no standard error and draw from torch's global
  generator; ours return one and take a seed (and match curvlinops' for the same stream).
- spectral density: curvlinops' ``fast_lanczos`` does not reorthogonalise and its spectrum
  boundaries call ``eigsh`` without a cap.

Sharpness in the sense of Cohen et al. (2021) is λ_max(H): gradient descent with step size η on a
quadratic is stable only while λ_max ≤ 2/η, and full-batch GD trains at the edge of that bound
(:func:`sharpness_vs_lr`).

Every function evaluates the model in eval mode (with BatchNorm or Dropout in train mode the
products differ from call to call), in ``dtype`` (float64 by default, on a copy when the model is
in another dtype), and leaves the caller's model as it found it, train/eval flags included.
Parameter-space vectors (``v0``, eigenvectors) are the trainable parameters of
``model.parameters()``, flattened and concatenated in that order
(``torch.nn.utils.parameters_to_vector``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union, get_args

import torch
from torch import Tensor, nn

from genlab.analyses.curvature.lanczos import lanczos, quadrature, ritz_pairs
from genlab.analyses.curvature.products import HessianProducts, LossFn
from genlab.analyses.curvature.trace import ESTIMATORS, TraceResult, rademacher
from genlab.analyses.settings import Curvature, SharpnessSettings, TraceMethod
from genlab.seeding import subsample, torch_generator

if TYPE_CHECKING:
    from curvlinops import GGNLinearOperator

# the curvatures: the Hessian by HessianProducts, the GGN by curvlinops, which is imported only
# when a GGN is asked for (0.2-0.5 s of start-up that the stages using only the Hessian skip)
OPERATORS = get_args(Curvature)
Operator = Union[HessianProducts, "GGNLinearOperator"]

# curvlinops multiplies a (P, K) block by vmapping over its K columns, holding one set of
# activations per column (HessianProducts takes the columns one at a time): multiply at most this
# many at once to bound memory on big models.
COLUMNS_PER_PRODUCT = 16


# ------------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class EigenResult:
    eigenvalues: tuple[float, ...]  # the k largest (algebraically), descending
    eigenvectors: Tensor  # (k, P) unit rows, largest-magnitude entry positive
    iterations: int  # Lanczos steps taken (≤ max_iter; fewer when converged to ``tol``)
    num_matvecs: int  # iterations + k (one block product for the residuals)
    residual_norms: tuple[float, ...]  # ‖Hv − λv‖ of each pair, from an explicit product
    curvature: Curvature


@dataclass(frozen=True)
class DensityResult:
    grid: Tensor  # (G,) ascending eigenvalue axis
    density: Tensor  # (G,) ≥ 0, trapezoid integral over ``grid`` = 1
    nodes: Tensor  # (R, m) Ritz values of each probe's Lanczos run, ascending
    weights: Tensor  # (R, m) their Gauss quadrature weights, each row summing to 1
    sigma: float  # std of the Gaussian kernel, in eigenvalue units
    curvature: Curvature


# ------------------------------------------------------------------------- model and operator


@contextmanager
def curvature_model(model: nn.Module, dtype: torch.dtype) -> Iterator[nn.Module]:
    """``model`` in eval mode and in ``dtype`` for the duration; every module's own train flag
    is restored afterwards. A model already in ``dtype`` is used as is; otherwise a converted
    copy, so the caller's parameters are never touched."""
    flags = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        same = all(p.dtype == dtype for p in model.parameters())
        yield model if same else copy.deepcopy(model).to(dtype)
    finally:
        for module, training in flags:
            module.training = training


class MeanLoss(nn.Module):
    """A loss callable as the module curvlinops expects: it reads ``reduction`` and, for "mean",
    weights each batch by its share of the examples, so the operator is the curvature of the
    mean over all of (X, y) however the data are batched."""

    reduction = "mean"

    def __init__(self, loss_fn: LossFn) -> None:
        super().__init__()
        self.loss_fn = loss_fn

    def forward(self, output: Tensor, target: Tensor) -> Tensor:
        return self.loss_fn(output, target)


def check_loss_data(loss_fn: LossFn, X: Tensor, y: Tensor) -> None:
    """What every curvature analysis needs of its loss and data: a loss that is the mean over
    the batch (the curvature of a sum would scale with n), and as many targets as inputs."""
    if getattr(loss_fn, "reduction", "mean") != "mean":
        raise ValueError("loss_fn must return the mean over the batch (reduction='mean')")
    if len(X) != len(y) or len(X) == 0:
        raise ValueError(f"X and y must hold the same nonzero number of examples, got "
                         f"{len(X)} and {len(y)}")


def curvature_operator(model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor,
                       curvature: Curvature = "hessian", batch_size: int | None = None,
                       ) -> Operator:
    """The operator for the curvature of the mean loss over (X, y) w.r.t. the model's
    trainable parameters, in the model's dtype, products taken ``batch_size`` examples at a time
    (all at once for None). Use the model as :func:`curvature_model` yields it."""
    if curvature not in OPERATORS:
        raise ValueError(f"unknown curvature {curvature!r}; known: {sorted(OPERATORS)}")
    check_loss_data(loss_fn, X, y)
    params = [p for p in model.parameters() if p.requires_grad]
    size = len(X) if batch_size is None else batch_size
    data = list(zip(X.split(size), y.split(size), strict=True))
    if curvature == "hessian":
        return HessianProducts(model, loss_fn, params, data, num_data=len(X))
    from curvlinops import GGNLinearOperator

    # check_deterministic would cost two passes over the data and two products, and it prints;
    # eval mode already makes the products deterministic for models without sampling.
    return GGNLinearOperator(model, MeanLoss(loss_fn), params, data, num_data=len(X),
                             check_deterministic=False)


def as_dtype(X: Tensor, dtype: torch.dtype) -> Tensor:
    """Floating inputs in ``dtype``; integer inputs (token ids, labels) as they are."""
    return X.to(dtype) if X.is_floating_point() else X  # token ids stay integers


@contextmanager
def _operator(model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor, curvature: Curvature,
              dtype: torch.dtype, batch_size: int | None,
              ) -> Iterator[Operator]:
    with curvature_model(model, dtype) as net:
        yield curvature_operator(net, loss_fn, as_dtype(X, dtype), y, curvature, batch_size)


def _matmat(operator: Operator) -> Callable[[Tensor], Tensor]:
    """M (P, K) ↦ A M, in blocks of at most COLUMNS_PER_PRODUCT columns."""

    def apply(M: Tensor) -> Tensor:
        blocks = M.split(COLUMNS_PER_PRODUCT, dim=1)
        return torch.cat([operator @ block for block in blocks], dim=1)

    return apply


# --------------------------------------------------------------------------------- analyses


def _start_vector(v0: Tensor | None, dim: int, dtype: torch.dtype, device: torch.device,
                  seed: int) -> Tensor:
    """``v0`` as one start vector: a (j, P) block becomes the sum of its unit rows, which has a
    component along each of them (one Lanczos run from it reaches all j within ~j steps when
    they are exact). Without ``v0``, a Gaussian vector."""
    if v0 is None:
        generator = torch_generator(seed, "sharpness", "lanczos-start")
        return torch.randn(dim, generator=generator, dtype=dtype).to(device)
    block = v0.detach().to(device=device, dtype=dtype).reshape(-1, v0.shape[-1])
    if block.shape[1] != dim:
        raise ValueError(f"v0 has {block.shape[1]} entries per vector, the model {dim} "
                         "trainable parameters")
    return (block / torch.linalg.vector_norm(block, dim=1, keepdim=True)).sum(dim=0)


def hessian_top_eigenvalues(model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor, k: int = 1,
                            curvature: Curvature = "hessian", max_iter: int = 20,
                            v0: Tensor | None = None, dtype: torch.dtype = torch.float64,
                            batch_size: int | None = None, *, tol: float = 1e-6,
                            seed: int = 0) -> EigenResult:
    """The k largest eigenvalues of the curvature and their eigenvectors, by Lanczos.

    At most ``max_iter`` curvature-vector products (plus k for the reported residuals), fewer
    when every top-k Ritz residual falls below ``tol``·max|θ| first; see
    :func:`genlab.analyses.curvature.lanczos.lanczos`. An eigenvalue's error is at most its residual
    norm, and at most residual²/gap when it is separated from the rest of the spectrum by a gap.
    Start from ``v0`` (the previous top eigenvector(s), (P,) or (j, P), when tracking sharpness
    during training: near a converged start one or two steps suffice), else from a random vector
    drawn from ``seed``. A start orthogonal to the top eigenvectors cannot find them, as with
    any Krylov method; a previous eigenvector is never exactly so.
    """
    with _operator(model, loss_fn, X, y, curvature, dtype, batch_size) as operator:
        dim = operator.shape[0]
        start = _start_vector(v0, dim, dtype, operator.device, seed)
        tridiagonal = lanczos(_matmat(operator), start, max_iter, tol=tol, k=k,
                              generator=torch_generator(seed, "sharpness", "lanczos-restart"))
        values, vectors, _ = (x[0] for x in ritz_pairs(tridiagonal, k))  # the one run
        residuals = _matmat(operator)(vectors.T) - vectors.T * values  # (P, k)
    return EigenResult(eigenvalues=tuple(values.tolist()), eigenvectors=vectors,
                       iterations=tridiagonal.steps, num_matvecs=tridiagonal.steps + k,
                       residual_norms=tuple(torch.linalg.vector_norm(residuals, dim=0).tolist()),
                       curvature=curvature)


def hessian_trace(model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor,
                  num_matvecs: int = 99, method: TraceMethod = "hutchpp",
                  curvature: Curvature = "hessian", seed: int = 0,
                  dtype: torch.dtype = torch.float64,
                  batch_size: int | None = None) -> TraceResult:
    """Tr of the curvature by Hutchinson or Hutch++ with ``num_matvecs`` products and a standard
    error (both derived in :mod:`genlab.analyses.curvature.trace`). Tr H = Σᵢ λᵢ, the sharpness
    measure of Wu & Su (2023): a minimum that SGD with batch size 1 can stay at has Tr H ≤ 2/η."""
    if method not in ESTIMATORS:
        raise ValueError(f"unknown trace method {method!r}; known: {sorted(ESTIMATORS)}")
    with _operator(model, loss_fn, X, y, curvature, dtype, batch_size) as operator:
        return ESTIMATORS[method](_matmat(operator), operator.shape[0], num_matvecs,
                                  torch_generator(seed, "sharpness", "trace"), dtype,
                                  operator.device)


def smoothed_density(nodes: Tensor, weights: Tensor, grid: Tensor, sigma: float) -> Tensor:
    """φ(t) = (1/R) Σ_r Σ_j τ_rj N(t; θ_rj, σ²) on ``grid``, rescaled so its trapezoid integral
    over the grid is 1 (the Gaussians' mass outside the grid is dropped, not spread)."""
    if sigma <= 0:
        raise ValueError(f"sigma must be positive, got {sigma}")
    z = (grid[:, None] - nodes.reshape(1, -1)) / sigma  # (G, R·m)
    bumps = torch.exp(-0.5 * z.square()) / (sigma * (2 * torch.pi) ** 0.5)
    raw = bumps @ weights.reshape(-1) / nodes.shape[0]
    mass = torch.trapezoid(raw, grid)
    if not mass > 0:
        raise ValueError("the grid holds none of the spectrum's mass")
    return raw / mass


def spectral_density(model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor,
                     num_repeats: int = 5, num_steps: int = 30,
                     grid: int | Sequence[float] | Tensor = 512,
                     curvature: Curvature = "hessian", seed: int = 0, *,
                     kernel_width: float = 0.01, dtype: torch.dtype = torch.float64,
                     batch_size: int | None = None) -> DensityResult:
    """The eigenvalue density (1/P) Σᵢ δ(t − λᵢ) by stochastic Lanczos quadrature.

    Ghorbani, Krishnan & Xiao (ICML 2019), after Lin, Saad & Yang (2016): for a unit probe q,
    ∫ f dμ_q with μ_q = Σᵢ (qᵀuᵢ)² δ_{λᵢ} is qᵀ f(H) q, and E_q[(qᵀuᵢ)²] = 1/P for a normalised
    Rademacher q, so μ_q is an unbiased estimate of the density; ``num_steps`` Lanczos steps from
    q give its Gauss quadrature Σ_j τ_j δ_{θ_j}
    (:func:`genlab.analyses.curvature.lanczos.quadrature`), which matches μ_q's moments up to
    order 2·num_steps − 1. Averaging ``num_repeats`` probes and smoothing each node with a
    Gaussian of std σ = ``kernel_width`` × (spread of the nodes) gives the density
    (:func:`smoothed_density`). For a fraction f of the eigenvalues above a threshold, μ_q's mass
    above it is qᵀΠq with Π the projector on their eigenvectors, of variance
    2(‖Π‖_F² − Σⱼ Πⱼⱼ²)/P² ≤ 2f(1 − f)/P (Σⱼ Πⱼⱼ² ≥ (Tr Π)²/P); so with R probes its standard
    error is at most √(2f(1 − f)/(P·R)), to which the quadrature adds the weight of any node near
    the threshold and the kernel the mass it spreads across it.

    ``grid``: a number of points spanning the nodes ± 5σ, or the points themselves (to compare
    densities across checkpoints on one axis). ``num_repeats × num_steps`` products in all,
    taken as ``num_steps`` block products; the bases take num_repeats·num_steps·P numbers.
    """
    if num_repeats < 1 or num_steps < 1:
        raise ValueError("num_repeats and num_steps must be positive")
    generator = torch_generator(seed, "sharpness", "density")
    with _operator(model, loss_fn, X, y, curvature, dtype, batch_size) as operator:
        probes = rademacher(operator.shape[0], num_repeats, generator, dtype, operator.device)
        # the R runs advance together, one block product per step
        # (see genlab.analyses.curvature.lanczos)
        tridiagonal = lanczos(_matmat(operator), probes, num_steps, generator=generator)
    node_matrix, weight_matrix = quadrature(tridiagonal)
    spread = float(node_matrix.max() - node_matrix.min())
    # a spectrum of one repeated value (a zero Hessian) still gets a bump of sensible width
    sigma = kernel_width * (spread if spread > 0 else max(float(node_matrix.abs().max()), 1.0))
    if isinstance(grid, int):
        if grid < 2:
            raise ValueError(f"a grid needs at least 2 points, got {grid}")
        points = torch.linspace(float(node_matrix.min()) - 5 * sigma,
                                float(node_matrix.max()) + 5 * sigma, grid, dtype=dtype)
    else:
        points = torch.as_tensor(grid, dtype=dtype)
        if points.ndim != 1 or points.numel() < 2 or not bool((points.diff() > 0).all()):
            raise ValueError("grid must be a number of points or ≥ 2 increasing values")
    points = points.to(node_matrix.device)
    return DensityResult(grid=points,
                         density=smoothed_density(node_matrix, weight_matrix, points, sigma),
                         nodes=node_matrix, weights=weight_matrix, sigma=sigma,
                         curvature=curvature)


def sharpness_vs_lr(top_eigenvalue: float, lr: float) -> float:
    """λ_max / (2/η): gradient descent with step size η is stable on a quadratic with top
    curvature λ_max only while λ_max ≤ 2/η (the step along the top eigenvector multiplies the
    error by |1 − ηλ_max|), so 1 is the edge of stability, where full-batch GD hovers after
    progressive sharpening (Cohen, Kaur, Li, Kolter & Talwalkar, ICLR 2021)."""
    if not lr > 0:
        raise ValueError(f"the learning rate must be positive, got {lr}")
    return top_eigenvalue * lr / 2.0


def stability_threshold(lr: float, momentum: float = 0.0) -> float:
    """The largest curvature at which (heavy-ball) gradient descent with step size η and momentum
    β is stable on a quadratic: (2 + 2β)/η, which is 2/η without momentum. Along an eigenvector
    with curvature λ the iteration's characteristic roots stay inside the unit circle exactly
    while ηλ < 2(1 + β) (Goh 2017; Cohen et al. 2021, appendix on momentum)."""
    if not lr > 0:
        raise ValueError(f"the learning rate must be positive, got {lr}")
    if not 0 <= momentum < 1:
        raise ValueError(f"momentum must be in [0, 1), got {momentum}")
    return (2.0 + 2.0 * momentum) / lr


__all__ = ["COLUMNS_PER_PRODUCT", "OPERATORS", "Curvature", "DensityResult", "EigenResult",
           "LossFn", "MeanLoss", "SharpnessSettings", "TraceResult", "as_dtype", "check_loss_data",
           "curvature_model", "curvature_operator", "hessian_top_eigenvalues", "hessian_trace",
           "sharpness_vs_lr", "smoothed_density", "spectral_density", "stability_threshold",
           "subsample"]
