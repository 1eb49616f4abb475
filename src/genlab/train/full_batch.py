"""Train to a stationary point of an L2-regularised full-batch objective, in float64.

    L_S(θ) = (1/n) Σ_{i∈S} ℓ(f_θ(xᵢ), yᵢ) + (λ/2)‖θ‖²,

with n the size of the *whole* training set whatever the subset S (a boolean mask): the
normalisation that leave-one-out comparisons with influence functions need
(:mod:`genlab.analyses.influence.ground_truth`). Influence functions are statements about the
optimum θ̂ (∇L = 0), and leave-one-out changes are O(1/n) effects, so "trained" here means
max|∇L_S(θ)| ≤ ``grad_tol`` (1e-9 by default: an error in a test loss of about
‖∇ℓ_t‖·‖(∇²L)⁻¹‖·grad_tol ≤ 1e-7 at λ = 1e-2), which first-order training does not reach in
reasonable time. Two phases:

1. L-BFGS (torch.optim.LBFGS, strong-Wolfe line search) until max|∇L| ≤ ``coarse_tol``;
2. Newton's method with the exact dense Hessian (P × P, from P Hessian-vector products; for
   models up to a few thousand parameters), reusing a factorised Hessian for as long as it keeps
   contracting the gradient (chord steps: max|∇L| must shrink by ``CONTRACTION`` per step),
   re-forming it otherwise. The Hessian is used as |H| (eigenvalues in absolute value:
   saddle-free Newton) plus a Levenberg-Marquardt shift σI: a step is taken when it contracts
   the gradient or achieves a quarter of the decrease its quadratic model predicts, and σ grows
   tenfold (from λ) after a rejected step from a fresh Hessian, shrinks after a good one. Where
   even σ = 10⁶·‖H‖ does not help, the fit steps along the most negative curvature direction if
   there is one (a backtracking line search on the objective: a stationary point with negative
   curvature is a saddle, not a trained model), then L-BFGS takes over again until the
   gradient is ten times smaller. A freshly formed Hessian with negative curvature sends the fit
   to that escape at once: Newton converges fast only near a minimum, and a dense Hessian costs
   thousands of L-BFGS iterations (measured: a digits MLP with 2,410 parameters took 230
   saddle-free steps and 28 Hessians, 253 s, where its L-BFGS phase took 5 s). Only when an
   escape no longer lowers L does saddle-free Newton go on through negative curvature.

Both phases have budgets (L-BFGS iterations, Newton steps); a fit that exhausts them, or stalls
where float64 cannot lower the objective any further, ends with ``converged=False`` and its
gradient recorded, never silently.

A warm start (:func:`fit` with ``hessian``) skips phase 1 and starts the chord steps from a given
Hessian, e.g. the full-data one at θ̂ when retraining without one example: the first step is then
exactly the influence function's parameter change, and the following ones converge to the
leave-one-out optimum nearest θ̂ (the response that influence functions estimate; Bae et al. 2022).

Everything is deterministic on a CPU: same inputs, same bits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev

LossFn = Callable[[Tensor, Tensor], Tensor]  # (outputs, targets) -> mean loss over the batch

# Hessian columns per batched double-backward: small batches stay in cache (a digits MLP's
# 2,410 × 2,410 Hessian on 1,438 examples, one thread: 2.2 s at 16 columns, 6.4 s at 128)
COLUMNS_PER_BATCH = 16
CONTRACTION = 0.7  # a Newton or chord step is taken whole when max|∇L| shrinks at least this much
STALE_RETRIES = 2  # shift increases tried on an old Hessian before forming a new one


def flat_parameters(model: nn.Module) -> Tensor:
    """The trainable parameters as one detached float64 vector, in ``parameters()`` order."""
    return torch.cat([p.detach().reshape(-1).to(torch.float64) for p in model.parameters()
                      if p.requires_grad])


def load_flat(model: nn.Module, theta: Tensor) -> nn.Module:
    """Copy a flat vector into the model's trainable parameters (in place); returns the model."""
    params = [p for p in model.parameters() if p.requires_grad]
    if theta.numel() != sum(p.numel() for p in params):
        raise ValueError(f"theta has {theta.numel()} entries, the model "
                         f"{sum(p.numel() for p in params)} trainable parameters")
    with torch.no_grad():
        for p, chunk in zip(params, theta.split([p.numel() for p in params]), strict=True):
            p.copy_(chunk.reshape(p.shape))
    return model


