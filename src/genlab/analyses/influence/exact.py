"""Influence functions: which training examples a trained model's test losses depend on.

**Sign convention (every score in this module and in
:mod:`genlab.analyses.influence.ground_truth`).** A score is Koh & Liang's (ICML 2017)

    I[t, i] = I_up,loss(zᵢ, z_t) = −∇ℓ(z_t)ᵀ (H + λI)⁻¹ ∇ℓ(zᵢ),

the derivative of the test loss ℓ(z_t; θ̂_ε) with respect to the weight ε given to the training
example zᵢ in the objective (1/n) Σⱼ ℓ(zⱼ; θ) + ε ℓ(zᵢ; θ) + (λ/2)‖θ‖² at ε = 0. **Positive means
harmful**: upweighting zᵢ raises the test loss, so removing it (ε = −1/n) lowers it, by
≈ −I[t, i]/n. **Negative means helpful: removing zᵢ increases the test loss.** The leave-one-out
and LDS harnesses use the same convention (predicted ΔL_t = −I[t, i]/n). kronfluence's scores
and TracIn's are the opposite ("positive = helpful");
:func:`genlab.analyses.influence.kfac.kronfluence_influence` and :func:`gradient_dot` negate them
so all methods are comparable entry for entry.

Here θ̂ is the trained model's parameters (the trainable ones, in ``model.parameters()`` order,
flattened as ``torch.nn.utils.parameters_to_vector``), ℓ the per-example loss (``loss_fn`` on a
batch of one: ``loss_fn`` returns the mean over its batch, as in
:mod:`genlab.analyses.curvature.hessian`), H the curvature of the mean *training* loss
(1/n) Σⱼ ℓ(zⱼ; θ) at θ̂: the Hessian, or the Gauss-Newton matrix G (PSD; a trained net's Hessian
is indefinite, DESIGN.md), and λ the damping. **An L2 penalty (λ/2)‖θ‖² in the training objective
(SGD's ``weight_decay=λ``) is exactly ``damping=λ``**: its Hessian is λI, and it is not part of
any per-example gradient (removing an example leaves the penalty in place). Extra damping on top
of it regularises the inverse.

Solvers of (H + λI) x = v (:func:`inverse_hvp`), all in float64 by default:

- ``dense``: the P × P matrix, a Cholesky factorisation, and triangular solves; for P up to a
  few thousand (P² floats: 32 MB at P = 2000). An indefinite matrix (the Hessian with
  λ < |λ_min|) has no Cholesky factor and is solved by LU instead (``positive_definite=False``
  in the result).
- ``cg``: conjugate gradients, matrix-free, one block product per iteration for all right-hand
  sides still unconverged; needs H + λI positive definite (raises on non-positive curvature).
- ``lissa``: the stochastic recursion of Agarwal, Bullins & Hazan (JMLR 2017) as Koh & Liang use
  it, x_j = v + x_{j−1} − (H_{B_j} + λI) x_{j−1}/s, output x_J/s, with H_{B_j} the curvature on
  a random minibatch B_j; see :func:`inverse_hvp`.

The curvature operators: the GGN from per-example Jacobians
(:class:`genlab.analyses.curvature.ggn.GaussNewton`: one Jacobian pass per product whatever the
number of vectors, and the dense matrix in one pass), the Hessian through curvlinops
(:func:`genlab.analyses.curvature.hessian.curvature_operator`: Hessian-vector products, the dense
matrix from P of them).

K-FAC and EK-FAC scores (kronfluence) live in :mod:`genlab.analyses.influence.kfac`.

**Memory.** Scores are computed without materialising the (n, P) matrix of per-example
gradients: gradients are formed ``chunk_size`` examples at a time (``vmap(grad)``), the inverse
is applied to one chunk of the smaller side (test or train) at a time, and that chunk's solutions
are multiplied with the other side's gradients streamed chunk by chunk. Peak memory is then
O(chunk_size·P) for gradients and solutions, plus P² for the ``dense`` solver's matrix and the
(n_test, n_train) score matrix itself; the curvature products take ``batch_size`` examples at a
time (all at once for None; the GGN's Jacobians then hold ``batch_size``·C·P numbers). The cost
is recomputing the streamed side's gradients once per chunk of the solved side.
:func:`per_example_gradients` does materialise them (for callers that want them, e.g. the vectors
of :func:`inverse_hvp`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap
from torch.nn import functional as F

from genlab.analyses.curvature.ggn import GaussNewton, gram_product
from genlab.analyses.curvature.hessian import (
    COLUMNS_PER_PRODUCT,
    Curvature,
    LossFn,
    curvature_model,
    curvature_operator,
)
from genlab.analyses.curvature.lanczos import lanczos, ritz_pairs
from genlab.losses import loss_value
from genlab.seeding import torch_generator

InverseMethod = Literal["dense", "cg", "lissa"]
LISSA_CACHED_ENTRIES = 2**24
"""Bound on n·C·P, the examples' GGN factors LiSSA keeps (128 MiB in float64); above it each
minibatch product recomputes its examples' Jacobians."""
LossKind = Literal["cross_entropy", "mse", "squared_margin", "binary_cross_entropy"]


