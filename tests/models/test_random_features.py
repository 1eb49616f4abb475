"""Random-features regression against exact references in float64."""

from __future__ import annotations

import numpy as np
import pytest

from genlab.models.random_features import (
    features,
    gradient_descent_path,
    min_norm_least_squares,
    mse,
    random_feature_weights,
)


def problem(n: int, p: int, d: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    phi = features(x, random_feature_weights(p, d, rng))
    y = rng.standard_normal(n)
    return phi, y


def test_features_are_relu_of_scaled_projection() -> None:
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((4, 9)), rng.standard_normal((6, 9))
    np.testing.assert_array_equal(features(x, w), np.maximum(x @ w.T / 3.0, 0.0))


def test_underparameterised_fit_is_ordinary_least_squares() -> None:
    phi, y = problem(n=50, p=10)
    ols = np.linalg.solve(phi.T @ phi, phi.T @ y)  # normal equations: full column rank
    np.testing.assert_allclose(min_norm_least_squares(phi, y), ols, rtol=1e-9, atol=1e-12)


def test_overparameterised_fit_interpolates_with_minimum_norm() -> None:
    phi, y = problem(n=20, p=80)
    theta = min_norm_least_squares(phi, y)
    np.testing.assert_allclose(phi @ theta, y, atol=1e-9)
    # minimum norm <=> θ lies in the row space of Φ: θ = Φᵀ(ΦΦᵀ)⁻¹y
    np.testing.assert_allclose(theta, phi.T @ np.linalg.solve(phi @ phi.T, y), atol=1e-9)


def test_gd_closed_form_matches_iterating() -> None:
    phi, y = problem(n=30, p=45)
    n, lr = len(y), 0.5 * 30 / np.linalg.norm(phi, 2) ** 2
    theta, by_step = np.zeros(phi.shape[1]), {}
    for t in range(1, 201):
        theta = theta - lr * phi.T @ (phi @ theta - y) / n
        by_step[t] = theta.copy()
    steps = np.array([1, 2, 17, 200])
    path = gradient_descent_path(phi, y, lr, steps)
    for t, th in zip(steps, path.thetas, strict=True):
        np.testing.assert_allclose(th, by_step[int(t)], rtol=1e-9, atol=1e-12)


def test_gd_converges_to_the_minimum_norm_solution() -> None:
    phi, y = problem(n=15, p=40)
    lr = 1.0 * 15 / np.linalg.norm(phi, 2) ** 2
    path = gradient_descent_path(phi, y, lr, np.array([10**7]))
    np.testing.assert_allclose(path.thetas[0], min_norm_least_squares(phi, y), atol=1e-6)


def test_unstable_step_is_refused() -> None:
    phi, y = problem(n=10, p=10)
    with pytest.raises(ValueError, match="unstable"):
        gradient_descent_path(phi, y, lr=3 * 10 / np.linalg.norm(phi, 2) ** 2,
                              steps=np.array([1]))


def test_mse_of_a_path_is_per_step() -> None:
    phi, y = problem(n=12, p=7)
    thetas = np.stack([np.zeros(7), min_norm_least_squares(phi, y)])
    np.testing.assert_allclose(mse(phi, thetas, y),
                               [np.mean(y**2), np.mean((phi @ thetas[1] - y) ** 2)])
