"""Non-uniformity: how much the per-example curvatures disagree (Wu, Ma & E, NeurIPS 2018).

For the training loss L = (1/n) Σᵢ ℓᵢ with per-example curvatures Hᵢ (Hessians of ℓᵢ, or their
Gauss-Newton parts Jᵢᵀ(∇²_f ℓ)Jᵢ) and H = (1/n) Σᵢ Hᵢ, Wu, Ma & E ("How SGD selects the global
minima in over-parameterized learning: a dynamical stability perspective") define

- the sharpness a = λ_max(H), and
- the non-uniformity s = λ_max(Σ)^{1/2}, Σ = (1/n) Σᵢ Hᵢ² − H² = (1/n) Σᵢ (Hᵢ − H)²,

Σ being the second moment of the curvature of one example drawn at random about its mean: a
variance, symmetric positive semi-definite, zero only when every example has the same curvature.

**Why it matters.** Near a global minimum θ* of an over-parameterised model trained with the
square loss, every ℓᵢ is minimal at θ* (the model interpolates), so ℓᵢ ≈ ½(θ − θ*)ᵀHᵢ(θ − θ*)
and an SGD step with learning rate η on a batch S of B examples drawn without replacement is,
linearised, e ← (I − η H_S) e with e = θ − θ* and H_S = (1/B) Σ_{i∈S} Hᵢ, of mean H and
E_S[(H_S − H)²] = (n − B)/(B(n − 1)) Σ. So E‖e_{t+1}‖² = E[e_tᵀ((I − ηH)² + η²(n − B)/(B(n − 1))
Σ) e_t], and their Theorem 1 states: θ* is linearly stable (E‖e_t‖² ≤ C‖e_0‖² for all t) if

    λ_max((I − ηH)² + η² (n − B)/(B(n − 1)) Σ) ≤ 1,

a condition that is also necessary in one dimension, where the expectation above is exactly
((1 − ηa)² + η²(n − B)s²/(B(n − 1))) E e_t². It can only hold if

    a ≤ 2/η   and   s ≤ (1/η) √(B(n − 1)/(n − B)) ≈ √B/η  (n ≫ B),

(the quadratic form at the top eigenvector of H, then at that of Σ), the two conditions the paper
draws its conclusions from: the learning rate bounds the sharpness, and learning rate and batch
size together bound the non-uniformity. :func:`genlab.analyses.curvature.hessian.sharpness_vs_lr`
gives aη/2 and :func:`nonuniformity_vs_lr` gives s over its bound; either above 1 means the
minimum fails the paper's condition. As conditions for mean-square stability itself: a ≤ 2/η is
necessary in any dimension (the mean E e_t alone follows e ← (I − ηH)e); the bound on s is
necessary when the Hᵢ commute (the dynamics then split into one-dimensional ones along their
common eigenvectors) but not in general, since the dynamics need not keep e along Σ's top
eigenvector (Mulayoff & Michaeli, NeurIPS 2023, derive the exact threshold). For the square
loss at an interpolating minimum Hᵢ is exactly its Gauss-Newton part Jᵢᵀ Jᵢ (the residual that
multiplies ∇²f vanishes), so ``curvature="ggn"`` computes the same a and s there, and is PSD
everywhere; with a scalar output Hᵢ = ∇f(xᵢ)∇f(xᵢ)ᵀ has rank one.

**Computation.** Σ is never formed: Lanczos (:mod:`genlab.analyses.curvature.lanczos`, capped at
``max_iter`` products) runs on the products

    Σ v = (1/n) Σᵢ Hᵢ (Hᵢ v − H v),

the centred form of (1/n) Σᵢ Hᵢ(Hᵢ v) − H(H v) (equal since Σᵢ (Hᵢ v − H v) = 0): it subtracts
vectors of the size of the deviations rather than two O(a²) terms, so a small s is not lost to
cancellation. One product costs 3n per-example curvature-vector products (Hᵢ v for H v, then Hᵢ v
and Hᵢ dᵢ again with dᵢ = Hᵢ v − H v, chunk by chunk), each example running through its own copy
of the parameters (``vmap`` over ``functional_call``) so that double backward gives all of a
chunk's products at once (:class:`PerExampleCurvature`), ``batch_size`` examples at a time so
memory stays at that many copies of the activations and of the P parameters. a comes from
Lanczos on H v = (1/n) Σᵢ Hᵢ v with the same products (n each), so a and s are of the same
curvature.

As in :mod:`genlab.analyses.curvature.hessian`: the model is evaluated in eval mode and in ``dtype``
(float64 by default, on a copy when the model is in another dtype), the caller's model is left as
found, and parameter-space vectors are the trainable parameters flattened in the order of
``model.named_parameters()``. ``loss_fn`` returns the mean over a batch of per-example losses
(ℓᵢ depending on example i alone, as L = (1/n) Σᵢ ℓᵢ presumes); the model's forward must run
under ``vmap`` (no data-dependent Python control flow).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap
from torch.nn.utils import parameters_to_vector

from genlab.analyses.curvature.hessian import LossFn, as_dtype, check_loss_data, curvature_model
from genlab.analyses.curvature.lanczos import MatMat, lanczos, ritz_pairs
from genlab.analyses.settings import Curvature, NonuniformitySettings
from genlab.seeding import torch_generator

CURVATURES = ("hessian", "ggn")


@dataclass(frozen=True)
class NonuniformityResult:
    sharpness: float  # a = λ_max(H), the top Ritz value
    nonuniformity: float  # s = √max(λ_max(Σ), 0)
    variance_top_eigenvalue: float  # s² = λ_max(Σ), the top Ritz value (≥ 0 up to rounding)
    sharpness_vector: Tensor  # (P,) unit top eigenvector of H, largest-magnitude entry positive
    nonuniformity_vector: Tensor  # (P,) unit top eigenvector of Σ
    sharpness_residual: float  # ‖H u − a u‖ from an explicit product: bounds the error in a
    variance_residual: float  # ‖Σ w − s² w‖, likewise for s²
    sharpness_iterations: int  # Lanczos steps for a (≤ max_iter)
    nonuniformity_iterations: int  # Lanczos steps for s²
    num_example_products: int  # per-example curvature-vector products in all
    num_examples: int  # n
    curvature: Curvature


def _grad(output: Tensor, inputs: Tensor, grad_output: Tensor | None = None, *,
          create_graph: bool = False, batched: bool = False) -> Tensor:
    """∂⟨output, grad_output⟩/∂inputs, keeping the graph for further products, and zeros where
    the output does not depend on the inputs (a zero curvature, not an error). ``batched``: the
    leading axis of ``grad_output`` holds K of them, done in one vmapped backward pass."""
    (result,) = torch.autograd.grad(output, inputs, grad_outputs=grad_output,
                                    create_graph=create_graph, retain_graph=True,
                                    allow_unused=True, is_grads_batched=batched)
    if result is None:
        shape = (grad_output.shape[0], *inputs.shape) if batched else inputs.shape
        return inputs.new_zeros(shape)
    return result


class PerExampleCurvature:
    """Products with the per-example curvatures Hᵢ of the mean loss over (X, y), with their mean
    H and with Σ = (1/n) Σᵢ (Hᵢ − H)², w.r.t. the model's trainable parameters, in the model's
    dtype, ``batch_size`` examples at a time (all at once for None). Use the model as
    :func:`genlab.analyses.curvature.hessian.curvature_model` yields it; it is never modified (the
    parameters go in through ``functional_call``). Blocks V are (P, K): K vectors as columns."""

    def __init__(self, model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor,
                 curvature: Curvature = "hessian", batch_size: int | None = None) -> None:
        if curvature not in CURVATURES:
            raise ValueError(f"unknown curvature {curvature!r}; known: {sorted(CURVATURES)}")
        check_loss_data(loss_fn, X, y)
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("the model has no trainable parameters")
        names = [name for name, _ in named]
        shapes = [p.shape for _, p in named]
        sizes = [p.numel() for _, p in named]
        self.theta = parameters_to_vector([p for _, p in named]).detach()
        self.dim, self.num_examples, self.curvature = self.theta.numel(), len(X), curvature
        size = len(X) if batch_size is None else batch_size
        self._chunks = list(zip(X.split(size), y.split(size), strict=True))
        self.products_taken = 0  # per-example curvature-vector products so far

        def output(flat: Tensor, x: Tensor) -> Tensor:  # f(x) for one example, as a batch of 1
            params = {name: piece.view(shape) for name, piece, shape
                      in zip(names, flat.split(sizes), shapes, strict=True)}
            return functional_call(model, params, (x.unsqueeze(0),))

        self._output = output
        self._loss_fn = loss_fn

    def _per_example(self, X: Tensor, y: Tensor, V: Tensor) -> Tensor:
        """(c, P, K) ↦ (c, P, K): each example's K columns times its Hᵢ.

        Example i runs through its own copy θᵢ of the parameters (vmap over ``functional_call``),
        so in Σᵢ ℓᵢ(θᵢ) the gradient w.r.t. the copies has row i ∇ℓᵢ, and a second backward
        pass along V gives rows Hᵢ vᵢ: per-example products from the mean loss of the chunk,
        without applying ``loss_fn`` to single examples (F.one_hot, which the square loss of
        class labels uses, cannot be vmapped over its targets). Reverse-over-reverse autograd:
        torch.func's forward-over-reverse ``jvp(grad)`` was 3-8x slower on small models here."""
        thetas = self.theta.expand(len(X), -1).clone().requires_grad_(True)
        batched = V.shape[-1] > 1  # K columns in one vmapped backward pass (K× the memory)
        vectors = V.movedim(-1, 0) if batched else V[..., 0]  # (K, c, P) or (c, P)
        with torch.enable_grad():
            out = vmap(self._output)(thetas, X)[:, 0]  # (c, …)
            if self.curvature == "hessian":
                gradients = _grad(self._loss_fn(out, y) * len(X), thetas, create_graph=True)
                products = _grad(gradients, thetas, vectors, batched=batched)
            else:  # Jᵢᵀ (∇²_f ℓᵢ) Jᵢ vᵢ
                leaf = out.detach().requires_grad_(True)
                loss_gradient = _grad(self._loss_fn(leaf, y) * len(X), leaf, create_graph=True)
                dummy = torch.zeros_like(out, requires_grad=True)
                pullback = _grad(out, thetas, dummy, create_graph=True)  # Jᵀu, linear in u
                jv = _grad(pullback, dummy, vectors, batched=batched)  # J v, from d(Jᵀu)/du
                hjv = _grad(loss_gradient, leaf, jv, batched=batched)
                products = _grad(out, thetas, hjv, batched=batched)
        return (products.movedim(0, -1) if batched else products.unsqueeze(-1)).detach()

    def _chunked(self, V: Tensor) -> list[Tensor]:
        """Hᵢ Vᵢ for each chunk of examples, V (P, K) shared or (n, P, K) per example."""
        out, first = [], 0
        for X, y in self._chunks:
            block = (V.expand(len(X), *V.shape) if V.ndim == 2 else V[first:first + len(X)])
            out.append(self._per_example(X, y, block))
            self.products_taken += len(X) * V.shape[-1]
            first += len(X)
        return out

    def per_example(self, V: Tensor) -> Tensor:
        """(n, P, K): Hᵢ V for every example (n·P·K numbers: for small problems and tests)."""
        return torch.cat(self._chunked(V))

    def mean(self, V: Tensor) -> Tensor:
        """H V = (1/n) Σᵢ Hᵢ V; n per-example products per column."""
        return sum(p.sum(dim=0) for p in self._chunked(V)) / self.num_examples

    def variance(self, V: Tensor) -> Tensor:
        """Σ V = (1/n) Σᵢ Hᵢ (Hᵢ V − H V); 3n per-example products per column."""
        HV = self.mean(V)
        total = torch.zeros_like(V)
        for X, y in self._chunks:
            deviations = self._per_example(X, y, V.expand(len(X), *V.shape)) - HV  # (c, P, K)
            total += self._per_example(X, y, deviations).sum(dim=0)
            self.products_taken += 2 * len(X) * V.shape[-1]
        return total / self.num_examples