def loss_function(kind: LossKind) -> LossFn:
    """The mean loss of ``kind`` as a ``loss_fn``: :func:`genlab.losses.loss_value`'s losses,
    plus ``binary_cross_entropy`` (a scalar logit f, targets in {0, 1}). The kronfluence wrappers
    (:mod:`genlab.analyses.influence.kfac`) take the kind, since they must also sample targets
    from the model's predictive distribution."""
    if kind == "binary_cross_entropy":
        def bce(output: Tensor, target: Tensor) -> Tensor:
            return F.binary_cross_entropy_with_logits(output.reshape(target.shape),
                                                      target.to(output.dtype))
        return bce
    if kind not in ("cross_entropy", "mse", "squared_margin"):
        raise ValueError(f"unknown loss {kind!r}")

    def mean_loss(output: Tensor, target: Tensor) -> Tensor:
        return loss_value(kind, output, target)

    return mean_loss


# ------------------------------------------------------------------------------- gradients


def _as_dtype(X: Tensor, dtype: torch.dtype) -> Tensor:
    return X.to(dtype) if X.is_floating_point() else X  # token ids and class labels stay integers


def _gradient_rows(net: nn.Module, loss_fn: LossFn) -> Callable[[Tensor, Tensor], Tensor]:
    """(xs, ts) ↦ (len(xs), P) rows ∇_θ ℓ(xᵢ, tᵢ) of ``net`` as it is (use it inside
    :func:`curvature_model`): vmap(grad) of ``loss_fn`` on batches of one."""
    named = [(name, p) for name, p in net.named_parameters() if p.requires_grad]
    names = [name for name, _ in named]
    fixed = {name: p.detach() for name, p in net.named_parameters() if not p.requires_grad}
    fixed.update(dict(net.named_buffers()))
    params = tuple(p.detach() for _, p in named)

    def loss_one(theta: tuple[Tensor, ...], x: Tensor, target: Tensor) -> Tensor:
        output = functional_call(net, {**fixed, **dict(zip(names, theta, strict=True))},
                                 (x.unsqueeze(0),))
        return loss_fn(output, target.unsqueeze(0))

    per_example = vmap(grad(loss_one), in_dims=(None, 0, 0))

    def rows(xs: Tensor, ts: Tensor) -> Tensor:
        grads = per_example(params, xs, ts)
        return torch.cat([g.reshape(len(xs), -1) for g in grads], dim=1)

    return rows


