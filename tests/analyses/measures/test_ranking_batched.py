"""ranking_statistics and bootstrap_ranking: every measure's τ, Ψ and CMI score at once, equal to
the one-measure functions (themselves checked against scipy and hand counts in test_measures)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from genlab.analyses.measures.ranking import (
    bootstrap_ranking,
    conditional_mutual_information,
    granulated_kendall,
    kendall_tau,
    ranking_statistics,
)


def grid(seed: int) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """A 3 x 2 x 2 grid with 2 replicates (24 models), a gap with ties, and measures with ties,
    NaNs, one constant and one wholly undefined."""
    rng = np.random.default_rng(seed)
    points = list(itertools.product([1, 2, 3], [0.01, 0.1], [32, 128], [0, 1]))
    hp = {name: np.array([p[i] for p in points]) for i, name in enumerate(
        ("depth", "lr", "batch_size", "replicate")) if name != "replicate"}
    gap = rng.integers(0, 8, len(points)) / 100
    slopes = np.array([[3.0], [0.0], [1.0], [0.0], [0.0], [0.0]])
    measures = rng.normal(size=(6, len(points))) + slopes * gap
    measures[1] = np.round(measures[1])  # ties
    measures[2, [0, 5, 7]] = np.nan
    measures[3] = 1.0  # constant: τ undefined
    measures[4] = np.nan  # undefined everywhere
    measures[5] = -gap  # perfectly anti-ordered
    return measures, gap, hp


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equal_to_the_one_measure_functions(seed: int) -> None:
    measures, gap, hp = grid(seed)
    stats = ranking_statistics(measures, gap, hp)
    for row, values in enumerate(measures):
        want = (kendall_tau(values, gap), granulated_kendall(values, gap, hp).psi,
                conditional_mutual_information(values, gap, hp).score)
        got = (stats.tau[row], stats.psi[row], stats.cmi[row])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True,
                                   err_msg=f"measure {row}")
    assert stats.tau[5] == pytest.approx(-1.0) and math.isnan(stats.tau[3])
    assert np.isnan([stats.tau[4], stats.psi[4], stats.cmi[4]]).all()


def test_measures_in_chunks_give_the_same_numbers(monkeypatch) -> None:
    from genlab.analyses.measures import ranking

    measures, gap, hp = grid(1)
    whole = ranking_statistics(measures, gap, hp)
    monkeypatch.setattr(ranking, "PAIR_BUDGET", 2 * len(gap) * (len(gap) - 1))  # 2 at a time
    chunked = ranking_statistics(measures, gap, hp)
    for key in ("tau", "psi", "cmi"):
        np.testing.assert_array_equal(getattr(chunked, key), getattr(whole, key))


def test_without_hyperparameters_only_tau_is_defined() -> None:
    measures, gap, _ = grid(0)
    stats = ranking_statistics(measures, gap, {})
    assert np.isnan(stats.psi).all() and np.isnan(stats.cmi).all()
    assert stats.tau[0] == pytest.approx(kendall_tau(measures[0], gap))


def test_a_gap_with_nan_is_refused() -> None:
    measures, gap, hp = grid(0)
    gap[0] = np.nan
    with pytest.raises(ValueError, match="gap"):
        ranking_statistics(measures, gap, hp)


def test_bootstrap_intervals_are_seeded_ordered_and_narrow_with_more_models() -> None:
    measures, gap, hp = grid(0)
    first = bootstrap_ranking(measures, gap, hp, resamples=60, seed=3)
    again = bootstrap_ranking(measures, gap, hp, resamples=60, seed=3)
    for key in ("tau", "psi", "cmi"):
        np.testing.assert_array_equal(first[key], again[key])
        bounds = first[key][~np.isnan(first[key]).any(axis=1)]
        assert (bounds[:, 0] <= bounds[:, 1]).all()
        assert np.isnan(first[key][4]).all()  # undefined in every resample
    # a measure that is the gap reversed has τ = −1 in every resample
    assert first["tau"][5] == pytest.approx([-1.0, -1.0])
    # each model 8 times over: the same τ, from a bootstrap over 8x the models, narrower
    wide = first["tau"][0, 1] - first["tau"][0, 0]
    narrow = bootstrap_ranking(np.tile(measures[:1], 8), np.tile(gap, 8), {}, resamples=60,
                               seed=3)["tau"][0]
    assert narrow[1] - narrow[0] < wide / 2