class RegularisedObjective:
    """L_S(θ) for a model whose trainable parameters are θ, on the examples where ``mask`` is
    true (all for None), normalised by the full size n = len(X)."""

    def __init__(self, model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor, l2: float,
                 mask: Tensor | None = None) -> None:
        if not l2 >= 0:
            raise ValueError(f"l2 must be non-negative, got {l2}")
        if len(X) != len(y) or len(X) == 0:
            raise ValueError("X and y must hold the same nonzero number of examples")
        keep = torch.ones(len(X), dtype=torch.bool) if mask is None else mask.to(torch.bool)
        if keep.shape != (len(X),):
            raise ValueError(f"mask must be ({len(X)},), got {tuple(keep.shape)}")
        self.model, self.loss_fn, self.l2 = model, loss_fn, float(l2)
        index = keep.nonzero().squeeze(1).to(X.device)
        self.X, self.y = X[index], y[index.to(y.device)]
        self.weight = len(index) / len(X)  # (|S|/n) · mean over S = (1/n) Σ_S
        named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        self.names = [name for name, _ in named]
        self.shapes = [p.shape for _, p in named]
        self.sizes = [p.numel() for _, p in named]
        self.fixed = {name: p.detach() for name, p in model.named_parameters()
                      if not p.requires_grad} | dict(model.named_buffers())

    def __call__(self, theta: Tensor) -> Tensor:
        params = {name: chunk.reshape(shape) for name, chunk, shape
                  in zip(self.names, theta.split(self.sizes), self.shapes, strict=True)}
        value = 0.5 * self.l2 * theta.square().sum()
        if len(self.X):
            output = functional_call(self.model, self.fixed | params, (self.X,))
            value = value + self.weight * self.loss_fn(output, self.y)
        return value

    def value_and_grad(self, theta: Tensor) -> tuple[float, Tensor]:
        theta = theta.detach().requires_grad_(True)
        value = self(theta)
        (gradient,) = torch.autograd.grad(value, theta)
        return float(value.detach()), gradient

    def hessian(self, theta: Tensor) -> Tensor:
        """The dense (P, P) Hessian of L_S at θ (λI included), symmetrised: reverse over
        reverse mode, ``COLUMNS_PER_BATCH`` columns at a time."""
        H = jacrev(jacrev(self), chunk_size=COLUMNS_PER_BATCH)(theta.detach())
        return 0.5 * (H + H.T)


class NewtonSystem:
    """An eigendecomposed Hessian H = V diag(μ) Vᵀ, solved as the saddle-free |H| + σI
    (eigenvalues in absolute value, at least 1e-12 of the largest, plus a Levenberg-Marquardt
    shift σ ≥ 0), so that every solve gives a descent direction."""

    def __init__(self, H: Tensor) -> None:
        values, self.vectors = torch.linalg.eigh(H)
        self.positive_definite = bool(values[0] > 0)
        self.lowest: tuple[float, Tensor] | None = None  # (μ_min, its unit eigenvector) if < 0
        if float(values[0]) < 0:
            self.lowest = float(values[0]), self.vectors[:, 0]
        top = float(values.abs().max())
        self.values = values.abs().clamp_min(max(1e-12 * top, 1e-300))

    def solve(self, g: Tensor, shift: float = 0.0) -> Tensor:
        """(|H| + σI)⁻¹ g."""
        return self.vectors @ ((self.vectors.T @ g) / (self.values + shift))

    def decrease(self, g: Tensor, d: Tensor) -> float:
        """The decrease −(gᵀd + ½dᵀ|H|d) that the quadratic model predicts for a step d."""
        c = self.vectors.T @ d
        return -(float(g @ d) + 0.5 * float((self.values * c * c).sum()))


@dataclass(frozen=True)
class FitResult:
    theta: Tensor  # (P,) float64 parameters at the end
    loss: float  # L_S(θ)
    grad_max: float  # max|∇L_S(θ)|
    converged: bool  # grad_max ≤ grad_tol
    lbfgs_iterations: int
    newton_steps: int
    hessians: int  # dense Hessians formed (a warm start's given one not counted)


