"""The heavy-tailed spectral exponent α (Martin & Mahoney 2021) against weightwatcher's own
analysis, layer by layer, and against power-law samples of known exponent."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from genlab.analyses.measures.heavy_tail import (
    MIN_EIGENVALUES,
    eigenvalues,
    fit_power_law,
    layer_fits,
)
from genlab.analyses.measures.registry import MeasureInputs, compute_measures


def heavy_tailed_mlp() -> nn.Module:
    """An MLP whose middle layer has Student-t entries (a heavy-tailed ESD) beside Gaussian
    layers; its last layer has 10 eigenvalues, too few for the fit."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(40, 100), nn.ReLU(), nn.Linear(100, 64), nn.ReLU(),
                          nn.Linear(64, 10))
    with torch.no_grad():
        shape = model[2].weight.shape
        model[2].weight.copy_(0.1 * torch.distributions.StudentT(2.5).sample(shape))
    return model


def test_equal_to_weightwatcher_layer_by_layer() -> None:
    ww = pytest.importorskip("weightwatcher")
    model = heavy_tailed_mlp()
    frame = ww.WeightWatcher(model=model).analyze()
    theirs = frame[frame["M"] >= MIN_EIGENVALUES]  # M: the layer's number of eigenvalues
    ours = layer_fits(model)
    assert len(ours) == len(theirs) == 2
    for fit, (_, row) in zip(ours, theirs.iterrows(), strict=True):
        # the same float64 arithmetic on the same singular values (up to the SVD's rounding)
        assert fit.alpha == pytest.approx(row["alpha"], rel=1e-9)
        assert fit.alpha_weighted == pytest.approx(row["alpha_weighted"], rel=1e-9)
        assert fit.xmin == pytest.approx(row["xmin"], rel=1e-9)
        assert fit.ks_distance == pytest.approx(row["D"], rel=1e-9)
        assert fit.n_tail == row["num_pl_spikes"]


@pytest.mark.parametrize("alpha", [2.0, 3.0, 4.5])
def test_recovers_the_exponent_of_a_pure_power_law(alpha: float) -> None:
    # p(λ) ∝ λ^(−α) for λ ≥ 1: λ = U^(−1/(α−1)). The MLE's standard error is (α − 1)/√n
    # (≤ 0.05 here); the KS choice of λ_min trims the sample, so allow 5 of them on the n kept.
    n = 4000
    sample = np.random.default_rng(1).random(n) ** (-1 / (alpha - 1))
    fit = fit_power_law(sample)
    assert abs(fit.alpha - alpha) < 5 * (alpha - 1) / math.sqrt(fit.n_tail)
    assert fit.n_tail > n / 4 and fit.ks_distance < 0.05


def test_the_mle_at_the_chosen_tail_is_the_closed_form() -> None:
    sample = np.random.default_rng(2).random(500) ** (-1 / 1.5) * 3.0
    fit = fit_power_law(sample)
    tail = np.sort(sample)[-fit.n_tail:]
    assert tail[0] == fit.xmin
    assert fit.alpha == pytest.approx(1 + len(tail) / np.log(tail / fit.xmin).sum(), rel=1e-12)


def test_eigenvalues_are_squared_singular_values() -> None:
    w = torch.randn(7, 30, dtype=torch.float64)
    expected = np.sort(np.linalg.eigvalsh((w.T @ w).numpy()))[-7:]
    np.testing.assert_allclose(eigenvalues(w), expected, rtol=1e-10)


def test_too_few_eigenvalues_is_refused_and_the_measure_says_why() -> None:
    with pytest.raises(ValueError, match="needs 20"):
        fit_power_law(np.linspace(1, 2, 19))
    small = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    x, y = torch.randn(20, 8), torch.randint(0, 3, (20,))
    values = compute_measures(MeasureInputs(model=small, X_train=x, y_train=y),
                              ["alpha_mean", "alpha_weighted"])
    assert all(math.isnan(v.value) for v in values.values())
    assert "no Linear layer has 20 eigenvalues" in values["alpha_mean"].reason


def test_the_measures_average_the_layers() -> None:
    model = heavy_tailed_mlp()
    fits = layer_fits(model)
    x, y = torch.randn(20, 40), torch.randint(0, 10, (20,))
    values = compute_measures(MeasureInputs(model=model, X_train=x, y_train=y),
                              ["alpha_mean", "alpha_weighted"])
    assert values["alpha_mean"].value == pytest.approx(np.mean([f.alpha for f in fits]))
    assert values["alpha_weighted"].value == pytest.approx(
        np.mean([f.alpha * np.log10(f.lambda_max) for f in fits]))
