"""Flatness: the largest perturbation a trained model tolerates (Jiang et al., ICLR 2020, §C.6-7).

**PAC-Bayes flatness σ′** (Jiang et al. eq. 53, after Neyshabur et al. 2017 and Dziugaite & Roy
2017): the largest σ with

    E_u[L(θ + u)] ≤ L(θ) + Δ,   u ~ N(0, σ² I),

Δ = 0.1, L the training error (0-1 loss; Jiang et al. perturb until the *accuracy* moves by 0.1)
or any mean loss. The measure is 1/σ′²: a flat minimum tolerates a large σ′. The magnitude-aware
variant (Jiang et al. eq. 61, σ′_mag) perturbs each parameter in proportion to its size,
u_i ~ N(0, σ²θ_i² + ε²), ε = 1e-3, which makes it invariant to the rescalings that leave a ReLU
network's function unchanged (up to ε).

**Worst-case flatness α′** (Jiang et al. eq. 54; Keskar et al. 2017): the largest radius α with

    max_{‖T⁻¹ε‖ ≤ α} L(θ + ε) − L(θ) ≤ Δ,

the inner maximum taken by :func:`genlab.analyses.curvature.worst_case.worst_case_sharpness`
(projected gradient ascent on the differentiable training loss: a lower bound on the maximum, so
α′ is an upper bound on the true radius). T = I, or T = diag(|θ| + ε) for the magnitude-aware
variant. Jiang et al. use an ℓ∞ box |u_i| ≤ α (|u_i| ≤ α|θ_i| + ε) and the error; here the ball
is ℓ₂ (that of SAM and of the existing worst-case module) and the loss is the training loss.

**Search** (:func:`largest_below`). Both increases are non-decreasing in the radius (for σ in
expectation; for α exactly, for the true maximum): the search doubles an upper bracket from
``start`` until the increase exceeds Δ, then bisects ``depth`` times and returns the largest
radius seen to satisfy it. The Monte Carlo expectation uses the same K standard-normal
directions z_k for every σ (common random numbers, u_k = σ z_k, or z_k ∘ √(σ²θ² + ε²)), so the
estimate is a deterministic function of σ the bisection can bracket; for a quadratic loss at its
minimum it is exactly L(θ) + σ² (1/K) Σ_k z_kᵀ H z_k / 2, increasing in σ.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from genlab.analyses.curvature.hessian import LossFn, as_dtype, check_loss_data, curvature_model
from genlab.analyses.curvature.worst_case import worst_case_sharpness
from genlab.seeding import torch_generator

PerturbationLoss = Literal["error", "loss"]


def largest_below(increase: Callable[[float], float], target: float, *, start: float = 1.0,
                  depth: int = 20, max_doublings: int = 40) -> float:
    """The largest r ≥ 0 found with ``increase(r) ≤ target``, for a non-decreasing ``increase``.

    Doubles r from ``start`` until the increase exceeds ``target`` (returns inf if it never does
    within ``max_doublings``), then bisects the bracket [lo, hi] ``depth`` times, keeping lo
    feasible: the answer lies in [lo, lo + (hi − lo)/2^depth] and lo is returned (0 when even
    start/2^depth exceeds the target). A NaN increase counts as exceeding it.
    """
    if not start > 0:
        raise ValueError(f"start must be positive, got {start}")
    lo, hi = 0.0, start
    for _ in range(max_doublings):
        if not increase(hi) <= target:
            break
        lo, hi = hi, 2.0 * hi
    else:
        return math.inf
    for _ in range(depth):
        mid = 0.5 * (lo + hi)
        if increase(mid) <= target:
            lo = mid
        else:
            hi = mid
    return lo


def pac_bayes_sigma(model: nn.Module, X: Tensor, y: Tensor, loss_fn: LossFn | None = None, *,
                    target: float = 0.1, magnitude_eps: float | None = None,
                    num_samples: int = 10, depth: int = 20, start: float = 1.0, seed: int = 0,
                    dtype: torch.dtype = torch.float64, chunk_size: int | None = 16) -> float:
    """σ′: the largest σ with the Monte Carlo mean of L(θ + u) at most L(θ) + ``target``
    (module docstring), over all trainable parameters.

    ``loss_fn`` None: L is the 0-1 training error (Jiang et al.); else the mean loss it
    returns. ``magnitude_eps`` None: u = σz; a number ε: u = z ∘ √(σ²θ² + ε²), the
    magnitude-aware σ′_mag. ``num_samples`` directions z drawn once from ``seed``. Costs
    ``num_samples`` forward passes over (X, y) per evaluated σ (≈ depth + log₂(σ′/start) + 2),
    vectorised over ``chunk_size`` directions at a time (``torch.func.vmap``; the model must
    support it: no BatchNorm statistics updates, no data-dependent control flow).
    """
    if num_samples < 1:
        raise ValueError(f"num_samples must be ≥ 1, got {num_samples}")
    if loss_fn is not None:
        check_loss_data(loss_fn, X, y)
    with curvature_model(model, dtype) as net:
        named = [(name, p.detach()) for name, p in net.named_parameters() if p.requires_grad]
        names, shapes = [n for n, _ in named], [p.shape for _, p in named]
        sizes = [p.numel() for _, p in named]
        theta = torch.cat([p.reshape(-1) for _, p in named])
        Xd = as_dtype(X, dtype)
        generator = torch_generator(seed, "measures", "pac-bayes")
        directions = torch.randn(num_samples, theta.numel(), generator=generator,
                                 dtype=dtype).to(theta.device)  # (K, P)

        def value(flat: Tensor) -> Tensor:  # (P,) ↦ the loss or error at θ = flat
            params = {n: piece.view(s) for n, piece, s
                      in zip(names, flat.split(sizes), shapes, strict=True)}
            output = functional_call(net, params, (Xd,))
            if loss_fn is None:
                return (output.argmax(dim=1) != y).to(dtype).mean()
            return loss_fn(output, y)

        values = vmap(value, chunk_size=chunk_size)  # (K, P) ↦ (K,)
        with torch.no_grad():
            base = float(value(theta))

        def increase(sigma: float) -> float:
            if magnitude_eps is None:
                scale = torch.full_like(theta, sigma)
            else:
                scale = torch.sqrt(sigma ** 2 * theta.square() + magnitude_eps ** 2)
            with torch.no_grad():
                return float(values(theta + scale * directions).mean()) - base

        return largest_below(increase, target, start=start, depth=depth)


def worst_case_alpha(model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor, *,
                     target: float = 0.1, adaptive: bool = False, eta0: float = 1e-3,
                     steps: int = 10, depth: int = 12, start: float = 1.0, seed: int = 0,
                     dtype: torch.dtype = torch.float64) -> float:
    """α′: the largest radius whose worst-case loss increase, as
    :func:`genlab.analyses.curvature.worst_case.worst_case_sharpness` finds it with ``steps`` ascent
    steps, is at most ``target`` (module docstring). ``adaptive`` scales the ball by
    T = diag(|θ| + ``eta0``). Costs about steps + 3 passes over (X, y) per evaluated radius."""

    def increase(rho: float) -> float:
        return worst_case_sharpness(model, loss_fn, X, y, rho, adaptive=adaptive, eta0=eta0,
                                    steps=steps, seed=seed, dtype=dtype).sharpness

    return largest_below(increase, target, start=start, depth=depth)


__all__ = ["PerturbationLoss", "largest_below", "pac_bayes_sigma", "worst_case_alpha"]