def _gradient_chunks(net: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor, chunk_size: int,
                     dtype: torch.dtype) -> Iterator[tuple[int, Tensor]]:
    """(start, rows) for consecutive chunks of at most ``chunk_size`` examples."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    rows = _gradient_rows(net, loss_fn)
    start = 0
    for xs, ts in zip(_as_dtype(X, dtype).split(chunk_size), _as_dtype(y, dtype).split(chunk_size),
                      strict=True):
        yield start, rows(xs, ts)
        start += len(xs)


def _num_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def per_example_gradients(model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor, *,
                          chunk_size: int = 256, dtype: torch.dtype = torch.float64) -> Tensor:
    """(n, P) rows ∇_θ ℓ(xᵢ, yᵢ): vmap(grad) of ``loss_fn`` on batches of one, ``chunk_size``
    examples at a time, in eval mode and ``dtype`` (the model is left as it was). This
    materialises all n rows; :func:`gradient_products` streams them instead."""
    with curvature_model(model, dtype) as net:
        rows = [chunk for _, chunk in _gradient_chunks(net, loss_fn, X, y, chunk_size, dtype)]
        return torch.cat(rows) if rows else torch.zeros(0, _num_parameters(net), dtype=dtype)


def _products_with(net: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor, V: Tensor,
                   chunk_size: int, dtype: torch.dtype, out: Tensor | None = None,
                   scale: float = 1.0) -> Tensor:
    """scale·V Gᵀ (K, n), written into ``out`` when given (no (K, n) temporaries)."""
    if out is None:
        out = torch.empty(len(V), len(X), dtype=dtype, device=V.device)
    for start, G in _gradient_chunks(net, loss_fn, X, y, chunk_size, dtype):
        block = V @ G.to(V.device).T  # (K, chunk)
        out[:, start:start + len(G)] = block if scale == 1.0 else block.mul_(scale)
    return out


def gradient_products(model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor, V: Tensor, *,
                      chunk_size: int = 256, dtype: torch.dtype = torch.float64) -> Tensor:
    """(K, n) V ∇ℓ(zᵢ): the rows of V (K, P) against every example's gradient, the gradients
    formed ``chunk_size`` at a time and never all held (memory K·n + chunk_size·P)."""
    with curvature_model(model, dtype) as net:
        if V.ndim != 2 or V.shape[1] != _num_parameters(net):
            raise ValueError(f"V must be (K, P={_num_parameters(net)}), got {tuple(V.shape)}")
        return _products_with(net, loss_fn, X, y, V.to(dtype), chunk_size, dtype)


# ------------------------------------------------------------------------- inverse products


@dataclass(frozen=True)
class InverseHVPResult:
    solution: Tensor  # (K, P) rows (H + λI)⁻¹ vₖ, or (P,) for one vector
    method: InverseMethod
    iterations: int  # CG iterations, or LiSSA steps per repeat; 0 for dense
    relative_residuals: Tensor  # (K,) ‖(H + λI)x − v‖/‖v‖ from an explicit full-data product
    positive_definite: bool | None  # dense: whether Cholesky succeeded; None for cg and lissa
    scale: float | None = None  # LiSSA's s


def _operator(net: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor, curvature: Curvature,
              batch_size: int | None):
    """The curvature of the mean loss over (X, y): :class:`GaussNewton` for the GGN,
    curvlinops' Hessian operator otherwise."""
    if curvature == "ggn":
        if len(X) != len(y) or len(X) == 0:
            raise ValueError(f"X and y must hold the same nonzero number of examples, got "
                             f"{len(X)} and {len(y)}")
        return GaussNewton(net, loss_fn, X, y, batch_size)
    return curvature_operator(net, loss_fn, X, y, curvature, batch_size)


def _block_products(operator) -> Callable[[Tensor], Tensor]:
    """M (P, K) ↦ A M; through curvlinops at most COLUMNS_PER_PRODUCT columns per product
    (bounded memory), through :class:`GaussNewton` all at once (one Jacobian pass)."""

    def apply(M: Tensor) -> Tensor:
        if M.shape[1] == 0:
            return M.clone()
        if isinstance(operator, GaussNewton):
            return operator @ M
        return torch.cat([operator @ block for block in M.split(COLUMNS_PER_PRODUCT, dim=1)], 1)

    return apply


