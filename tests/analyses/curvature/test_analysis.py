"""The pipeline's sharpness analysis: the stability threshold against the iteration it bounds, and
the composite against the library calls it is made of."""

from __future__ import annotations

import pytest
import torch

from genlab.analyses.curvature.analysis import analyze_sharpness
from genlab.analyses.curvature.hessian import (
    hessian_top_eigenvalues,
    hessian_trace,
    spectral_density,
    stability_threshold,
    subsample,
)
from genlab.analyses.curvature.nonuniformity import nonuniformity
from genlab.analyses.curvature.worst_case import worst_case_sharpness
from genlab.analyses.settings import SharpnessSettings
from genlab.losses import loss_value
from genlab.models.mlp import MLP
from genlab.settings import MLPSettings


def heavy_ball_amplitude(curvature: float, lr: float, momentum: float, steps: int = 4000) -> float:
    """|θ_T| of heavy-ball GD (torch.optim.SGD's form) on ½λθ² from θ₀ = 1, in float64."""
    theta, velocity = 1.0, 0.0
    for _ in range(steps):
        velocity = momentum * velocity + curvature * theta
        theta -= lr * velocity
    return abs(theta)


@pytest.mark.parametrize(("lr", "momentum"), [(0.1, 0.0), (0.05, 0.9), (0.3, 0.5)])
def test_threshold_separates_stable_from_unstable_heavy_ball(lr: float, momentum: float) -> None:
    """Just below (2 + 2β)/η the iteration decays; just above, it grows: the threshold is the
    exact stability boundary of the run's own optimizer (1% either side; at the boundary the
    amplitude stays of order 1, so 4000 steps separate 0.99 and 1.01 by many orders)."""
    edge = stability_threshold(lr, momentum)
    assert heavy_ball_amplitude(0.99 * edge, lr, momentum) < 1e-3
    assert heavy_ball_amplitude(1.01 * edge, lr, momentum) > 1e3


def test_threshold_rejects_invalid_optimizers() -> None:
    with pytest.raises(ValueError, match="learning rate"):
        stability_threshold(0.0)
    with pytest.raises(ValueError, match="momentum"):
        stability_threshold(0.1, 1.0)


@pytest.fixture(scope="module")
def problem():
    torch.manual_seed(0)
    model = MLP(MLPSettings(hidden=(10,), activation="tanh"), 4, 1).double()
    X = torch.randn(40, 4, dtype=torch.float64)
    y = torch.randn(40, dtype=torch.float64)

    def mse(output, target):
        return loss_value("mse", output, target)

    return model, mse, X, y


def test_composite_equals_the_calls_it_is_made_of(problem) -> None:
    """Same subsample, seeds and budgets as the separate calls, so the same numbers to the bit;
    the two optional measures run on their own subsamples and report SGD's ratio for B = 1."""
    model, mse, X, y = problem
    settings = SharpnessSettings(k=3, max_iter=30, trace_num_matvecs=30, density_num_repeats=2,
                                 density_num_steps=10, max_examples=32, seed=3,
                                 worst_case={"rho": 0.1, "steps": 5, "max_examples": 20},
                                 nonuniformity={"max_iter": 15, "max_examples": 25})
    result = analyze_sharpness(model, mse, X, y, settings, lr=0.1, momentum=0.5, batch_size=1)
    Xs, ys = subsample(X, y, 32, 3)
    top = hessian_top_eigenvalues(model, mse, Xs, ys, k=3, max_iter=30, seed=3)
    trace = hessian_trace(model, mse, Xs, ys, num_matvecs=30, seed=3)
    density = spectral_density(model, mse, Xs, ys, num_repeats=2, num_steps=10, seed=3)
    assert result.top.eigenvalues == top.eigenvalues
    assert result.trace.estimate == trace.estimate
    assert torch.equal(result.density.density, density.density)
    assert result.n_examples == 32 and result.threshold == stability_threshold(0.1, 0.5)
    assert result.lambda_over_threshold == top.eigenvalues[0] / result.threshold
    Xw, yw = subsample(X, y, 20, 0)
    assert result.worst_case.sharpness == worst_case_sharpness(model, mse, Xw, yw, 0.1,
                                                               steps=5).sharpness
    Xn, yn = subsample(X, y, 25, 0)
    spread = nonuniformity(model, mse, Xn, yn, max_iter=15)
    assert result.nonuniformity.nonuniformity == spread.nonuniformity
    # B = 1 of n = 40: s·η·√((n − B)/(B(n − 1))) = s·η
    assert result.nonuniformity_ratio == pytest.approx(spread.nonuniformity * 0.1, rel=1e-12)


def test_optional_measures_are_skipped_unless_asked_and_gd_has_no_sgd_noise(problem) -> None:
    model, mse, X, y = problem
    plain = analyze_sharpness(model, mse, X, y, SharpnessSettings(k=1, max_iter=5,
                              trace_num_matvecs=6, density_num_repeats=1,
                              density_num_steps=5), lr=0.1)
    assert plain.worst_case is None and plain.nonuniformity is None
    full_batch = analyze_sharpness(model, mse, X, y, SharpnessSettings(
        k=1, max_iter=5, trace_num_matvecs=6, density_num_repeats=1, density_num_steps=5,
        nonuniformity={"max_iter": 5}), lr=0.1, batch_size=None)
    assert full_batch.nonuniformity.nonuniformity > 0 and full_batch.nonuniformity_ratio == 0.0
