"""The deep-double-descent study on MNIST-1D: settings, the claims' statistics, and a tiny
end-to-end run."""

from __future__ import annotations

import json

import pytest
import torch
from pydantic import ValidationError

from genlab.io import dumps_json
from genlab.studies.deep_double_descent.claims import (
    check_claims,
    cross_fitted_rise,
    seed_statistics,
    summarize,
    threshold_width,
)
from genlab.studies.deep_double_descent.experiment import SPEC, train_settings
from genlab.studies.deep_double_descent.figures import figures
from genlab.studies.deep_double_descent.settings import (
    DeepDoubleDescentConfig,
    DoubleDescentClaims,
    DoubleDescentRun,
    run_id,
)

RULES = {"threshold_peak": "> 0", "second_descent": "> 0"}


def config(runs: dict, **changes) -> DeepDoubleDescentConfig:
    return DeepDoubleDescentConfig(**{
        "data": {"num_samples": 400, "train_split": 0.25, "seed": 0},
        "label_noise": 0.15,
        "recipe": {"lr": 0.01, "batch_size": 25, "steps": 300, "eval_every": 100},
        "claims": RULES, "runs": runs, **changes})


def runs(widths=(4, 32), seeds=(0,), model="mlp") -> dict[str, DoubleDescentRun]:
    out = {}
    for width in widths:
        for seed in seeds:
            run = DoubleDescentRun(model=model, width=width, seed=seed)
            out[run_id(run)] = run
    return out


def test_registered_and_run_ids() -> None:
    from genlab.studies import STUDIES, load_study

    assert load_study("deep_double_descent") is SPEC
    assert SPEC.entry is STUDIES["deep_double_descent"]
    assert list(runs((4, 32), (0, 1))) == ["mlp-w4-s0", "mlp-w4-s1", "mlp-w32-s0",
                                           "mlp-w32-s1"]


@pytest.mark.parametrize("bad", [{"model": "gru"}, {"width": 0}, {"width": True},
                                 {"seed": -1}])
def test_invalid_runs_are_rejected(bad: dict) -> None:
    with pytest.raises(ValidationError):
        DoubleDescentRun(**{"model": "mlp", "width": 8, "seed": 0, **bad})


def test_invalid_blocks_are_rejected() -> None:
    with pytest.raises(ValidationError, match="label_noise"):
        config(runs(), label_noise=1.5)
    with pytest.raises(ValidationError, match="kernel_sizes"):
        config(runs(), models={"cnn": {"kernel_sizes": [0, 3]}})
    with pytest.raises(ValidationError, match="fit_error"):
        config(runs(), fit_error=1.0)


def test_families_give_every_layer_the_width() -> None:
    cfg = config(runs())
    assert cfg.models.mlp.settings(7).hidden == (7, 7)
    cnn = cfg.models.cnn.settings(5)
    assert cnn.channels == (5, 5, 5) and cnn.kernel_sizes == (5, 3, 3) and cnn.stride == 2


def point(width: int, train: float, halves: tuple[float, float], seed: int = 0,
          status: str = "budget", model: str = "mlp") -> dict:
    return {"model": model, "width": width, "seed": seed, "status": status,
            "final_train_err": train, "final_test_err": sum(halves) / 2,
            "test_err_halves": list(halves)}


def curve(seed: int = 0, shift: float = 0.0) -> dict[str, dict]:
    """A double-descent curve: the minimum at width 16, the threshold (the first width with
    training error <= 0.01) at 48 with the peak, and a second descent to 256."""
    spec = [(8, 0.50, (0.55, 0.55)), (16, 0.40, (0.46, 0.48)), (32, 0.20, (0.52, 0.52)),
            (48, 0.005, (0.56, 0.54)), (128, 0.0, (0.50, 0.50)), (256, 0.0, (0.46, 0.47))]
    return {f"mlp-w{w}-s{seed}": point(w, train, (a + shift, b + shift), seed)
            for w, train, (a, b) in spec}


def by_width(metrics: dict) -> dict[int, dict]:
    return {m["width"]: m for m in metrics.values()}


def test_threshold_is_the_narrowest_width_that_fits() -> None:
    assert threshold_width(by_width(curve()), 0.01) == 48
    assert threshold_width(by_width(curve()), 0.2) == 32
    assert threshold_width(by_width(curve()), 0.0) == 128
    assert threshold_width(by_width({k: v for k, v in curve().items() if v["width"] < 48}),
                           0.01) is None


def test_the_rise_is_cross_fitted_between_the_test_halves() -> None:
    points = by_width(curve())
    # half 0 picks width 16 (0.46), measured on half 1: 0.54 - 0.48; half 1 picks 16 (0.48),
    # measured on half 0: 0.56 - 0.46
    assert cross_fitted_rise(points, 48) == pytest.approx(100 * (0.06 + 0.10) / 2)
    # each half picks its own minimum: the other half's value, not the minimum, is subtracted
    points[8] = point(8, 0.5, (0.40, 0.60))
    assert cross_fitted_rise(points, 48) == pytest.approx(100 * ((0.54 - 0.60)
                                                                 + (0.56 - 0.46)) / 2)
    assert cross_fitted_rise(points, 8) is None  # nothing narrower