def _dense(operator) -> Tensor:
    """The symmetrised dense matrix of an operator (P products unless it is the GGN)."""
    if isinstance(operator, GaussNewton):
        return operator.dense()
    eye = torch.eye(operator.shape[0], dtype=operator.dtype, device=operator.device)
    matrix = _block_products(operator)(eye)
    return 0.5 * (matrix + matrix.T)  # symmetric up to rounding; make it exactly so


def curvature_matrix(model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor,
                     curvature: Curvature = "ggn", *, dtype: torch.dtype = torch.float64,
                     batch_size: int | None = None) -> Tensor:
    """The dense (P, P) curvature of the mean loss over (X, y) (undamped), symmetrised."""
    with curvature_model(model, dtype) as net:
        return _dense(_operator(net, loss_fn, _as_dtype(X, dtype), y, curvature, batch_size))


def _cg(apply: Callable[[Tensor], Tensor], B: Tensor, tol: float,
        max_iter: int) -> tuple[Tensor, int]:
    """Independent conjugate-gradient runs for the columns of B (P, K), batched: each iteration
    is one product with the columns not yet at ‖r‖ ≤ tol·‖b‖."""
    X = torch.zeros_like(B)
    R = B.clone()
    D = R.clone()
    rs = R.square().sum(dim=0)
    target = tol * torch.linalg.vector_norm(B, dim=0)
    iterations = 0
    while iterations < max_iter:
        active = (rs.sqrt() > target).nonzero().squeeze(1)
        if len(active) == 0:
            break
        iterations += 1
        d = D[:, active]
        Ad = apply(d)
        curvature = (d * Ad).sum(dim=0)
        if bool((curvature <= 0).any()):
            raise ValueError("conjugate gradients met non-positive curvature: H + λI is not "
                             "positive definite (use the GGN, more damping, or method='dense')")
        alpha = rs[active] / curvature
        X[:, active] += alpha * d
        R[:, active] -= alpha * Ad
        new_rs = R[:, active].square().sum(dim=0)
        D[:, active] = R[:, active] + (new_rs / rs[active]) * d
        rs[active] = new_rs
    return X, iterations


def _top_eigenvalue(products: Callable[[Tensor], Tensor], dim: int, dtype: torch.dtype,
                    device: torch.device, seed: int) -> float:
    generator = torch_generator(seed, "influence", "lissa-scale")
    start = torch.randn(dim, generator=generator, dtype=dtype).to(device)
    tridiagonal = lanczos(products, start, 20, tol=1e-4, generator=generator)
    values, _, residuals = ritz_pairs(tridiagonal, 1)
    return float(values[0, 0] + residuals[0, 0])


