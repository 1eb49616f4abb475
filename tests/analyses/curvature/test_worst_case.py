"""Worst-case (SAM) sharpness against losses whose maximum over the ball is known exactly.

Linear regression under the square loss, L(θ) = (1/2n)‖X̃θ − y‖² with X̃ = [X, 1], is exactly
quadratic in θ = (w, b) with Hessian A = X̃ᵀX̃/n, so around any θ₀ the increase is
gᵀε + ½εᵀAε with g = ∇L(θ₀). Writing ε = Tδ (T = I, or diag(|θ₀| + η₀) for the adaptive
sharpness) the maximum over ‖δ‖ ≤ ρ is ρ²λ_max(TAT)/2 at the least-squares solution (g = 0), and
elsewhere the trust-region value of (Tg)ᵀδ + ½δᵀ(TAT)δ, solved here to machine precision by
bisection on its secular equation. For a nonlinear network the reference is ρ²λ_max(H)/2 at an
interpolating minimum, which the true value approaches as ρ → 0.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from pydantic import ValidationError
from torch import Tensor, nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from genlab.analyses.curvature.hessian import hessian_top_eigenvalues
from genlab.analyses.curvature.worst_case import WorstCaseSettings, worst_case_sharpness
from genlab.losses import loss_value
from genlab.models.mlp import MLP
from genlab.settings import MLPSettings

N, DIM, CLASSES = 16, 5, 3
RHO = 0.1
mse = functools.partial(loss_value, "mse")
cross_entropy = functools.partial(loss_value, "cross_entropy")


@dataclass(frozen=True)
class Regression:
    model: nn.Linear  # float64, at the least-squares solution
    X: Tensor
    y: Tensor
    hessian: Tensor  # A = X̃ᵀX̃/n, (d + 1, d + 1), the order of parameters_to_vector: (w, b)
    residual: Tensor  # X̃θ* − y


@functools.cache
def regression() -> Regression:
    """40 examples in 5 dimensions with unequal scales (A's eigenvalues 0.23 … 9.14)."""
    generator = torch.Generator().manual_seed(0)
    scales = torch.tensor([3.0, 2.0, 1.5, 1.0, 0.5], dtype=torch.float64)
    X = torch.randn(40, DIM, generator=generator, dtype=torch.float64) * scales
    y = (X @ torch.randn(DIM, generator=generator, dtype=torch.float64)
         + 0.3 * torch.randn(40, generator=generator, dtype=torch.float64))
    design = torch.cat([X, torch.ones(40, 1, dtype=torch.float64)], dim=1)
    solution = torch.linalg.lstsq(design, y[:, None]).solution[:, 0]
    model = nn.Linear(DIM, 1).double()
    vector_to_parameters(solution, model.parameters())
    return Regression(model, X, y, design.T @ design / 40, design @ solution - y)


def scaling(theta: Tensor, adaptive: bool, eta0: float, normalize_biases: bool) -> Tensor:
    """The diagonal of T for the linear model's (w, b)."""
    if not adaptive:
        return torch.ones_like(theta)
    scale = theta.abs() + eta0
    if not normalize_biases:
        scale[-1] = 1.0  # the bias keeps T = 1, as in Kwon et al.'s code
    return scale


def trust_region_maximum(M: Tensor, g: Tensor, rho: float) -> float:
    """max_{‖δ‖ ≤ ρ} gᵀδ + ½δᵀMδ for M ⪰ 0, g not orthogonal to M's top eigenvector: the
    maximiser is δ = (μI − M)⁻¹g with μ > λ_max and ‖δ‖ = ρ, and ‖δ(μ)‖ decreases in μ from ∞
    to ≤ ρ at μ = λ_max + ‖g‖/ρ, so bisection finds μ to machine precision."""
    values, vectors = torch.linalg.eigh(M)
    c = vectors.T @ g
    low, high = float(values[-1]), float(values[-1]) + float(torch.linalg.vector_norm(g)) / rho
    for _ in range(200):
        middle = (low + high) / 2
        if float(torch.linalg.vector_norm(c / (middle - values))) > rho:
            low = middle
        else:
            high = middle
    delta = vectors @ (c / (high - values))
    return float(g @ delta + 0.5 * delta @ M @ delta)


def loss_at(model: nn.Module, loss_fn: Callable[[Tensor, Tensor], Tensor], X: Tensor,
            y: Tensor, epsilon: Tensor) -> float:
    """L(θ + ε) on a float64 copy, the obvious way."""
    net = copy.deepcopy(model).double().eval()
    theta = parameters_to_vector(net.parameters()).detach()
    vector_to_parameters(theta + epsilon, net.parameters())
    with torch.no_grad():
        return float(loss_fn(net(X.double()), y))


# ------------------------------------------------------------------------- exact quadratics

VARIANTS = [(False, True), (True, True), (True, False)]  # (adaptive, normalize_biases)
VARIANT_IDS = ["plain", "adaptive", "adaptive-weights-only"]


@pytest.mark.parametrize(("adaptive", "normalize_biases"), VARIANTS, ids=VARIANT_IDS)
def test_quadratic_at_its_minimum_reaches_half_rho_squared_lambda_max(
        adaptive, normalize_biases) -> None:
    r = regression()
    theta = parameters_to_vector(r.model.parameters()).detach()
    T = scaling(theta, adaptive, 0.01, normalize_biases)
    M = T[:, None] * r.hessian * T[None, :]
    exact = RHO**2 * float(torch.linalg.eigvalsh(M)[-1]) / 2
    result = worst_case_sharpness(r.model, mse, r.X, r.y, RHO, adaptive=adaptive,
                                  normalize_biases=normalize_biases)
    # The default 20 steps, a power iteration whose shift vanishes as the steps double
    # (λ₂/λ₁ = 0.46 plain, 0.58 adaptive), reach the exact value to 4e-16 (plain) and 5e-12
    # (adaptive) relative; 1e-8 leaves room for other platforms' rounding, not for a slower ascent.
    assert result.sharpness >= (1 - 1e-8) * exact
    assert result.sharpness <= (1 + 1e-10) * exact  # attained, so never above (but rounding)
    assert result.scaled_norm == pytest.approx(RHO, rel=1e-12)  # a convex φ peaks on the sphere
    assert result.loss == pytest.approx(0.5 * float(r.residual.square().mean()), rel=1e-12)
    # at the least-squares solution the gradient is rounding noise: the SAM step goes in an
    # arbitrary direction (53-92% of the way up here), and the ascent finds the top eigenvector
    assert result.gradient_norm < 1e-12
    assert result.sam_sharpness <= result.sharpness
    assert result.num_evaluations == 22 and result.accepted_steps <= 20  # θ, SAM point, steps
    # ε = Tδ with δ along the top eigenvector of TAT
    top = torch.linalg.eigh(M).eigenvectors[:, -1]
    delta = result.epsilon / T
    assert abs(float(delta @ top)) == pytest.approx(RHO, rel=1e-8)
    assert result.epsilon_norm == pytest.approx(float(torch.linalg.vector_norm(result.epsilon)))


@pytest.mark.parametrize(("adaptive", "normalize_biases"), VARIANTS, ids=VARIANT_IDS)
def test_quadratic_off_its_minimum_matches_the_trust_region_solution(
        adaptive, normalize_biases) -> None:
    r = regression()
    generator = torch.Generator().manual_seed(5)
    theta0 = parameters_to_vector(r.model.parameters()).detach()
    theta = theta0 + 0.02 * torch.randn(theta0.numel(), generator=generator, dtype=torch.float64)
    model = copy.deepcopy(r.model)
    vector_to_parameters(theta, model.parameters())
    design = torch.cat([r.X, torch.ones(len(r.X), 1, dtype=torch.float64)], dim=1)
    gradient = design.T @ (design @ theta - r.y) / len(r.X)
    T = scaling(theta, adaptive, 0.01, normalize_biases)
    M, g = T[:, None] * r.hessian * T[None, :], T * gradient
    exact = trust_region_maximum(M, g, RHO)
    result = worst_case_sharpness(model, mse, r.X, r.y, RHO, adaptive=adaptive,
                                  normalize_biases=normalize_biases)
    # the gradient term ρ‖Tg‖ is 21-24% of the maximum here; measured deficit ≤ 7e-14 relative
    assert (1 - 1e-8) * exact <= result.sharpness <= (1 + 1e-10) * exact
    # the one-step SAM estimate, in closed form: δ₁ = ρ Tg/‖Tg‖
    sam = RHO * g / torch.linalg.vector_norm(g)
    assert result.sam_sharpness == pytest.approx(float(g @ sam + 0.5 * sam @ M @ sam), rel=1e-10)
    assert result.gradient_norm == pytest.approx(float(torch.linalg.vector_norm(g)), rel=1e-10)
    assert result.sam_sharpness < result.sharpness  # the curvature term moves the optimum


# ---------------------------------------------------------------------------- nonlinear MLPs


@functools.cache
def teacher() -> tuple[nn.Module, Tensor, Tensor]:
    """A tanh MLP (P = 85) at an interpolating minimum of the square loss: its own float64
    outputs as targets, so the loss and the gradient are exactly 0."""
    generator = torch.Generator().manual_seed(0)
    X = torch.randn(N, DIM, generator=generator)
    torch.manual_seed(1)
    model = MLP(MLPSettings(hidden=(12,), activation="tanh"), DIM, 1).eval()
    with torch.no_grad():
        y = copy.deepcopy(model).double()(X.double())[:, 0]
    return model, X, y


@functools.cache
def classifier(activation: str = "tanh") -> tuple[nn.Module, Tensor, Tensor]:
    """An MLP (P = 111) on random labels, far from any minimum."""
    generator = torch.Generator().manual_seed(2)
    X = torch.randn(N, DIM, generator=generator)
    y = torch.randint(0, CLASSES, (N,), generator=generator)
    torch.manual_seed(3)
    return MLP(MLPSettings(hidden=(12,), activation=activation), DIM, CLASSES).eval(), X, y


def test_mlp_at_a_minimum_tends_to_half_rho_squared_lambda_max() -> None:
    model, X, y = teacher()
    top = hessian_top_eigenvalues(model, mse, X, y, max_iter=60, tol=1e-12).eigenvalues[0]
    rho = 1e-3
    result = worst_case_sharpness(model, mse, X, y, rho)
    assert result.loss == 0.0 and result.gradient_norm == 0.0
    assert result.sam_sharpness == 0.0  # no SAM direction at g = 0: ε₁ = 0
    assert result.num_evaluations == 22  # θ, the random start (SAM's fallback), 20 steps
    # S_ρ = ρ²λ₁/2 + O(ρ³): measured ρ²λ₁/2 · (1 − 6e-5) at ρ = 1e-3, (1 − 6e-4) at 1e-2
    assert result.sharpness == pytest.approx(rho**2 * top / 2, rel=1e-3)


@pytest.mark.parametrize("rho", [0.1, 1.0])
def test_mlp_ascent_beats_the_sam_step_and_is_attained(rho) -> None:
    model, X, y = classifier()
    result = worst_case_sharpness(model, cross_entropy, X, y, rho)
    assert result.sharpness >= result.sam_sharpness > 0
    assert result.scaled_norm <= rho * (1 + 1e-12)
    # the value is attained: L(θ + ε) − L(θ) recomputed by hand on a copy
    perturbed = loss_at(model, cross_entropy, X, y, result.epsilon)
    assert perturbed - result.loss == pytest.approx(result.sharpness, rel=1e-12, abs=1e-15)
    # a 25x longer ascent from a 10x shorter first step finds no more (measured agreement:
    # 5e-9 relative at ρ = 1, 4e-15 at ρ = 0.1), nor does a random start (4e-8, 0)
    careful = worst_case_sharpness(model, cross_entropy, X, y, rho, steps=500,
                                   step_size=rho / 5)
    assert result.sharpness == pytest.approx(careful.sharpness, rel=1e-6)
    random = worst_case_sharpness(model, cross_entropy, X, y, rho, start="random")
    assert random.sharpness <= result.sharpness * (1 + 1e-6)


def test_adaptive_sharpness_is_invariant_under_neuron_rescaling() -> None:
    """ReLU(c(wᵀx + b)) = c ReLU(wᵀx + b): scaling a hidden neuron's incoming weights and bias by
    c and its outgoing weights by 1/c leaves the function, and with η₀ = 0 the adaptive sharpness
    of every radius, unchanged; the plain sharpness, and ASAM's weights-only scaling, change."""
    model, X, y = classifier("relu")
    model = copy.deepcopy(model).double()  # so that the rescaled copy differs only by rounding
    rescaled = copy.deepcopy(model)
    first, last = rescaled.net[0], rescaled.net[2]
    c = torch.linspace(0.2, 5.0, first.out_features, dtype=torch.float64)
    with torch.no_grad():
        first.weight.mul_(c[:, None])
        first.bias.mul_(c)
        last.weight.div_(c[None, :])
        torch.testing.assert_close(rescaled(X.double()), model(X.double()), rtol=1e-12,
                                   atol=1e-12)

    def ratio(**kwargs) -> float:
        a, b = (worst_case_sharpness(net, cross_entropy, X, y, 0.5, **kwargs).sharpness
                for net in (model, rescaled))
        return b / a

    # measured: equal to the last bit adaptively with η₀ = 0; the plain sharpness grows 3.3x,
    # ASAM's weights-only scaling 3.1%, and η₀ = 0.01 3.4%
    assert ratio(adaptive=True, eta0=0.0) == pytest.approx(1.0, rel=1e-12)
    assert ratio() > 2.0
    assert ratio(adaptive=True, eta0=0.0, normalize_biases=False) > 1.01
    assert ratio(adaptive=True) > 1.01


# --------------------------------------------------------------- seeds, modes, dtypes, batches


def test_random_start_is_seeded_and_float32_agrees() -> None:
    model, X, y = classifier()
    runs = [worst_case_sharpness(model, cross_entropy, X, y, 0.3, start="random", seed=s)
            for s in (4, 4, 5)]
    assert runs[0].sharpness == runs[1].sharpness
    assert torch.equal(runs[0].epsilon, runs[1].epsilon)
    assert runs[0].num_evaluations == 23  # θ, the SAM point, the random start, 20 steps
    single = worst_case_sharpness(model, cross_entropy, X, y, 0.3, dtype=torch.float32)
    double = worst_case_sharpness(model, cross_entropy, X, y, 0.3)
    assert single.epsilon.dtype == torch.float32
    assert single.sharpness == pytest.approx(double.sharpness, rel=1e-4)
    # a different seed starts elsewhere (and, here, climbs to the same maximum)
    assert not torch.equal(runs[0].epsilon, runs[2].epsilon)


def test_batches_give_the_mean_over_all_examples() -> None:
    model, X, y = classifier()
    whole = worst_case_sharpness(model, cross_entropy, X, y, 0.3, adaptive=True)
    batched = worst_case_sharpness(model, cross_entropy, X, y, 0.3, adaptive=True, batch_size=5)
    assert batched.sharpness == pytest.approx(whole.sharpness, rel=1e-12)
    # near the maximum the value is flat to first order, so rounding in the summed gradients
    # moves ε (1e-9 here) far more than the value (1e-15)
    torch.testing.assert_close(batched.epsilon, whole.epsilon, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_model_modes_and_parameters_are_left_as_found(dtype) -> None:
    model, X, y = classifier()
    model = copy.deepcopy(model).to(dtype).train()
    model.net[1].eval()  # a mixed state must come back exactly, not as all-train
    flags = [m.training for m in model.modules()]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():  # as a caller evaluating a model might; the ascent needs gradients
        result = worst_case_sharpness(model, cross_entropy, X, y, 0.3, adaptive=True, steps=3)
    assert result.sharpness > result.sam_sharpness > 0
    assert [m.training for m in model.modules()] == flags
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) and after[k].dtype == dtype for k in before)
    assert all(p.grad is None for p in model.parameters())