def _top_pair(matmat: MatMat, dim: int, dtype: torch.dtype, device: torch.device, max_iter: int,
              tol: float, seed: int, purpose: str) -> tuple[float, Tensor, int, float]:
    """The top Ritz pair of a symmetric operator by Lanczos from a seeded Gaussian start, with
    the residual ‖A w − θ w‖ from one explicit product."""
    start = torch.randn(dim, generator=torch_generator(seed, "nonuniformity", purpose, "start"),
                        dtype=dtype).to(device)
    tridiagonal = lanczos(matmat, start, max_iter, tol=tol, k=1,
                          generator=torch_generator(seed, "nonuniformity", purpose, "restart"))
    values, vectors, _ = ritz_pairs(tridiagonal, 1)
    value, vector = float(values[0, 0]), vectors[0, 0]
    residual = float(torch.linalg.vector_norm(matmat(vector[:, None])[:, 0] - value * vector))
    return value, vector, tridiagonal.steps, residual


def nonuniformity(model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor,
                  curvature: Curvature = "hessian", max_iter: int = 30, *, tol: float = 1e-6,
                  seed: int = 0, dtype: torch.dtype = torch.float64,
                  batch_size: int | None = None) -> NonuniformityResult:
    """The sharpness a = λ_max(H) and non-uniformity s = λ_max((1/n)Σᵢ Hᵢ² − H²)^{1/2} of Wu, Ma
    & E (2018), each by Lanczos capped at ``max_iter`` steps (fewer once the top Ritz residual
    is below ``tol``·|θ|), started from a Gaussian vector drawn from ``seed``.

    An eigenvalue's error is at most its reported residual (and at most residual²/gap when it is
    separated from the rest of the spectrum); for s that is |s − ŝ| ≤ residual/(s + ŝ).
    Per-example products are taken ``batch_size`` examples at a time (all at once for None):
    n·(steps + 1) for a and 3n·(steps + 1) for s².
    """
    with curvature_model(model, dtype) as net:
        operator = PerExampleCurvature(net, loss_fn, as_dtype(X, dtype), y, curvature,
                                       batch_size)
        dim, device = operator.dim, operator.theta.device
        a, u, a_steps, a_residual = _top_pair(operator.mean, dim, dtype, device, max_iter, tol,
                                              seed, "sharpness")
        s2, w, s_steps, s_residual = _top_pair(operator.variance, dim, dtype, device, max_iter,
                                               tol, seed, "variance")
    return NonuniformityResult(
        sharpness=a, nonuniformity=math.sqrt(max(s2, 0.0)), variance_top_eigenvalue=s2,
        sharpness_vector=u, nonuniformity_vector=w, sharpness_residual=a_residual,
        variance_residual=s_residual, sharpness_iterations=a_steps,
        nonuniformity_iterations=s_steps, num_example_products=operator.products_taken,
        num_examples=operator.num_examples, curvature=curvature)


