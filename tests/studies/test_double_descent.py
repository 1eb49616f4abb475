"""The double-descent study: its claim check's decisions and one real tiny sweep."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from genlab.studies import load_study
from genlab.studies.double_descent.claims import check_claims, summarize
from genlab.studies.double_descent.settings import DoubleDescentClaims, DoubleDescentConfig

N = 40


def curve(peak_at: int, peak: float, floor: float = 1.0) -> dict[int, float]:
    return {p: (peak if p == peak_at else floor) for p in (5, 10, 20, 36, 40, 44, 80, 160, 320)}


RULES = DoubleDescentClaims(peak_location="within [0.9, 1.1]", peak_height="> 1")


def seeds(*curves: dict[int, float]) -> dict[int, dict[int, float]]:
    return dict(enumerate(curves))


def status(claims, key: str) -> str:
    (match,) = [c for c in claims if c.key == key]
    return match.status


def test_a_tall_peak_at_n_in_every_seed_is_reproduced() -> None:
    claims = check_claims(seeds(curve(40, 50.0), curve(40, 40.0), curve(40, 60.0)), N, RULES)
    assert status(claims, "peak_location") == "reproduced"  # 1.0 in every seed
    assert status(claims, "peak_height") == "reproduced"  # log10 50, 40, 60 > 1
    (height,) = [c for c in claims if c.key == "peak_height"]
    assert height.numbers["by_seed"]["0"] == pytest.approx(np.log10(50.0))
    assert height.effect["n"] == 3


@pytest.mark.parametrize(("peak_at", "peak", "key"), [(80, 50.0, "peak_location"),
                                                      (40, 5.0, "peak_height")])
def test_off_window_or_short_peaks_are_not_reproduced(peak_at: int, peak: float,
                                                      key: str) -> None:
    # 80 = 2N is outside [0.9N, 1.1N]; 5x is not > 10x
    claims = check_claims(seeds(*[curve(peak_at, peak)] * 3), N, RULES)
    assert status(claims, key) == "not_reproduced"


def test_seeds_that_disagree_are_inconclusive() -> None:
    claims = check_claims(seeds(curve(40, 50.0), curve(40, 3.0), curve(44, 200.0)), N, RULES)
    assert status(claims, "peak_height") == "inconclusive"
    # 1.0, 1.0, 1.1: three seeds' t interval [0.89, 1.18] leaves the window
    assert status(claims, "peak_location") == "inconclusive"


def test_missing_reference_widths_mean_not_run() -> None:
    mse = curve(40, 50.0)
    del mse[320]
    claims = check_claims(seeds(mse, mse, mse), N, RULES)
    assert status(claims, "peak_height") == "not_run"
    assert status(claims, "peak_location") == "reproduced"


def config(**updates) -> DoubleDescentConfig:
    raw = {
        "data": {"task": "regression", "teacher_hidden": [], "target_noise_std": 0.5,
                 "input_dim": 10, "n_train": N, "n_test": 400, "seed": 0},
        "features": {"widths": [5, 10, 20, 40, 80, 160, 320]},
        "early_stopping": {"n_val": 100, "max_steps": 10_000, "n_checkpoints": 20},
        "claims": {"peak_location": "within [0.9, 1.1]", "peak_height": "> 1"},
        "runs": {"s0": {"seed": 0}, "s1": {"seed": 1}},
    }
    raw.update(updates)
    return DoubleDescentConfig.model_validate(raw)


def test_settings_are_validated() -> None:
    with pytest.raises(ValidationError, match="strictly increasing"):
        config(features={"widths": [10, 5]})
    with pytest.raises(ValidationError, match="regression"):
        config(data={"task": "classification", "n_classes": 2, "teacher_hidden": [],
                     "input_dim": 3, "n_train": 5, "n_test": 5, "seed": 0})


def test_a_tiny_sweep_end_to_end() -> None:
    spec, cfg = load_study("double_descent"), config()
    dataset = spec.synthesize(cfg)
    metrics, histories = {}, {}
    for run in cfg.runs:
        result = spec.train_run(cfg, run, dataset, torch.device("cpu"))
        metrics[run], histories[run] = result.metrics, result.history
        rows = result.history.to_pylist()
        assert [r["n_features"] for r in rows] == list(cfg.features.widths)
        for r in rows:  # at and past the threshold the minimum-norm fit interpolates
            if r["n_features"] >= N:
                assert r["train_mse"] < 1e-12 * max(1.0, r["theta_norm"] ** 2)
        # nested features: the saved W has max(P) rows; one θ per P
        assert result.weights["feature_weights"].shape == (320, 10)
        assert result.weights["theta_p40"].shape == (40,)
    summary = summarize(cfg, metrics, histories)
    assert [c.key for c in summary.claims] == ["peak_location", "peak_height"]
    assert all(c.effect["n"] == 2 for c in summary.claims)
    mean = summary.data["mean_test_mse_by_n_features"]
    assert mean["40"] == pytest.approx(np.mean([metrics[r]["test_mse_by_n_features"]["40"]
                                                for r in cfg.runs]))


def test_figure_draws_the_mean_curve_in_order_of_p() -> None:
    """summary.json stores P as text keys, which JSON sorts as text ("160" < "20")."""
    import json

    import matplotlib

    from genlab.io import dumps_json
    from genlab.studies.double_descent.figures import figures

    matplotlib.use("Agg")
    spec, cfg = load_study("double_descent"), config(runs={"s0": {"seed": 0}})
    dataset = spec.synthesize(cfg)
    result = spec.train_run(cfg, "s0", dataset, torch.device("cpu"))
    summary = summarize(cfg, {"s0": result.metrics}, {"s0": result.history})
    data = json.loads(dumps_json(summary.data))  # as the report reads it back
    ((_, fig),) = figures(data, summary.table)
    for line in fig.axes[0].get_lines():
        x = list(line.get_xdata())
        if len(x) > 2:
            assert x == sorted(x), line.get_label()