def test_the_loss_is_taken_in_eval_mode() -> None:
    model, X, y = classifier()
    with_dropout = nn.Sequential(nn.Dropout(0.5), copy.deepcopy(model)).train()
    plain = worst_case_sharpness(model, cross_entropy, X, y, 0.3)
    dropped = worst_case_sharpness(with_dropout, cross_entropy, X, y, 0.3)
    assert dropped.sharpness == pytest.approx(plain.sharpness, rel=1e-12)
    assert with_dropout.training


def test_invalid_arguments_raise() -> None:
    model, X, y = classifier()
    for kwargs, match in [({"rho": 0.0}, "rho"), ({"steps": -1}, "steps"),
                          ({"step_size": 0.0}, "step_size"), ({"eta0": -0.1}, "eta0"),
                          ({"start": "zero"}, "start")]:
        with pytest.raises(ValueError, match=match):
            worst_case_sharpness(model, cross_entropy, X, y, **{"rho": 0.1, **kwargs})
    with pytest.raises(ValueError, match="mean"):
        worst_case_sharpness(model, nn.CrossEntropyLoss(reduction="sum"), X, y, 0.1)
    with pytest.raises(ValueError, match="same nonzero number"):
        worst_case_sharpness(model, cross_entropy, X, y[:-1], 0.1)


def test_settings() -> None:
    settings = WorstCaseSettings()
    assert (settings.rho, settings.adaptive, settings.eta0, settings.steps) == (0.05, False,
                                                                                0.01, 20)
    assert settings.step_size is None and settings.start == "sam"
    for bad in ({"rho": 0.0}, {"rho": -1.0}, {"steps": -1}, {"step_size": 0.0},
                {"eta0": -0.01}, {"start": "zero"}, {"max_examples": 0}, {"rho": math.inf},
                {"radius": 0.1}):  # unknown keys are rejected
        with pytest.raises(ValidationError):
            WorstCaseSettings(**bad)