def _lbfgs(objective: RegularisedObjective, theta: Tensor, tol: float,
           max_iter: int) -> tuple[Tensor, int]:
    theta = theta.detach().clone().requires_grad_(True)
    optimizer = torch.optim.LBFGS([theta], lr=1.0, max_iter=max_iter, max_eval=2 * max_iter,
                                  tolerance_grad=tol, tolerance_change=1e-16, history_size=20,
                                  line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        optimizer.zero_grad()
        value = objective(theta)
        value.backward()
        return value

    optimizer.step(closure)
    return theta.detach(), int(optimizer.state[theta].get("n_iter", 0))


def _negative_curvature_step(objective: RegularisedObjective, theta: Tensor, value: float,
                             gradient: Tensor, curvature: float,
                             vector: Tensor) -> tuple[Tensor, float, Tensor]:
    """Move along a direction of negative curvature μ < 0 (signed downhill), the longest step
    t = 2⁻ᵏ ≤ 1 that lowers L by at least ¼|μ|t² (half the quadratic model's decrease), or stay."""
    direction = -vector if float(gradient @ vector) > 0 else vector
    step = 1.0
    while step > 1e-8:
        new_value, new_gradient = objective.value_and_grad(theta + step * direction)
        if math.isfinite(new_value) and new_value <= value - 0.25 * abs(curvature) * step ** 2:
            return theta + step * direction, new_value, new_gradient
        step *= 0.5
    return theta, value, gradient


def _escape(objective: RegularisedObjective, theta: Tensor, value: float, gradient: Tensor,
            system: NewtonSystem, target: float,
            budget: int) -> tuple[Tensor, float, Tensor, int, bool]:
    """Leave a region where Newton does not help: a step along the most negative curvature if
    there is one, then L-BFGS down to max|∇L| ≤ ``target``. Returns θ, L, ∇L, the L-BFGS
    iterations spent and whether L decreased."""
    before = value
    if system.lowest is not None:
        theta, value, gradient = _negative_curvature_step(objective, theta, value, gradient,
                                                          *system.lowest)
    theta, iterations = _lbfgs(objective, theta, target, budget)
    value, gradient = objective.value_and_grad(theta)
    return theta, value, gradient, iterations, value < before


def fit(objective: RegularisedObjective, theta0: Tensor, *, grad_tol: float = 1e-9,
        coarse_tol: float = 1e-5, max_lbfgs: int = 20_000, max_newton: int = 500,
        hessian: NewtonSystem | None = None) -> FitResult:
    """Minimise ``objective`` from ``theta0`` to max|∇L| ≤ ``grad_tol`` (module docstring).

    Args:
        objective: L_S.
        theta0: the start (flat, float64).
        grad_tol: the stationarity target.
        coarse_tol: where L-BFGS hands over to Newton.
        max_lbfgs: L-BFGS iteration budget, all its calls together.
        max_newton: Newton / chord step budget (each a gradient, and a Hessian when re-formed).
        hessian: a warm start's factorised Hessian: skip L-BFGS and start with chord steps.
    """
    theta = theta0.detach().to(torch.float64).clone()
    iterations = 0
    if hessian is None:
        _, gradient = objective.value_and_grad(theta)
        if float(gradient.abs().max()) > coarse_tol:
            theta, iterations = _lbfgs(objective, theta, coarse_tol, max_lbfgs)
    value, gradient = objective.value_and_grad(theta)
    size = float(gradient.abs().max())
    system, fresh, steps, hessians, shift, stale_misses = hessian, False, 0, 0, 0.0, 0
    escapes_help = True  # until an escape fails to lower L: then saddle-free Newton goes on alone
    while size > grad_tol and steps < max_newton:
        if system is None:
            system, fresh, stale_misses = NewtonSystem(objective.hessian(theta)), True, 0
            hessians += 1
            # negative curvature: not yet near a minimum, where Newton converges fast; there
            # damped saddle-free steps crawl (one fit: 230 steps, 28 Hessians of ~7 s each,
            # where an L-BFGS iteration costs ~3 ms), so escape first
            if system.lowest is not None and escapes_help and iterations < max_lbfgs:
                theta, value, gradient, more, escapes_help = _escape(
                    objective, theta, value, gradient, system, max(grad_tol, 0.1 * size),
                    max_lbfgs - iterations)
                iterations += more
                size = float(gradient.abs().max())
                if escapes_help:
                    system, shift = None, 0.0
                    continue
        direction = -system.solve(gradient, shift)
        new_value, new_gradient = objective.value_and_grad(theta + direction)
        new_size = float(new_gradient.abs().max())
        steps += 1
        predicted, actual = system.decrease(gradient, direction), value - new_value
        contracted = new_size <= CONTRACTION * size
        # near the optimum the objective changes below float64 resolution: the gradient's
        # contraction decides there; further out, the model's predicted decrease (trust ratio)
        if math.isfinite(new_value) and actual >= -1e-12 * max(1.0, abs(value)) and (
                contracted or actual >= 0.25 * predicted > 0):
            theta, value, gradient, size, fresh = (theta + direction, new_value, new_gradient,
                                                   new_size, False)
            if contracted or actual >= 0.75 * predicted:
                shift = shift / 10 if shift > 1e-6 * objective.l2 else 0.0
            continue
        if not fresh:  # an old Hessian stopped working: a shorter step first, then re-form it
            stale_misses += 1
            if stale_misses <= STALE_RETRIES and shift < 1e6 * float(system.values.max()):
                shift = max(10 * shift, objective.l2)
            else:
                system = None
            continue
        if shift < 1e6 * float(system.values.max()):  # Levenberg-Marquardt: a shorter step
            shift = max(10 * shift, objective.l2)
            continue
        if iterations >= max_lbfgs:
            break
        # no Newton step helps: L-BFGS brings the gradient down tenfold (its cheap steps handle
        # a long way through a flat or non-convex region better than damped Newton)
        theta, value, gradient, more, decreased = _escape(
            objective, theta, value, gradient, system, max(grad_tol, 0.1 * size),
            max_lbfgs - iterations)
        iterations += more
        size, system, shift = float(gradient.abs().max()), None, 0.0
        if not decreased:
            break  # no decrease left at float64 precision
    return FitResult(theta=theta, loss=value, grad_max=size, converged=size <= grad_tol,
                     lbfgs_iterations=iterations, newton_steps=steps, hessians=hessians)


__all__ = ["FitResult", "NewtonSystem", "RegularisedObjective", "fit", "flat_parameters",
           "load_flat"]