class _Solver:
    """(H + λI)⁻¹ prepared once (the dense factorisation, LiSSA's scale and depth) for many
    right-hand sides; use inside :func:`curvature_model`. See :func:`inverse_hvp`."""

    def __init__(self, net: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor, damping: float,
                 curvature: Curvature, method: InverseMethod, *, tol: float,
                 max_iter: int | None, scale: float | None, depth: int | None, repeats: int,
                 lissa_batch_size: int, seed: int, dtype: torch.dtype,
                 batch_size: int | None) -> None:
        if not damping >= 0:
            raise ValueError(f"damping must be non-negative, got {damping}")
        if method not in ("dense", "cg", "lissa"):
            raise ValueError(f"unknown method {method!r}; known: dense, cg, lissa")
        self.net, self.loss_fn, self.X, self.y = net, loss_fn, _as_dtype(X, dtype), y
        self.damping, self.curvature, self.method = damping, curvature, method
        self.tol, self.repeats, self.seed = tol, repeats, seed
        operator = _operator(net, loss_fn, self.X, y, curvature, batch_size)
        self.dim, self.dtype, self.device = operator.shape[0], dtype, operator.device
        self.operator, self.full = operator, _block_products(operator)
        self.positive_definite: bool | None = None
        self.scale: float | None = None
        self.depth = 0
        if method == "dense":
            eye = torch.eye(self.dim, dtype=dtype, device=self.device)
            self.A = _dense(self.operator) + damping * eye
            self.factor, info = torch.linalg.cholesky_ex(self.A)
            self.positive_definite = int(info) == 0
            if not self.positive_definite:
                self.lu = torch.linalg.lu_factor(self.A)
        elif method == "cg":
            self.max_iter = min(2 * self.dim, 10_000) if max_iter is None else max_iter
        else:
            if repeats < 1 or lissa_batch_size < 1:
                raise ValueError("repeats and lissa_batch_size must be positive")
            if scale is None:
                top = _top_eigenvalue(self.full, self.dim, dtype, self.device, seed)
                scale = 1.5 * (max(top, 0.0) + damping)
            if not scale > 0:
                raise ValueError(f"the LiSSA scale must be positive, got {scale}")
            if depth is None:
                if not damping > 0:
                    raise ValueError("LiSSA without damping needs an explicit depth")
                depth = min(math.ceil(scale / damping * math.log(1e3)), 10_000)
            self.scale, self.depth = scale, depth
            self.batch = min(lissa_batch_size, len(self.X))

    def damped(self, M: Tensor) -> Tensor:
        return self.full(M) + self.damping * M

    def solve(self, B: Tensor) -> tuple[Tensor, int]:
        """X (P, K) for right-hand sides B (P, K), and the iterations it took."""
        if self.method == "dense":
            if self.positive_definite:
                return torch.cholesky_solve(B, self.factor), 0
            return torch.linalg.lu_solve(*self.lu, B), 0
        if self.method == "cg":
            return _cg(self.damped, B, self.tol, self.max_iter)
        return self._lissa(B), self.depth

    def residual(self, solution: Tensor, B: Tensor) -> Tensor:
        """‖(H + λI)x − b‖/‖b‖ per column, from one explicit product."""
        product = self.A @ solution if self.method == "dense" else self.damped(solution)
        norms = torch.linalg.vector_norm(B, dim=0)
        return (torch.linalg.vector_norm(product - B, dim=0)
                / torch.where(norms > 0, norms, 1.0))

    def _lissa(self, B: Tensor) -> Tensor:
        # the same minibatch sequence for every call: chunking the right-hand sides does not
        # change the result
        n, X, y, scale = len(self.X), self.X, self.y, self.scale
        factors = self._example_factors()
        generator = torch_generator(self.seed, "influence", "lissa-batches")
        total = torch.zeros_like(B)
        for _ in range(self.repeats):
            x = B.clone()
            for _ in range(self.depth):
                index = torch.randperm(n, generator=generator)[:self.batch].to(X.device)
                if factors is not None:  # the minibatch's GGN from the examples' J and Λ
                    product = gram_product(factors[0][index], factors[1][index], x)
                else:
                    minibatch = _operator(self.net, self.loss_fn, X[index],
                                          y[index.to(y.device)], self.curvature, None)
                    product = _block_products(minibatch)(x)
                x = B + x - (product + self.damping * x) / scale
            total += x / scale
        return total / self.repeats

    def _example_factors(self) -> tuple[Tensor, Tensor] | None:
        """Every example's GGN factors J and Λ, once, where the GGN is the curvature and they
        fit LISSA_CACHED_ENTRIES numbers: LiSSA's thousands of minibatch products then each
        cost two contractions instead of a Jacobian pass (the minibatch's J was ~90% of
        LiSSA's time on the influence study's MLP). None otherwise."""
        if not isinstance(self.operator, GaussNewton):
            return None
        with torch.no_grad():
            outputs = self.net(self.X[:1]).numel()
        if len(self.X) * outputs * self.dim > LISSA_CACHED_ENTRIES:
            return None
        return self.operator.factors()