def nonuniformity_vs_lr(nonuniformity: float, lr: float, batch_size: int,
                        num_examples: int | None = None) -> float:
    """s over its bound in Wu, Ma & E's stability condition: s η √((n − B)/(B(n − 1))) with n
    ``num_examples``, the size of the training set SGD draws its batches from without
    replacement (not of a subsample s was estimated on), or s η/√B for None (n → ∞). Above 1
    the minimum fails their linear-stability condition for SGD with learning rate η and batch
    size B (module docstring); 0 for full-batch GD (B = n), which sees no sampling noise. The
    sharpness's counterpart, aη/2, is :func:`genlab.analyses.curvature.hessian.sharpness_vs_lr`."""
    if not lr > 0:
        raise ValueError(f"the learning rate must be positive, got {lr}")
    if batch_size < 1:
        raise ValueError(f"the batch size must be positive, got {batch_size}")
    if num_examples is None:
        return nonuniformity * lr / math.sqrt(batch_size)
    if num_examples < batch_size:
        raise ValueError(f"a batch of {batch_size} cannot be drawn from {num_examples} examples")
    if num_examples == 1:
        return 0.0
    factor = (num_examples - batch_size) / (batch_size * (num_examples - 1))
    return nonuniformity * lr * math.sqrt(factor)


__all__ = ["NonuniformityResult", "NonuniformitySettings", "PerExampleCurvature",
           "nonuniformity", "nonuniformity_vs_lr"]
