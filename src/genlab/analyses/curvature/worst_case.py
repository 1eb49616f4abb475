"""Worst-case ("SAM") sharpness and its adaptive, magnitude-aware variant.

For the training loss L(θ) = (1/n) Σᵢ ℓ(f_θ(xᵢ), yᵢ), a radius ρ and a diagonal scaling T_θ,

    S_ρ(θ) = max_{‖T_θ⁻¹ ε‖₂ ≤ ρ} L(θ + ε) − L(θ),

the largest loss increase within a neighbourhood of θ (Keskar et al. 2017 used a box and a
relative increase; the ℓ2 ball is the one of SAM, Foret, Kleiner, Mobahi & Neyshabur, ICLR 2021,
and of the "worst-case sharpness" of Jiang et al., ICLR 2020, and Andriushchenko et al., ICML
2023). Two scalings:

- plain, T_θ = I: the Euclidean ball. For a loss quadratic around a minimum, S_ρ = ρ²λ_max(H)/2,
  so for small ρ it measures the top curvature, but it is not invariant under the
  reparametrisations that leave the function unchanged (scaling a ReLU neuron's incoming weights
  and bias by c > 0 and its outgoing weights by 1/c, Dinh et al. 2017).
- adaptive, T_θ = diag(|θ| + η₀) elementwise (Kwon, Kim, Park & Choi, "ASAM", ICML 2021;
  elementwise adaptive sharpness of Andriushchenko et al. 2023): each coordinate may move in
  proportion to its own magnitude. Around a minimum it is ρ²λ_max(T H T)/2. With η₀ = 0 it is
  invariant under every symmetry θ ↦ Dθ of the loss (D diagonal and positive, L(Dθ) = L(θ) for
  all θ), since then T_{Dθ} = D T_θ and L(Dθ + D T_θ δ) = L(θ + T_θ δ): the ReLU symmetries
  above included, *because* the biases are scaled too. The default η₀ = 0.01 is ASAM's; it keeps
  coordinates at or near 0 perturbable (and breaks the invariance by that much). Which
  coordinates are scaled: all trainable parameters by default (``normalize_biases=True``, the
  definition above); ``normalize_biases=False`` reproduces Kwon et al.'s code, which scales only
  parameters whose name contains "weight" and leaves T = 1 on the rest (biases), and so is not
  invariant under the rescaling of a neuron with a bias.

**Computation.** With ε = T δ the constraint is the Euclidean ball ‖δ‖ ≤ ρ and the objective
φ(δ) = L(θ + T δ) has gradient T ∇L(θ + T δ). Projected, normalised gradient ascent:

    δ ← Π_ρ(δ + α ∇φ(δ)/‖∇φ(δ)‖),   Π_ρ(z) = z · min(1, ρ/‖z‖),

from the first-order SAM point δ₁ = ρ ∇φ(0)/‖∇φ(0)‖, i.e. ε₁ = ρ T² g/‖T g‖ with g = ∇L(θ)
(``start="sam"``), or from a random point of the sphere ‖δ‖ = ρ (``start="random"``; also the
fallback where g = 0, at an exact minimum, where the SAM direction is undefined). A step that
lowers φ is refused and halves α, an accepted one doubles it; so the iterates never lose ground,
and the result is the best point evaluated (the SAM point included).

Why this step rule: for a convex φ (a quadratic with H ⪰ 0 in particular) every projected
gradient step increases φ, whatever α, because the projection makes ∇φᵀ(δ' − δ) ≥ ‖δ' − δ‖²/α
≥ 0; on the sphere, for φ = ½δᵀMδ, a step of α is the power iteration u ← (c u + M u)/‖·‖ with
shift c = ρ‖Mu‖/α, which damps the component along an eigenvalue λᵢ relative to λ₁ by
(c + λᵢ)/(c + λ₁) per step. A small fixed α (say ρ/steps) makes the shift huge and the ascent
crawl, by a factor ≈ 1 − (1 − λᵢ/λ₁)/c per step; a large one gives plain power iteration's
λᵢ/λ₁ but overshoots where φ is far from quadratic. Starting at α = 2ρ (the diameter of the
ball, where Auto-PGD, Croce & Hein 2020, starts too), doubling on success and halving on
failure gets both: on a quadratic every step succeeds and the shift
vanishes geometrically. Measured with 20 steps from 100 random starts on a 6-parameter
quadratic (λ₂/λ₁ ≈ 0.5): median deficits of 4e-14 (plain) and 2e-10 (adaptive) relative, worst
1e-9 and 7e-6, against 4e-9 and 5e-7, worst 3e-5 and 3e-3, with α fixed at 2ρ; on small MLPs
for ρ ≤ 1 it came within 6e-4 of the best of three 400-step ascents (and within 0.2 for ρ = 3-10,
where no short ascent is reliable).

**It is a lower bound.** The maximisation is non-convex in general and the ascent is a local
method with a fixed budget: the value returned is attained (L at the returned θ + ε, minus L(θ)),
so it never exceeds S_ρ (beyond rounding), but can fall short of it. On a quadratic the deficit
after k steps is that of power iteration: it shrinks geometrically, like (λ₂/λ₁)^{2k} once α has
grown, when λ₁ stands apart, but only like 1/k when the top of the spectrum is a continuum, and
from a start nearly orthogonal to the top eigenvector it takes longer to begin.

Every evaluation is one forward and backward pass over all of (X, y) (in ``batch_size`` chunks):
1 at θ, 1 at the SAM point, 1 at a random start, 1 per ascent step. Like
:mod:`genlab.analyses.curvature.hessian`, the model is evaluated in eval mode and in ``dtype``
(float64 by default, on a copy when the model is in another dtype), and the caller's model is
left as found, train/eval flags included; parameter-space vectors are the trainable parameters of
``model.named_parameters()`` flattened in order (``torch.nn.utils.parameters_to_vector``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call
from torch.nn.utils import parameters_to_vector

from genlab.analyses.curvature.hessian import LossFn, as_dtype, check_loss_data, curvature_model
from genlab.analyses.settings import Start, WorstCaseSettings
from genlab.seeding import torch_generator


@dataclass(frozen=True)
class WorstCaseResult:
    sharpness: float  # L(θ + ε) − L(θ) at the best ε found: a lower bound on S_ρ
    sam_sharpness: float  # L(θ + ε₁) − L(θ), ε₁ = ρT²g/‖Tg‖ the one-step SAM point (0 if g = 0)
    loss: float  # L(θ)
    epsilon: Tensor  # (P,) the best perturbation ε found, in ``dtype``
    epsilon_norm: float  # ‖ε‖₂
    scaled_norm: float  # ‖T⁻¹ε‖₂ ≤ ρ (= ρ unless the best point is inside the ball)
    gradient_norm: float  # ‖T∇L(θ)‖₂: ρ times it is the first-order part of S_ρ
    num_evaluations: int  # loss-and-gradient evaluations (passes over the data)
    accepted_steps: int  # ascent steps that did not lower the loss
    final_step_size: float  # α after the doublings and halvings
    rho: float
    adaptive: bool


class _PerturbedLoss:
    """φ(δ) = L(θ + T δ) over (X, y) and its gradient T ∇L(θ + T δ), for a model as
    :func:`genlab.analyses.curvature.hessian.curvature_model` yields it (never modified: the
    perturbed parameters go in through ``functional_call``)."""

    def __init__(self, model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor,
                 batch_size: int | None, scale_of: Callable[[str, Tensor], Tensor]) -> None:
        named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("the model has no trainable parameters")
        self.model, self.loss_fn = model, loss_fn
        self.names = [name for name, _ in named]
        self.shapes = [p.shape for _, p in named]
        self.sizes = [p.numel() for _, p in named]
        self.theta = parameters_to_vector([p for _, p in named]).detach()
        self.scale = torch.cat([scale_of(name, p.detach()).reshape(-1) for name, p in named])
        size = len(X) if batch_size is None else batch_size
        self.batches = list(zip(X.split(size), y.split(size), strict=True))
        self.n = len(X)

    def __call__(self, delta: Tensor) -> tuple[float, Tensor]:
        flat = (self.theta + self.scale * delta).requires_grad_(True)
        total, gradient = 0.0, torch.zeros_like(flat)
        with torch.enable_grad():  # also when the caller is under torch.no_grad()
            for X, y in self.batches:
                pieces = flat.split(self.sizes)
                params = {name: piece.view(shape) for name, piece, shape
                          in zip(self.names, pieces, self.shapes, strict=True)}
                output = functional_call(self.model, params, (X,))
                loss = self.loss_fn(output, y) * (len(X) / self.n)
                (g,) = torch.autograd.grad(loss, flat)
                total += float(loss.detach())
                gradient += g
        return total, self.scale * gradient


def _project(delta: Tensor, rho: float) -> Tensor:
    """The nearest point of the ball ‖δ‖ ≤ ρ."""
    norm = float(torch.linalg.vector_norm(delta))
    return delta * (rho / norm) if norm > rho else delta


def worst_case_sharpness(model: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor, rho: float,
                         *, adaptive: bool = False, eta0: float = 0.01,
                         normalize_biases: bool = True, steps: int = 20,
                         step_size: float | None = None, start: Start = "sam", seed: int = 0,
                         dtype: torch.dtype = torch.float64,
                         batch_size: int | None = None) -> WorstCaseResult:
    """S_ρ(θ) = max_{‖T⁻¹ε‖ ≤ ρ} L(θ + ε) − L(θ) by projected gradient ascent (module docstring),
    a lower bound on the true maximum, and the one-step SAM estimate beside it.

    ``loss_fn`` returns the mean loss of a batch, as for :mod:`genlab.analyses.curvature.hessian`.
    ``steps`` ascent steps, the first of length ``step_size`` (2ρ by default, in the scaled
    metric), follow the start (``start``, the random one drawn from ``seed``).

    Raises:
        ValueError: For ρ ≤ 0, a negative ``steps``, ``step_size`` or ``eta0``, an unknown
            ``start``, a summed loss, or X and y of different or zero lengths.
    """
    if not rho > 0:
        raise ValueError(f"rho must be positive, got {rho}")
    if steps < 0:
        raise ValueError(f"steps must be ≥ 0, got {steps}")
    if step_size is not None and not step_size > 0:
        raise ValueError(f"step_size must be positive, got {step_size}")
    if not eta0 >= 0:
        raise ValueError(f"eta0 must be ≥ 0, got {eta0}")
    if start not in ("sam", "random"):
        raise ValueError(f"unknown start {start!r}; known: ['random', 'sam']")
    check_loss_data(loss_fn, X, y)

    def scale_of(name: str, p: Tensor) -> Tensor:
        if adaptive and (normalize_biases or "weight" in name):
            return p.abs() + eta0
        return torch.ones_like(p)

    with curvature_model(model, dtype) as net:
        phi = _PerturbedLoss(net, loss_fn, as_dtype(X, dtype), y, batch_size, scale_of)
        origin = torch.zeros_like(phi.theta)
        loss0, gradient0 = phi(origin)
        evaluations = 1
        gradient_norm = float(torch.linalg.vector_norm(gradient0))
        if gradient_norm > 0:
            sam = gradient0 * (rho / gradient_norm)
            sam_loss, sam_gradient = phi(sam)
            evaluations += 1
        else:  # a flat first-order model: no SAM direction, ε₁ = 0
            sam, sam_loss, sam_gradient = origin, loss0, gradient0
        if start == "sam" and gradient_norm > 0:
            delta, value, gradient = sam, sam_loss, sam_gradient
        else:
            generator = torch_generator(seed, "worst-case", "start")
            direction = torch.randn(origin.numel(), generator=generator, dtype=origin.dtype)
            delta = direction.to(origin.device) * (rho / float(torch.linalg.vector_norm(direction)))
            value, gradient = phi(delta)
            evaluations += 1
        alpha = 2.0 * rho if step_size is None else float(step_size)
        accepted = 0
        for _ in range(steps):
            norm = float(torch.linalg.vector_norm(gradient))
            if not norm > 0:  # a stationary point of φ inside the ball: nowhere to go
                break
            candidate = _project(delta + gradient * (alpha / norm), rho)
            candidate_value, candidate_gradient = phi(candidate)
            evaluations += 1
            if candidate_value >= value:
                delta, value, gradient = candidate, candidate_value, candidate_gradient
                accepted += 1
                alpha *= 2.0
            else:  # overshot (NaN included): stay, and take shorter steps
                alpha /= 2.0
        if sam_loss > value:  # a random start that never climbed above the SAM point
            delta, value = sam, sam_loss
        epsilon = (phi.scale * delta).detach()
    return WorstCaseResult(
        sharpness=value - loss0, sam_sharpness=sam_loss - loss0, loss=loss0, epsilon=epsilon,
        epsilon_norm=float(torch.linalg.vector_norm(epsilon)),
        scaled_norm=float(torch.linalg.vector_norm(delta)), gradient_norm=gradient_norm,
        num_evaluations=evaluations, accepted_steps=accepted, final_step_size=alpha, rho=rho,
        adaptive=adaptive)


__all__ = ["Start", "WorstCaseResult", "WorstCaseSettings", "worst_case_sharpness"]