def inverse_hvp(model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor, vectors: Tensor,
                damping: float, curvature: Curvature = "ggn", method: InverseMethod = "dense", *,
                tol: float = 1e-10, max_iter: int | None = None, scale: float | None = None,
                depth: int | None = None, repeats: int = 1, lissa_batch_size: int = 64,
                seed: int = 0, dtype: torch.dtype = torch.float64,
                batch_size: int | None = None) -> InverseHVPResult:
    """x = (H + λI)⁻¹ v for each row v of ``vectors`` (K, P) (or one (P,) vector), with H the
    curvature of the mean loss over (X, y) and λ = ``damping``.

    - ``dense``: see the module docstring.
    - ``cg``: stops each column at ‖(H + λI)x − v‖ ≤ ``tol``·‖v‖, or after ``max_iter``
      iterations (default 2P, at most 10 000; exact arithmetic needs at most P).
    - ``lissa``: the recursion x_j = v + x_{j−1} − (H_B + λI) x_{j−1}/s on minibatches B of
      ``lissa_batch_size`` examples (drawn without replacement, fresh each step, from ``seed``),
      output x_J/s, averaged over ``repeats`` independent runs. Its fixed point is
      s(H + λI)⁻¹v; each eigencomponent (eigenvalue μ of H + λI) converges as (1 − μ/s)^J while
      0 < μ < 2s, so s must exceed half the largest minibatch eigenvalue. ``scale`` None takes
      s = 1.5 (θ + λ), θ an upper estimate of λ_max(H) from 20 Lanczos steps on the full data
      (margin for minibatch eigenvalues up to 3 λ_max). ``depth`` J None takes
      ⌈(s/λ) ln 10³⌉ (at most 10 000), where every component's truncation error is below 10⁻³
      even for μ = λ (the damping alone). Each step's E[H_B] = H makes the truncated series
      unbiased; its variance falls with the batch size and the repeats (the residual reported
      shows what was reached). Koh & Liang's damping d and scale s are λ = s·d here. Every call
      draws the same minibatch sequence from ``seed``.

    ``relative_residuals`` come from one explicit full-data product with all K solutions.
    """
    single = vectors.ndim == 1
    with curvature_model(model, dtype) as net:
        solver = _Solver(net, loss_fn, X, y, damping, curvature, method, tol=tol,
                         max_iter=max_iter, scale=scale, depth=depth, repeats=repeats,
                         lissa_batch_size=lissa_batch_size, seed=seed, dtype=dtype,
                         batch_size=batch_size)
        if vectors.ndim not in (1, 2) or vectors.shape[-1] != solver.dim:
            raise ValueError(f"vectors must be (P,) or (K, P) with P={solver.dim}, got "
                             f"{tuple(vectors.shape)}")
        B = vectors.detach().reshape(-1, solver.dim).to(device=solver.device, dtype=dtype).T
        solution, iterations = solver.solve(B)  # (P, K)
        relative = solver.residual(solution, B)
    solution = solution.T
    return InverseHVPResult(solution=solution[0] if single else solution, method=method,
                            iterations=iterations, relative_residuals=relative,
                            positive_definite=solver.positive_definite, scale=solver.scale)


# ---------------------------------------------------------------------------------- scores


def _check_pairs(X: Tensor, y: Tensor, what: str) -> None:
    if len(X) != len(y) or len(X) == 0:
        raise ValueError(f"{what}: X and y must hold the same nonzero number of examples, got "
                         f"{len(X)} and {len(y)}")