def test_claims_from_per_seed_statistics() -> None:
    metrics = {**curve(0), **curve(1, 0.01), **curve(2, -0.01)}
    stats = seed_statistics(metrics, "mlp", 0.01)
    assert stats["threshold"] == {0: 48, 1: 48, 2: 48}
    assert stats["second_descent"][0] == pytest.approx(100 * (0.55 - 0.465))
    claims = check_claims(metrics, DoubleDescentClaims(**RULES), 0.01)
    assert [(c.key, c.condition, c.status) for c in claims] == [
        ("threshold_peak", "mlp", "reproduced"), ("second_descent", "mlp", "reproduced")]
    assert claims[0].numbers["threshold_width_by_seed"] == {"0": 48, "1": 48, "2": 48}
    # a monotone curve: the threshold is the best width and the widest no better
    for seed in range(3):
        for w, (train, err) in {8: (0.5, 0.6), 16: (0.3, 0.5), 48: (0.0, 0.4 + 0.01 * seed),
                                256: (0.0, 0.45)}.items():
            metrics[f"mlp-w{w}-s{seed}"] = point(w, train, (err, err), seed)
        for w in (32, 128):
            del metrics[f"mlp-w{w}-s{seed}"]
    assert [c.status for c in check_claims(metrics, DoubleDescentClaims(**RULES), 0.01)] == [
        "not_reproduced"] * 2


def test_a_diverged_run_or_no_fit_leaves_the_seed_undefined() -> None:
    metrics = {**curve(0), **curve(1)}
    metrics["mlp-w32-s0"]["status"] = "diverged"
    for m in curve(1).values():  # seed 1 never fits
        metrics[f"mlp-w{m['width']}-s1"]["final_train_err"] = 0.3
    stats = seed_statistics(metrics, "mlp", 0.01)
    assert stats["threshold"] == {0: None, 1: None}
    assert stats["threshold_peak"] == {0: None, 1: None}
    claims = check_claims(metrics, DoubleDescentClaims(**RULES), 0.01)
    assert {c.status for c in claims} == {"not_run"}
    assert claims[0].numbers["diverged"] == ["mlp-w32-s0"]
    # the threshold at the widest width: no second descent to measure
    only = {k: v for k, v in curve(2).items() if v["width"] <= 48}
    assert seed_statistics(only, "mlp", 0.01)["second_descent"] == {2: None}


def test_every_width_trains_the_whole_budget_past_interpolation() -> None:
    """The notebook's protocol: a fixed number of steps for every width, so a wide network that
    fits its (noisy) training labels early keeps training, as the claims assume."""
    cfg = config(runs(seeds=(0,)))
    assert train_settings(cfg.recipe).stop_at_train_acc is None
    assert train_settings(cfg.recipe).stop_at_train_loss is None
    wide = cfg.model_copy(update={"recipe": cfg.recipe.model_copy(update={"steps": 400}),
                                  "runs": {"mlp-w256-s0": DoubleDescentRun(model="mlp",
                                                                           width=256, seed=0)}})
    m = SPEC.train_run(wide, "mlp-w256-s0", SPEC.synthesize(wide), torch.device("cpu")).metrics
    assert m["final_train_err"] == 0.0 and m["steps"] == 400, m  # fitted, and kept training


def test_tiny_run_end_to_end() -> None:
    cfg = config(runs(seeds=(0, 1)))
    dataset = SPEC.synthesize(cfg)
    assert dataset.train.x.shape == (100, 40) and dataset.test.x.shape == (300, 40)
    cpu = torch.device("cpu")
    metrics = {}
    for name in cfg.runs:
        artifacts = SPEC.train_run(cfg, name, dataset, cpu)
        m = json.loads(dumps_json(artifacts.metrics))
        metrics[name] = m
        history = artifacts.history.to_pylist()
        assert history[-1]["step"] == m["steps"] == 300
        assert m["status"] == "budget"  # a fixed budget, no stop at interpolation
        # the test error the claims use is the loop's own final evaluation's
        assert m["final_test_err"] == pytest.approx(1 - history[-1]["test_acc"], abs=1e-12)
        assert sum(m["test_err_halves"]) / 2 == pytest.approx(m["final_test_err"])
        assert 0.05 < m["fraction_replaced"] < 0.3  # label_noise 0.15 of 100 labels
        assert m["fraction_wrong"] <= m["fraction_replaced"]
    summary = summarize(cfg, metrics, {})
    assert summary.table.num_rows == 4
    assert [(c.key, c.condition) for c in summary.claims] == [("threshold_peak", "mlp"),
                                                              ("second_descent", "mlp")]
    (caption, fig), = figures(json.loads(dumps_json(summary.data)), summary.table)
    assert "interpolation threshold" in caption and fig.axes
