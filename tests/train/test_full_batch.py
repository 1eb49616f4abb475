"""Training to a stationary point: against an independent Newton solve of L2 logistic
regression, the (1/n) normalisation of subsets, warm starts, saddles, and budgets."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from genlab.models.mlp import MLP
from genlab.settings import MLPSettings
from genlab.train.full_batch import (
    NewtonSystem,
    RegularisedObjective,
    _negative_curvature_step,
    fit,
    flat_parameters,
    load_flat,
)

D = torch.float64


def bce(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(output.reshape(target.shape), target)


def data(n: int = 80, d: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=D)
    y = torch.bernoulli(torch.sigmoid(X @ torch.randn(d, generator=g, dtype=D)), generator=g)
    return X, y


def newton_reference(X: torch.Tensor, y: torch.Tensor, lam: float, mask: torch.Tensor,
                     ) -> torch.Tensor:
    """(1/n) Σ_mask ℓ + (λ/2)‖[w, b]‖², n = len(X), by plain Newton on [w, b]."""
    n = len(X)
    Xa, weight = torch.cat([X, torch.ones(n, 1, dtype=D)], 1), mask.to(D)
    theta = torch.zeros(X.shape[1] + 1, dtype=D)
    for _ in range(100):
        p = torch.sigmoid(Xa @ theta)
        g = Xa.T @ (weight * (p - y)) / n + lam * theta
        H = (Xa.T * (weight * p * (1 - p))) @ Xa / n + lam * torch.eye(len(theta), dtype=D)
        theta = theta - torch.linalg.solve(H, g)
    return theta


def test_logistic_regression_reaches_the_newton_optimum_with_full_n_normalisation() -> None:
    X, y = data()
    model = nn.Linear(4, 1).to(D)
    mask = torch.ones(80, dtype=torch.bool)
    mask[::3] = False
    for m in (torch.ones(80, dtype=torch.bool), mask):
        result = fit(RegularisedObjective(model, bce, X, y, 0.05, m), flat_parameters(model))
        assert result.converged and result.grad_max <= 1e-9
        torch.testing.assert_close(result.theta, newton_reference(X, y, 0.05, m), rtol=1e-8,
                                   atol=1e-10)
    assert flat_parameters(model).shape == (5,)  # the model itself is left alone


def test_objective_hessian_is_autograd_hessian() -> None:
    X, y = data(30, 3)
    torch.manual_seed(0)
    model = MLP(MLPSettings(hidden=(5,), activation="tanh"), 3, 1).to(D)
    objective = RegularisedObjective(model, bce, X, y, 0.01)
    theta = flat_parameters(model)
    expected = torch.autograd.functional.hessian(objective, theta)
    torch.testing.assert_close(objective.hessian(theta), expected, rtol=1e-10, atol=1e-12)
    value, gradient = objective.value_and_grad(theta)
    torch.testing.assert_close(gradient, torch.autograd.functional.jacobian(objective, theta))
    assert value == pytest.approx(float(objective(theta)))


def test_warm_start_chord_steps_reach_the_leave_one_out_optimum() -> None:
    """From θ̂ with the full-data Hessian, the chord iteration converges to the same point as
    a fit from scratch (convex objective), without forming a new Hessian."""
    X, y = data()
    model = nn.Linear(4, 1).to(D)
    full = fit(RegularisedObjective(model, bce, X, y, 0.05), flat_parameters(model))
    system = NewtonSystem(RegularisedObjective(model, bce, X, y, 0.05).hessian(full.theta))
    mask = torch.ones(80, dtype=torch.bool)
    mask[7] = False
    warm = fit(RegularisedObjective(model, bce, X, y, 0.05, mask), full.theta, hessian=system)
    assert warm.converged and warm.hessians == 0 and warm.lbfgs_iterations == 0
    # max|∇| ≤ 1e-9 and λ_min(H) ≥ λ = 0.05 leave θ within 2e-8 of the optimum
    torch.testing.assert_close(warm.theta, newton_reference(X, y, 0.05, mask), rtol=0,
                               atol=2e-8)


def test_an_mlp_converges_deterministically() -> None:
    X, y = data(60, 3)
    torch.manual_seed(1)
    model = MLP(MLPSettings(hidden=(8,), activation="tanh"), 3, 1).to(D)
    objective = RegularisedObjective(model, bce, X, y, 0.01)
    a = fit(objective, flat_parameters(model))
    b = fit(objective, flat_parameters(model))
    assert a.converged and torch.equal(a.theta, b.theta)
    # a stationary point that is a minimum: the Hessian there is positive definite
    assert NewtonSystem(objective.hessian(a.theta)).positive_definite
    trained = load_flat(copy.deepcopy(model), a.theta)
    torch.testing.assert_close(flat_parameters(trained), a.theta, rtol=0, atol=0)


def saddle_objective() -> RegularisedObjective:
    """f(θ) = θ₀² − θ₁² + θ₁⁴/4 + (λ/2)‖θ‖² written as a 'model' with no data dependence: the
    origin is a stationary saddle, the minima are θ₀ = 0, θ₁² = 2 − λ."""

    class Toy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.theta = nn.Parameter(torch.zeros(2, dtype=D))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            t = self.theta
            return (t[0] ** 2 - t[1] ** 2 + t[1] ** 4 / 4).expand(len(x), 1)

    def identity(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return output.mean()

    return RegularisedObjective(Toy(), identity, torch.zeros(3, 1, dtype=D),
                                torch.zeros(3, dtype=D), 0.01)


def test_saddles_are_left_along_negative_curvature() -> None:
    """The step from the saddle moves downhill along θ₁, and a fit started next to the saddle
    (not on it: stationarity is the stopping rule) ends in a minimum."""
    objective = saddle_objective()
    origin = torch.zeros(2, dtype=D)
    system = NewtonSystem(objective.hessian(origin))
    assert not system.positive_definite and system.lowest[0] < 0
    value, gradient = objective.value_and_grad(origin)
    moved, new_value, _ = _negative_curvature_step(objective, origin, value, gradient,
                                                   *system.lowest)
    assert new_value < value and abs(float(moved[1])) > 0.1 and float(moved[0]) == 0
    result = fit(objective, torch.tensor([0.5, 1e-6], dtype=D))
    assert result.converged  # the minimum: θ₀ = 0, θ₁² = 2 − λ
    torch.testing.assert_close(result.theta, torch.tensor([0.0, 1.99 ** 0.5], dtype=D),
                               rtol=0, atol=1e-8)


def test_negative_curvature_at_the_handover_sends_the_fit_to_l_bfgs_not_newton() -> None:
    """Newton started (no L-BFGS phase: coarse_tol above the gradient) next to the saddle,
    where its one Hessian has negative curvature: the fit escapes along it and L-BFGS brings it
    near the minimum, where Newton finishes from one more Hessian. Saddle-free Newton alone
    would double θ₁ per step out of the saddle, re-forming its Hessian as it goes."""
    result = fit(saddle_objective(), torch.tensor([0.5, 1e-6], dtype=D), coarse_tol=10.0)
    assert result.converged and result.lbfgs_iterations > 0 and result.hessians <= 2
    torch.testing.assert_close(result.theta.abs(), torch.tensor([0.0, 1.99 ** 0.5], dtype=D),
                               rtol=0, atol=1e-8)


def test_budgets_end_a_fit_unconverged_not_silently() -> None:
    X, y = data(60, 3)
    torch.manual_seed(1)
    model = MLP(MLPSettings(hidden=(8,), activation="tanh"), 3, 1).to(D)
    result = fit(RegularisedObjective(model, bce, X, y, 0.01), flat_parameters(model), max_lbfgs=3,
                 max_newton=1)
    assert not result.converged and result.grad_max > 1e-9