def exact_influence(model: nn.Module, loss_fn: LossFn, X_train: Tensor, y_train: Tensor,
                    X_test: Tensor, y_test: Tensor, damping: float,
                    curvature: Curvature = "ggn", solver: InverseMethod = "dense", *,
                    chunk_size: int = 256, dtype: torch.dtype = torch.float64,
                    batch_size: int | None = None, **solver_options) -> Tensor:
    """(n_test, n_train) I[t, i] = −∇ℓ(z_t)ᵀ (H + λI)⁻¹ ∇ℓ(zᵢ) (module docstring: positive =
    upweighting zᵢ raises test loss t; removing zᵢ changes it by ≈ −I[t, i]/n), H the
    curvature of the mean training loss. Solves for whichever side has fewer examples,
    ``chunk_size`` of them at a time, streaming the other side's gradients (module docstring,
    "Memory"); ``solver_options`` go to :func:`inverse_hvp` (tol, max_iter, scale, depth,
    repeats, lissa_batch_size, seed)."""
    _check_pairs(X_train, y_train, "train")
    _check_pairs(X_test, y_test, "test")
    options = {"tol": 1e-10, "max_iter": None, "scale": None, "depth": None, "repeats": 1,
               "lissa_batch_size": 64, "seed": 0} | solver_options
    solve_test = len(X_test) <= len(X_train)
    (Xs, ys), (Xo, yo) = (((X_test, y_test), (X_train, y_train)) if solve_test
                          else ((X_train, y_train), (X_test, y_test)))
    with curvature_model(model, dtype) as net:
        inverse = _Solver(net, loss_fn, X_train, y_train, damping, curvature, solver,
                          dtype=dtype, batch_size=batch_size, **options)
        scores = torch.empty(len(Xs), len(Xo), dtype=dtype, device=inverse.device)
        for start, G in _gradient_chunks(net, loss_fn, Xs, ys, chunk_size, dtype):
            solution, _ = inverse.solve(G.to(inverse.device).T)
            _products_with(net, loss_fn, Xo, yo, solution.T, chunk_size, dtype,
                           out=scores[start:start + len(G)], scale=-1.0)
    return scores if solve_test else scores.T


def exact_self_influence(model: nn.Module, loss_fn: LossFn, X_train: Tensor, y_train: Tensor,
                         damping: float, curvature: Curvature = "ggn",
                         solver: InverseMethod = "dense", *, chunk_size: int = 256,
                         dtype: torch.dtype = torch.float64, batch_size: int | None = None,
                         **solver_options) -> Tensor:
    """(n_train,) I[i, i] = −∇ℓ(zᵢ)ᵀ (H + λI)⁻¹ ∇ℓ(zᵢ), ≤ 0 for a PSD curvature (upweighting
    an example lowers its own loss); large magnitudes flag outliers and mislabelled examples.
    Solved ``chunk_size`` examples at a time."""
    _check_pairs(X_train, y_train, "train")
    options = {"tol": 1e-10, "max_iter": None, "scale": None, "depth": None, "repeats": 1,
               "lissa_batch_size": 64, "seed": 0} | solver_options
    with curvature_model(model, dtype) as net:
        inverse = _Solver(net, loss_fn, X_train, y_train, damping, curvature, solver,
                          dtype=dtype, batch_size=batch_size, **options)
        out = torch.empty(len(X_train), dtype=dtype, device=inverse.device)
        for start, G in _gradient_chunks(net, loss_fn, X_train, y_train, chunk_size, dtype):
            G = G.to(inverse.device)
            solution, _ = inverse.solve(G.T)
            out[start:start + len(G)] = -(solution.T * G).sum(dim=1)
    return out


