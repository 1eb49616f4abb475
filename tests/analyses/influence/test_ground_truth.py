"""Leave-one-out and LDS harnesses: exact identities on ridge regression and hand-computed
examples, then influence against real retraining on L2-regularised logistic regression.

Convention (genlab.analyses.influence.exact): I[t, i] positive = upweighting zᵢ raises test loss t;
removing zᵢ changes it by ≈ −I[t, i]/n (predicted_loo_change).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import influence_support
import numpy as np
import pytest
import torch
from scipy import stats
from torch import Tensor, nn
from torch.nn import functional as F

from genlab.analyses.influence.exact import (
    exact_influence,
    gradient_dot,
    loss_function,
    random_scores,
)
from genlab.analyses.influence.ground_truth import (
    LeaveOneOut,
    compare_with_loo,
    datamodel_measurements,
    leave_one_out,
    linear_datamodeling_score,
    predicted_loo_change,
    random_subsets,
)

D = torch.float64


# ------------------------------------------------------------------------------- harnesses


def test_leave_one_out_calls_the_baseline_then_each_removal() -> None:
    """A fake training whose test quantity is linear in the mask, f = W·mask: removing i must
    change it by exactly −W[:, i], with the baseline on the full mask first."""
    W = torch.arange(12, dtype=D).reshape(3, 4)
    calls = []

    def train_fn(mask: Tensor, warm_start: bool) -> Tensor:
        calls.append((mask.clone(), warm_start))
        return W @ mask.to(D)

    loo = leave_one_out(train_fn, [2, 0], n_train=4, warm_start=False)
    assert bool(calls[0][0].all()) and len(calls) == 3
    assert [int((~mask).nonzero()) for mask, _ in calls[1:]] == [2, 0]
    assert all(warm is False for _, warm in calls)
    torch.testing.assert_close(loo.delta, -W[:, [2, 0]], rtol=0, atol=0)
    torch.testing.assert_close(loo.baseline, W.sum(dim=1), rtol=0, atol=0)
    assert loo.indices.tolist() == [2, 0] and loo.warm_start is False
    with pytest.raises(ValueError, match="indices"):
        leave_one_out(train_fn, [4], n_train=4)


def test_compare_with_loo_scale_sign_and_undefined_rows() -> None:
    loo_delta = torch.tensor([[1.0, -2.0, 0.5], [3.0, 1.0, -1.0], [0.0, 0.0, 0.0]], dtype=D)
    loo = LeaveOneOut(indices=torch.tensor([0, 1, 2]), delta=loo_delta,
                      baseline=torch.zeros(3, dtype=D), warm_start=True)
    n = 10
    perfect = -n * loo_delta  # −I/n = delta exactly
    agreement = compare_with_loo(torch.cat([perfect, torch.zeros(3, 2, dtype=D)], 1), loo, n)
    assert agreement.pearson == pytest.approx(1.0) and agreement.slope == pytest.approx(1.0)
    assert agreement.mean_per_test_pearson == pytest.approx(1.0)
    assert math.isnan(agreement.per_test_pearson[2])  # a constant row has no correlation
    flipped = compare_with_loo(-perfect, loo, n)
    assert flipped.pearson == pytest.approx(-1.0) and flipped.slope == pytest.approx(-1.0)
    torch.testing.assert_close(predicted_loo_change(perfect, n), loo_delta)


def test_random_subsets_have_the_exact_size_and_are_seeded() -> None:
    masks = random_subsets(101, 40, alpha=0.5, seed=7)
    assert masks.shape == (40, 101) and masks.dtype == torch.bool
    assert masks.sum(dim=1).tolist() == [50] * 40  # round(50.5) = 50, banker's rounding
    assert torch.equal(masks, random_subsets(101, 40, alpha=0.5, seed=7))
    assert len({tuple(row.tolist()) for row in masks}) == 40
    # every example is in about half the subsets: 40 draws, sd √10 ≈ 3.2
    assert int(masks.sum(dim=0).min()) >= 5 and int(masks.sum(dim=0).max()) <= 35
    with pytest.raises(ValueError, match="alpha"):
        random_subsets(10, 3, alpha=1.0)


def test_lds_equals_a_hand_computation() -> None:
    """Two test points, four training examples, three subsets.

    g = subsets @ scoresᵀ: S₀ = {0, 1}, S₁ = {1, 2}, S₂ = {0, 3};
    test 0 scores (1, 2, 3, 4): g = (3, 5, 5), ranks (1, 2.5, 2.5); f = (0.1, 0.2, 0.3), ranks
    (1, 2, 3): Pearson of ranks = [(−1)(−1) + 0.5·0 + 0.5·1] / √(1.5 · 2) = 1.5/√3 = √3/2.
    test 1 scores (4, −1, 0, 2): g = (3, −1, 6), ranks (2, 1, 3); f = (5, 9, 1), ranks
    (2, 3, 1): deviations (0, −1, 1) and (0, 1, −1): −1. LDS = (√3/2 − 1)/2."""
    scores = torch.tensor([[1.0, 2.0, 3.0, 4.0], [4.0, -1.0, 0.0, 2.0]], dtype=D)
    subsets = torch.tensor([[1, 1, 0, 0], [0, 1, 1, 0], [1, 0, 0, 1]], dtype=torch.bool)
    measured = torch.tensor([[0.1, 5.0], [0.2, 9.0], [0.3, 1.0]], dtype=D)
    result = linear_datamodeling_score(scores, subsets, measured)
    np.testing.assert_allclose(result.per_test, [math.sqrt(3) / 2, -1.0], rtol=1e-12)
    assert result.lds == pytest.approx((math.sqrt(3) / 2 - 1) / 2, rel=1e-12)
    assert result.num_undefined == 0
    margin = linear_datamodeling_score(scores, subsets, measured, measure="margin")
    np.testing.assert_allclose(margin.per_test, -result.per_test, rtol=1e-12)


def test_lds_is_scipy_spearman_per_test_point() -> None:
    generator = np.random.default_rng(0)
    scores = torch.from_numpy(generator.normal(size=(6, 30)))
    subsets = random_subsets(30, 12, seed=1)
    measured = torch.from_numpy(generator.normal(size=(12, 6)))
    measured[:, 3] = 2.0  # a constant test quantity: undefined, left out of the mean
    result = linear_datamodeling_score(scores, subsets, measured)
    g = subsets.to(D).numpy() @ scores.numpy().T
    expected = [stats.spearmanr(g[:, t], measured[:, t].numpy()).statistic for t in range(6)
                if t != 3]
    np.testing.assert_allclose(np.delete(result.per_test, 3), expected, rtol=1e-12)
    assert math.isnan(result.per_test[3]) and result.num_undefined == 1
    assert result.lds == pytest.approx(np.mean(expected), rel=1e-12)
    with pytest.raises(ValueError, match="measured"):
        linear_datamodeling_score(scores, subsets, measured[:, :5])


# ------------------------------------------------------------------- ridge: exact identities


def test_ridge_loo_is_influence_divided_by_one_minus_leverage() -> None:
    """Ridge, (1/n)Σ ½(x̃ᵢᵀθ − yᵢ)² + (λ/2)‖θ‖² with x̃ = [x, 1]. Removing i (same 1/n and λ):
    Sherman-Morrison gives θ₋ᵢ − θ̂ = −A⁻¹x̃ᵢeᵢ/(1 − hᵢᵢ), A = X̃ᵀX̃ + nλI, eᵢ = yᵢ − x̃ᵢᵀθ̂,
    hᵢᵢ = x̃ᵢᵀA⁻¹x̃ᵢ, i.e. the influence's Newton step divided by 1 − hᵢᵢ. The test loss is
    quadratic, so exactly ΔL_t = ∇ℓ_tᵀΔθ + ½(x̃_tᵀΔθ)² = −I[t, i]/(n(1 − hᵢᵢ)) + ½(x̃_tᵀΔθ)².
    The LOO models are re-solved from scratch by numpy, independently of the identity."""
    rng = np.random.default_rng(0)
    n, d, lam = 40, 5, 0.1
    X = rng.normal(size=(n, d)) * np.linspace(0.5, 2.0, d)
    y = X @ rng.normal(size=d) + 0.5 * rng.normal(size=n)
    Xt = rng.normal(size=(7, d))
    yt = Xt @ rng.normal(size=d)
    Xa, Xta = np.hstack([X, np.ones((n, 1))]), np.hstack([Xt, np.ones((7, 1))])

    def solve(mask: np.ndarray) -> np.ndarray:
        Xm, ym = Xa[mask], y[mask]
        return np.linalg.solve(Xm.T @ Xm / n + lam * np.eye(d + 1), Xm.T @ ym / n)

    thetas: dict[int, np.ndarray] = {}

    def train_fn(mask: Tensor, warm_start: bool) -> Tensor:
        theta = solve(mask.numpy())
        removed = (~mask).nonzero()
        if len(removed):
            thetas[int(removed[0, 0])] = theta
        return torch.from_numpy(0.5 * (Xta @ theta - yt) ** 2)

    loo = leave_one_out(train_fn, range(n), n_train=n)
    theta = solve(np.ones(n, dtype=bool))
    model = nn.Linear(d, 1).double()
    with torch.no_grad():
        model.weight.copy_(torch.from_numpy(theta[:d])[None])
        model.bias.copy_(torch.from_numpy(theta[d:]))
    scores = exact_influence(model, loss_function("mse"), torch.from_numpy(X),
                             torch.from_numpy(y), torch.from_numpy(Xt), torch.from_numpy(yt),
                             lam).numpy()
    leverage = np.einsum("ij,ji->i", Xa, np.linalg.solve(Xa.T @ Xa + n * lam * np.eye(d + 1),
                                                         Xa.T))
    shifts = np.stack([thetas[i] - theta for i in range(n)], axis=1)  # (P, n)
    curvature_term = 0.5 * (Xta @ shifts) ** 2
    np.testing.assert_allclose(loo.delta.numpy() - curvature_term,
                               -scores / (n * (1 - leverage)), rtol=1e-8, atol=1e-13)
    # and first order alone is what the harness's agreement measures: near-perfect here
    agreement = compare_with_loo(torch.from_numpy(scores), loo, n)
    assert agreement.pearson > 0.99 and agreement.mean_per_test_spearman > 0.95


# ---------------------------------------------------------------- logistic regression, real


@dataclass(frozen=True)
class Logistic:
    X: Tensor
    y: Tensor
    X_test: Tensor
    y_test: Tensor
    theta: Tensor  # the full-data optimum, [w, b]
    model: nn.Module
    lam: float

    def newton(self, mask: Tensor, start: Tensor) -> Tensor:
        """Minimise (1/n)Σ_{mask} ℓᵢ + (λ/2)‖θ‖² (n the full size) until the Newton step is
        below 1e-12: quadratic convergence makes that the optimum to rounding."""
        n, d = self.X.shape
        Xa = torch.cat([self.X, torch.ones(n, 1, dtype=D)], dim=1)
        weight = mask.to(D)
        theta = start.clone()
        for _ in range(100):
            p = torch.sigmoid(Xa @ theta)
            gradient = Xa.T @ (weight * (p - self.y)) / n + self.lam * theta
            hessian = ((Xa.T * (weight * p * (1 - p))) @ Xa / n
                       + self.lam * torch.eye(d + 1, dtype=D))
            step = torch.linalg.solve(hessian, gradient)
            theta = theta - step
            if step.norm() < 1e-12:
                return theta
        raise AssertionError("Newton did not converge")

    def test_losses(self, theta: Tensor) -> Tensor:
        d = self.X.shape[1]
        return F.binary_cross_entropy_with_logits(self.X_test @ theta[:d] + theta[d],
                                                  self.y_test, reduction="none")

    def train_fn(self, mask: Tensor, warm_start: bool) -> Tensor:
        start = self.theta if warm_start else torch.zeros_like(self.theta)
        return self.test_losses(self.newton(mask, start))


@functools.cache
def logistic() -> Logistic:
    """The shared problem (influence_support.logistic: d = 10, n = 300, 50 test points,
    λ = 1e-2, anisotropic features, so the curvature differs from the identity that gradient-dot
    assumes) with the Newton retrainer leave-one-out needs."""
    base = influence_support.logistic()
    theta = torch.cat([base.model.weight.detach()[0], base.model.bias.detach()])
    return Logistic(base.X, base.y, base.X_test, base.y_test, theta, base.model, base.damping)


BCE = loss_function("binary_cross_entropy")


def test_influence_predicts_leave_one_out_on_logistic_regression() -> None:
    """Exact influence (the Hessian = GGN of a linear model, damping = the L2 coefficient) vs
    retraining without each of the 300 examples to convergence, 50 test points (15 000 pairs).
    Measured: Pearson 0.9994, Spearman 0.9996, per-test Pearson 0.9989, slope 1.076 (the
    leverage factor 1/(1 − hᵢᵢ) ≥ 1 of ridge, roughly); grad-dot 0.82, random 0.00.
    The claim (notes/science.md §5) is Pearson ≥ 0.95."""
    p = logistic()
    n = len(p.X)
    loo = leave_one_out(p.train_fn, range(n), n_train=n, warm_start=True)
    scores = exact_influence(p.model, BCE, p.X, p.y, p.X_test, p.y_test, p.lam)
    agreement = compare_with_loo(scores, loo, n)
    assert agreement.pearson >= 0.95
    assert agreement.spearman >= 0.95 and agreement.mean_per_test_pearson >= 0.95
    assert 1.0 <= agreement.slope <= 1.2
    baseline = compare_with_loo(gradient_dot(p.model, BCE, p.X, p.y, p.X_test, p.y_test),
                                loo, n)
    assert baseline.pearson < agreement.pearson
    assert abs(compare_with_loo(random_scores(scores.shape), loo, n).pearson) < 0.05
    # strictly convex: from scratch reaches the same optimum as the warm start
    scratch = leave_one_out(p.train_fn, range(0, n, 30), n_train=n, warm_start=False)
    torch.testing.assert_close(scratch.delta, loo.delta[:, ::30], rtol=1e-7, atol=1e-11)


def test_lds_of_influence_gradient_dot_and_random_on_logistic_regression() -> None:
    """M = 30 subsets of half the data, retrained from scratch, test loss measured. Measured
    LDS: exact influence 0.959, grad-dot 0.746, random −0.013. Random scores have LDS 0 in
    expectation with standard error ≈ 1/√((M − 1)·50) = 0.026: |LDS| ≤ 0.1 is ~4 sd."""
    p = logistic()
    subsets = random_subsets(len(p.X), 30, alpha=0.5, seed=0)
    measured = datamodel_measurements(p.train_fn, subsets)
    assert measured.shape == (30, 50)
    scores = exact_influence(p.model, BCE, p.X, p.y, p.X_test, p.y_test, p.lam)
    lds = linear_datamodeling_score(scores, subsets, measured)
    assert lds.lds >= 0.8 and lds.num_undefined == 0
    dot = linear_datamodeling_score(gradient_dot(p.model, BCE, p.X, p.y, p.X_test, p.y_test),
                                    subsets, measured)
    assert dot.lds < lds.lds
    chance = linear_datamodeling_score(random_scores(scores.shape, seed=5), subsets, measured)
    assert abs(chance.lds) <= 0.1
    # the measured margin (higher = better) flips the sign of the prediction, not the score
    margins = -measured
    assert linear_datamodeling_score(scores, subsets, margins, measure="margin").lds == \
        pytest.approx(lds.lds, rel=1e-12)
