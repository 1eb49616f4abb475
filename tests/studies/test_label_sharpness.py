"""The label_sharpness study: its settings' checks, the claims' statistics on hand-made runs,
and tiny runs end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from genlab.data.draws import draw_settings, run_draw_id
from genlab.io import dumps_json
from genlab.studies.label_sharpness.claims import (
    diagnosis,
    loss_exponent,
    seed_statistics,
    summarize,
)
from genlab.studies.label_sharpness.experiment import SPEC
from genlab.studies.label_sharpness.figures import figures, tables
from genlab.studies.label_sharpness.settings import LabelSharpnessConfig, SharpnessRun, run_id

CPU = torch.device("cpu")
RULES = {"loss_exponent_falls_with_dim": "< 0", "robustness_falls_with_sharpness": "< 0",
         "robustness_falls_with_sharpness_at_fixed_dim": "< 0",
         "repr_dim_within_data_dim": "<= 0", "repr_dim_within_latent_dim": "<= 0"}


def config(runs: dict, **changes) -> LabelSharpnessConfig:
    return LabelSharpnessConfig.model_validate({
        "data": {"seed": 0, "waves": {"ambient_dim": 8, "n_train": 120, "n_test": 60},
                 "digits": {"test_fraction": 0.3}},
        "model": {"hidden": [8]}, "recipe": {"lr": 0.01, "batch_size": 16, "max_steps": 30,
                                             "eval_every": 10},
        "train_sizes": [60, 120], "attack": {"epsilon": 0.05, "also": [0.1], "steps": 3},
        "claims": RULES, "runs": runs, **changes})


def waves(d: int, w: float, seed: int) -> dict:
    return {"task": "waves", "intrinsic_dim": d, "frequency": w, "seed": seed}


def test_run_ids_and_checks_name_the_key_at_fault() -> None:
    assert run_id(SharpnessRun(**waves(2, 0.5, 1))) == "waves-d2-w0_5-s1"
    assert run_id(SharpnessRun(task="digits", pair="4v9", seed=0)) == "digits-4v9-s0"
    with pytest.raises(ValidationError, match="a waves run needs intrinsic_dim and frequency"):
        SharpnessRun(task="waves", intrinsic_dim=2, seed=0)
    with pytest.raises(ValidationError, match="a digits run needs pair"):
        SharpnessRun(task="digits", intrinsic_dim=2, pair="0v1", seed=0)
    with pytest.raises(ValidationError, match="pair: needs two different classes"):
        SharpnessRun(task="digits", pair="3v3", seed=0)
    with pytest.raises(ValidationError, match="runs.mnist1d-0v1-s0.task: data.mnist1d is not"):
        config({"mnist1d-0v1-s0": {"task": "mnist1d", "pair": "0v1", "seed": 0}})
    with pytest.raises(ValidationError, match="intrinsic_dim: exceeds data.waves.ambient_dim"):
        config({"waves-d9-w1-s0": waves(9, 1, 0)})
    with pytest.raises(ValidationError, match="train_sizes: the largest exceeds"):
        config({"waves-d2-w1-s0": waves(2, 1, 0)}, train_sizes=[60, 500])
    with pytest.raises(ValidationError, match="train_sizes: must be increasing"):
        config({"waves-d2-w1-s0": waves(2, 1, 0)}, train_sizes=[120, 60])


def test_loss_exponent_is_the_log_log_slope() -> None:
    models = [{"n_train": n, "test_loss": 3.0 * n ** -0.5} for n in (100, 400, 1600)]
    assert loss_exponent(models) == pytest.approx(0.5, rel=1e-12)
    assert loss_exponent(models[:1]) is None
    assert loss_exponent([*models, {"n_train": 3200, "test_loss": float("nan")}]) is None


def model(n: int, loss: float, sharp: float, robust: float, d_data: float,
          d_repr: float) -> dict:
    return {"n_train": n, "test_loss": loss, "label_sharpness": sharp,
            "robust_acc": {"0.05": robust}, "d_data": d_data, "d_repr": d_repr}


def test_seed_statistics_follow_their_definitions() -> None:
    cfg = config({"waves-d2-w1-s0": waves(2, 1, 0)})
    metrics = {}
    # exponents 1/d exactly; K_F high at d = 2; robust accuracy lower at the higher frequency
    for d in (2, 4, 8):
        for w, robust in ((1, 0.9), (4, 0.6)):
            sharp = 10.0 / d + w
            metrics[f"waves-d{d}-w{w}-s0"] = {
                "task": "waves", "seed": 0, "status": "trained", "dataset": f"waves-d{d}-w{w}",
                "intrinsic_dim": d, "models": [
                    model(n, n ** (-1.0 / d), sharp, robust - 0.01 * d, d - 0.3, d - 0.1)
                    for n in (100, 1000)]}
    metrics["digits-0v1-s0"] = {"task": "digits", "seed": 0, "status": "trained",
                                "dataset": "digits-0v1", "intrinsic_dim": None,
                                "models": [model(250, 0.1, 0.3, 1.0, 8.0, 8.5)]}
    stats = seed_statistics(cfg, metrics)
    assert stats["alpha"][0]["waves-d4-w1"] == pytest.approx(0.25)
    assert stats["loss_exponent_falls_with_dim"][0] == pytest.approx(-1.0)
    # within each d the sharper (w = 4) dataset is the less robust: -1 at every d
    assert stats["robustness_falls_with_sharpness_at_fixed_dim"][0] == pytest.approx(-1.0)
    assert stats["tolerance"][0] == pytest.approx(0.3)
    # digits: d_repr - d_data = 0.5, minus the estimator's error 0.3
    assert stats["repr_dim_within_data_dim"][0] == pytest.approx(0.2)
    # waves: d_repr - d = -0.1 at every model, minus 0.3
    assert stats["repr_dim_within_latent_dim"][0] == pytest.approx(-0.4)
    metrics["waves-d8-w4-s0"]["status"] = "diverged"  # left out of every statistic
    assert "waves-d8-w4" not in seed_statistics(cfg, metrics)["alpha"][0]


def every_run() -> dict:
    runs = {f"waves-d{d}-w{w}-s{s}": waves(d, w, s) for d in (2, 4) for w in (1, 4)
            for s in (0, 1)}
    runs |= {f"digits-0v1-s{s}": {"task": "digits", "pair": "0v1", "seed": s} for s in (0, 1)}
    return runs


def test_tiny_runs_end_to_end() -> None:
    cfg = config(every_run())
    results = {}
    for name in cfg.runs:
        draw = draw_settings(cfg, run_draw_id(cfg, name))
        dataset = SPEC.synthesize(draw)
        # inputs at a root-mean-square entry of 1, binary labels
        assert np.sqrt(np.mean(dataset.train.x.astype(np.float64) ** 2)) == pytest.approx(1.0)
        assert set(np.unique(dataset.train.y)) == {0, 1}
        results[name] = SPEC.train_run(draw, name, dataset, CPU)
    waves_run = results["waves-d2-w1-s0"].metrics
    assert [m["n_train"] for m in waves_run["models"]] == [60, 120]
    assert set(waves_run["models"][0]["robust_acc"]) == {"0.05", "0.1"}
    for m in waves_run["models"]:
        assert m["robust_acc"]["0.1"] <= m["test_acc"] + 1e-12
    digits_run = results["digits-0v1-s0"].metrics
    assert len(digits_run["models"]) == 1 and digits_run["dataset"] == "digits-0v1"
    again = SPEC.train_run(draw_settings(cfg, run_draw_id(cfg, "waves-d2-w1-s0")),
                           "waves-d2-w1-s0", SPEC.synthesize(draw_settings(
                               cfg, run_draw_id(cfg, "waves-d2-w1-s0"))), CPU)
    assert dumps_json(again.metrics) == dumps_json(waves_run)  # deterministic on a CPU
    metrics_json = {k: json.loads(dumps_json(r.metrics)) for k, r in results.items()}
    summary = summarize(cfg, metrics_json, {k: r.history for k, r in results.items()})
    assert [c.key for c in summary.claims] == list(RULES)
    assert summary.claims[-1].kind == "control"
    assert all(c.status != "not_run" for c in summary.claims[:3])  # two seeds: intervals
    data = json.loads(dumps_json(summary.data))
    assert set(data["datasets"]) == {"waves-d2-w1", "waves-d2-w4", "waves-d4-w1", "waves-d4-w4",
                                     "digits-0v1"}
    assert len(figures(data, summary.table)) == 1
    (_, columns, rows), = tables(data)
    assert "alpha" in columns and rows[0]["seeds"] == 2


def test_the_group_trainer_makes_what_each_run_makes_alone() -> None:
    """Every run of two seeds through train_group (the synthetic models of one N as one
    ensemble, each on its own draw; a real pair alone): each run's metrics, history and
    weights are train_run's, to the bit. At the ci preset's width 16 (and at 64 and 128, measured);
    at width 8 MKL's kernels for the tiny matrices sum in another order in a batch, and the
    weights differ by ~1e-7."""
    assert SPEC.entry.grouped and SPEC.entry.seed_block == 10
    cfg = config(every_run(), model={"hidden": [16]})
    draws = {run_draw_id(cfg, name) for name in cfg.runs}
    built = {d: SPEC.synthesize(draw_settings(cfg, d)) for d in draws}
    datasets = {name: built[run_draw_id(cfg, name)] for name in cfg.runs}
    grouped = SPEC.train_group(cfg, list(cfg.runs), datasets, CPU)
    assert list(grouped) == list(cfg.runs)
    for name, artifacts in grouped.items():
        alone = SPEC.train_run(cfg, name, datasets[name], CPU)
        assert dumps_json(artifacts.metrics) == dumps_json(alone.metrics), name
        assert artifacts.history.equals(alone.history), name
        assert artifacts.weights.keys() == alone.weights.keys(), name
        for key, tensor in alone.weights.items():
            assert torch.equal(tensor, artifacts.weights[key]), (name, key)


def test_a_seeds_pairs_share_one_build_of_their_dataset() -> None:
    cfg = config({"digits-0v1-s0": {"task": "digits", "pair": "0v1", "seed": 0},
                  "digits-4v9-s0": {"task": "digits", "pair": "4v9", "seed": 0}})
    from genlab.studies.label_sharpness import experiment

    experiment._real_data.cache_clear()
    for name in cfg.runs:
        SPEC.synthesize(draw_settings(cfg, run_draw_id(cfg, name)))
    assert experiment._real_data.cache_info().misses == 1


def test_the_diagnosis_counts_the_models_the_budget_stopped() -> None:
    """Issue 38's "why these verdicts": per synthetic dataset, the models that stopped at the
    step budget before fitting, by train size, with their fit and the last interval's rise."""
    import pyarrow as pa

    cfg = config({"waves-d2-w1-s0": waves(2, 1, 0)})  # sizes 60, 120; 30 steps, eval every 10

    def fitted(n: int, loss: float, status: str, train: float) -> dict:
        return {"n_train": n, "test_loss": loss, "status": status, "train_acc": train}
    metrics = {f"waves-d4-w1-s{s}": {
        "task": "waves", "seed": s, "status": "trained", "intrinsic_dim": 4, "frequency": 1.0,
        "models": [fitted(60, 0.4, "fitted", 1.0),
                   fitted(120, 0.2, "budget" if s else "fitted", 0.9 if s else 1.0)]}
        for s in (0, 1)}
    metrics["digits-0v1-s0"] = {"task": "digits", "status": "trained", "models": []}
    history = pa.table({"n_train": [60, 120, 120], "step": [10, 10, 20],
                        "train_acc": [1.0, 0.8, 0.85]})
    cause, line = diagnosis(cfg, metrics, {"waves-d4-w1-s1": history})
    assert cause.startswith("Cause: the setting") and "1 of 2 synthetic models at N = 120" in cause
    assert "0 of 2 at N = 60 stopped at the budget of 30 Adam steps" in cause
    assert line == ("d=4, omega=1 (2 seeds): alpha 1.00; by N 60/120: stopped at the budget "
                    "unfitted 0/1, train accuracy 100/95%, test loss 0.40/0.20; at N = 120 the "
                    "training accuracy moved +5.0 points over the last 10 steps.")
    full = cfg.model_copy(update={"recipe": cfg.recipe.model_copy(update={"max_steps": 3000})})
    assert not diagnosis(full, metrics, {})[0].startswith("Cause")  # not shrunk: numbers only
    assert diagnosis(cfg, {}, {}) == []