def gradient_dot(model: nn.Module, loss_fn: LossFn, X_train: Tensor, y_train: Tensor,
                 X_test: Tensor, y_test: Tensor, lr: float | None = None, *,
                 chunk_size: int = 256, dtype: torch.dtype = torch.float64) -> Tensor:
    """(n_test, n_train) −η ∇ℓ(z_t)ᵀ ∇ℓ(zᵢ) (η = ``lr``, 1 if None): TracIn (Pruthi et al. 2020)
    at the final checkpoint only, negated into this module's convention. It is the change in
    test loss t from one SGD step of size η on zᵢ to first order, and the influence with the
    curvature replaced by I/η (λ → ∞: λ·I[t, i] → −∇ℓ_tᵀ∇ℓᵢ). Both sides' gradients are formed
    ``chunk_size`` at a time."""
    _check_pairs(X_train, y_train, "train")
    _check_pairs(X_test, y_test, "test")
    if lr is not None and not lr > 0:
        raise ValueError(f"lr must be positive, got {lr}")
    with curvature_model(model, dtype) as net:
        scores = None
        for start, G in _gradient_chunks(net, loss_fn, X_test, y_test, chunk_size, dtype):
            if scores is None:
                scores = torch.empty(len(X_test), len(X_train), dtype=dtype, device=G.device)
            _products_with(net, loss_fn, X_train, y_train, G, chunk_size, dtype,
                           out=scores[start:start + len(G)], scale=-(1.0 if lr is None else lr))
    return scores


def gradient_self_dot(model: nn.Module, loss_fn: LossFn, X_train: Tensor, y_train: Tensor, *,
                      chunk_size: int = 256, dtype: torch.dtype = torch.float64) -> Tensor:
    """(n_train,) −‖∇ℓ(zᵢ)‖²: the diagonal of :func:`gradient_dot` (TracIn's self-influence at
    the final checkpoint, Pruthi et al. 2020), in this module's convention."""
    _check_pairs(X_train, y_train, "train")
    with curvature_model(model, dtype) as net:
        return -torch.cat([G.square().sum(dim=1) for _, G in
                           _gradient_chunks(net, loss_fn, X_train, y_train, chunk_size, dtype)])


def random_scores(shape: tuple[int, int], seed: int = 0,
                  dtype: torch.dtype = torch.float64) -> Tensor:
    """Standard normal scores of ``shape`` (n_test, n_train) from ``seed``: the chance baseline
    (its LDS and LOO correlations are 0 in expectation)."""
    return torch.randn(shape, generator=torch_generator(seed, "influence", "random"), dtype=dtype)


# ----------------------------------------------------------------------------------- tables


def scores_table(scores: Tensor, method: str, train_ids: Sequence[int] | Tensor | None = None,
                 test_ids: Sequence[int] | Tensor | None = None) -> pa.Table:
    """A (n_test, n_train) score matrix as a long table, one row per pair, test-major:
    train_id (int64), test_id (int64), score (float64, this module's convention), method
    (string). Ids default to the row and column positions."""
    if scores.ndim != 2:
        raise ValueError(f"scores must be (n_test, n_train), got shape {tuple(scores.shape)}")
    n_test, n_train = scores.shape
    train = torch.arange(n_train) if train_ids is None else torch.as_tensor(train_ids)
    test = torch.arange(n_test) if test_ids is None else torch.as_tensor(test_ids)
    if train.shape != (n_train,) or test.shape != (n_test,):
        raise ValueError("train_ids and test_ids must match the columns and rows of scores")
    values = scores.detach().to("cpu", torch.float64)
    return pa.table({
        "train_id": pa.array(train.to(torch.int64).repeat(n_test).numpy()),
        "test_id": pa.array(test.to(torch.int64).repeat_interleave(n_train).numpy()),
        "score": pa.array(values.reshape(-1).numpy()),
        "method": pa.repeat(pa.scalar(method, pa.string()), n_test * n_train),
    })


__all__ = ["InverseHVPResult", "InverseMethod", "LossKind", "curvature_matrix",
           "exact_influence", "exact_self_influence", "gradient_dot", "gradient_products",
           "gradient_self_dot", "inverse_hvp", "loss_function", "per_example_gradients",
           "random_scores", "scores_table"]
