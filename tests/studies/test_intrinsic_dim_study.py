"""The intrinsic-dimension study: run naming and settings, each claim check's decisions on
hand-made numbers, and one tiny run of every kind through train_run, summarize and figures."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
import torch
from pydantic import ValidationError
from safetensors.torch import load_file, save_file

from genlab.io import dumps_json
from genlab.studies.intrinsic_dim.claims import (
    check_claims,
    d_int90_ratio,
    hunchback,
    layer_drop,
    median_d_int90,
    power_law_exponent,
    smallest_rise,
    summarize,
    window_miss,
)
from genlab.studies.intrinsic_dim.experiment import SPEC
from genlab.studies.intrinsic_dim.settings import (
    EstimateRun,
    IntrinsicDimClaims,
    IntrinsicDimConfig,
    LayersRun,
    ScalingRun,
    SubspaceRun,
    run_id,
)
from tests_support import assert_group_trains_each_run_as_alone, pipeline_datasets

CPU = torch.device("cpu")


def raw_config(**updates) -> dict:
    """A tiny configuration: every run of it trains in well under a second."""
    adam = {"optimizer": "adam", "lr": 0.01, "batch_size": 50, "eval_every": 50}
    raw = {
        "data": {"task": "classification", "n_classes": 3, "teacher_hidden": [8],
                 "intrinsic_dim": 3, "ambient_dim": 16, "embedding": "tanh", "n_train": 200,
                 "n_test": 150, "seed": 0},
        "estimators": {"dims": [2, 5], "ambient_dim": 20, "n_points": 300, "mle_k": 10},
        "layers": {"model": {"hidden": [32, 16]}, "train": {**adam, "max_steps": 100}},
        "subspace": {"data": {"task": "classification", "n_classes": 3, "teacher_hidden": [8],
                              "input_dim": 4, "n_train": 200, "n_test": 200, "seed": 0},
                     "depth": 1, "dims": [2, 8, 32],
                     "full_train": {**adam, "lr": 0.02, "max_steps": 150,
                                    "stop_at_train_acc": None},
                     "train": {**adam, "lr": 0.02, "max_steps": 60, "eval_every": 60,
                               "stop_at_train_acc": None}},
        "scaling": {"ambient_dim": 8, "teacher_hidden": [8], "sizes": [50, 100], "n_test": 200,
                    "model": {"hidden": [16]}, "train": {**adam, "max_steps": 100}},
        "label_sharpness": {"num_samples": 100},
        "claims": {"twonn": "<= 0", "mle": "<= 0", "layers": "> 0", "hunchback": "> 0",
                   "subspace": "<= 2.5", "scaling": "> 0"},
        "runs": {"estimate-linear-s0": {"kind": "estimate", "embedding": "linear", "seed": 0},
                 "layers-clean-s0": {"kind": "layers", "labels": "clean", "seed": 0},
                 "layers-random-s0": {"kind": "layers", "labels": "random", "seed": 0},
                 "subspace-w4-s0": {"kind": "subspace", "width": 4, "seed": 0},
                 "subspace-w32-s0": {"kind": "subspace", "width": 32, "seed": 0},
                 "scaling-d1-s0": {"kind": "scaling", "d_data": 1, "seed": 0},
                 "scaling-d3-s0": {"kind": "scaling", "d_data": 3, "seed": 0}},
    }
    raw.update(updates)
    return raw


def config(**updates) -> IntrinsicDimConfig:
    return IntrinsicDimConfig.model_validate(raw_config(**updates))


# ------------------------------------------------------------------------- settings and names


def test_registered_when_the_registry_lists_it() -> None:
    from genlab.studies import STUDIES, load_study

    assert load_study("intrinsic_dim") is SPEC
    assert load_study("intrinsic_dim").entry is STUDIES["intrinsic_dim"]
    assert SPEC.run_id is run_id and SPEC.config is IntrinsicDimConfig
    assert SPEC.entry.grouped and SPEC.entry.seed_block == 2 and SPEC.train_group is not None


def test_importing_the_study_does_not_import_torch() -> None:
    # the settings (params validation, dag planning) and the claims (the aggregate stage):
    # only the experiment, which trains, imports torch
    code = ("import sys, genlab.studies.intrinsic_dim.settings, "
            "genlab.studies.intrinsic_dim.claims; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(("run", "expected"), [
    (EstimateRun(kind="estimate", embedding="linear", seed=0), "estimate-linear-s0"),
    (EstimateRun(kind="estimate", embedding="tanh", seed=3), "estimate-tanh-s3"),
    (LayersRun(kind="layers", labels="clean", seed=0), "layers-clean-s0"),
    (LayersRun(kind="layers", labels="random", seed=12), "layers-random-s12"),
    (SubspaceRun(kind="subspace", width=128, seed=1), "subspace-w128-s1"),
    (ScalingRun(kind="scaling", d_data=4, seed=2), "scaling-d4-s2")])
def test_run_ids(run, expected: str) -> None:
    assert run_id(run) == expected


def test_the_run_kind_selects_the_settings() -> None:
    runs = config().runs
    assert isinstance(runs["estimate-linear-s0"], EstimateRun)
    assert isinstance(runs["layers-random-s0"], LayersRun)
    assert isinstance(runs["subspace-w4-s0"], SubspaceRun)
    assert isinstance(runs["scaling-d3-s0"], ScalingRun)


@pytest.mark.parametrize(("runs", "match"), [
    ({"layers-s0": {"kind": "layers", "labels": "clean", "seed": 0}},
     "runs.layers-s0: .*expected 'layers-clean-s0'"),
    ({"scaling-d4-s0": {"kind": "scaling", "d_data": 2, "seed": 0}},
     "expected 'scaling-d2-s0'"),
    ({"subspace-w8-s0": {"kind": "subspace", "width": 8, "seed": 0, "lr": 0.1}},
     "Extra inputs are not permitted"),
    ({"x-s0": {"kind": "bogus", "seed": 0}}, "does not match any of the expected tags"),
    ({"scaling-d9-s0": {"kind": "scaling", "d_data": 9, "seed": 0}},
     "d_data 9 exceeds scaling.ambient_dim 8"),
    ({"Bad-Id": {"kind": "layers", "labels": "clean", "seed": 0}}, "should match pattern"),
])
def test_bad_runs_are_rejected_with_a_clear_message(runs: dict, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        config(runs=runs)


def test_settings_are_validated() -> None:
    raw = raw_config()
    with pytest.raises(ValidationError, match="strictly increasing"):
        config(estimators={**raw["estimators"], "dims": [5, 2]})
    with pytest.raises(ValidationError, match="exceed ambient_dim"):
        config(estimators={**raw["estimators"], "dims": [2, 50]})
    with pytest.raises(ValidationError, match="strictly increasing"):
        config(scaling={**raw["scaling"], "sizes": [100, 100]})
    with pytest.raises(ValidationError, match="task must be 'classification'"):
        config(data={**raw["data"], "task": "regression", "n_classes": None})
    with pytest.raises(ValidationError, match="task must be 'classification'"):
        config(subspace={**raw["subspace"], "data": {**raw["subspace"]["data"],
                                                     "task": "regression", "n_classes": None}})
    with pytest.raises(ValidationError, match="Extra inputs"):
        config(unknown=1)


# --------------------------------------------------------------------------- claim decisions


RULES = {"twonn": "<= 0", "mle": "<= 0", "layers": "> 0", "hunchback": "> 0",
         "subspace": "<= 2.5", "scaling": "> 0"}


def test_window_miss_is_the_worst_estimate_in_units_of_d() -> None:
    good = {"linear": {2: 2.1, 5: 4.6, 10: 9.1, 20: 14.5}, "tanh": {2: 1.9, 20: 20.9}}
    assert window_miss(good) < 0  # every estimate inside its window
    # 13.9 < 0.7 * 20: a miss of 0.1 / 20 on one embedding is the seed's statistic
    assert window_miss({**good, "tanh": {20: 13.9}}) == pytest.approx(0.1 / 20)
    assert window_miss({"linear": {10: 11.1}}) == pytest.approx(0.1 / 10)
    assert window_miss({"linear": {15: 15.0}}) is None  # nothing claimed at d = 15


@pytest.mark.parametrize(("init", "true", "random", "drop"), [
    (6.0, 3.3, 4.0, 0.7), (6.0, 6.5, 7.0, -0.5), (6.0, 4.5, 4.0, -0.5), (6.0, 4.0, 4.0, 0.0),
    (6.0, 3.3, None, None)])
def test_layer_drop(init, true, random, drop) -> None:
    assert layer_drop(init, true, random) == (None if drop is None else pytest.approx(drop))


def test_hunchback_rises_then_falls() -> None:
    assert hunchback([6.0, 9.0, 11.0, 8.0, 5.0, 2.0]) == pytest.approx(11.0 - 6.0)
    assert hunchback([6.0, 5.0, 4.0, 3.0, 2.0]) == pytest.approx(5.0 - 6.0)  # only falls
    assert hunchback([6.0, 7.0, 8.0, 9.0, 2.0]) == pytest.approx(8.0 - 9.0)  # only rises
    assert hunchback([6.0, 7.0, 2.0]) is None  # one hidden layer: no shape to see


def test_d_int90_ratio_and_smallest_rise() -> None:
    assert d_int90_ratio(320, 160) == d_int90_ratio(160, 320) == 2.0
    assert d_int90_ratio(320, None) is None
    rising = {2: {250: 0.02, 1000: 0.01}, 4: {250: 0.05, 1000: 0.03}, 8: {250: 0.2, 1000: 0.1}}
    assert smallest_rise(rising) == pytest.approx(0.02)
    assert smallest_rise({**rising, 4: {250: 0.05, 1000: 0.005}}) == pytest.approx(-0.005)
    assert smallest_rise({2: rising[2]}) is None


def _units(seeds: int, **per_seed) -> tuple[dict, dict]:
    """Metrics and histories of ``seeds`` seeds of every kind, from per-seed numbers."""
    metrics, histories = {}, {}
    for s in range(seeds):
        j = 0.05 * s
        est = f"estimate-linear-s{s}"
        metrics[est] = {"kind": "estimate", "embedding": "linear", "seed": s}
        histories[est] = pa.table({"estimator": ["twonn", "mle"], "d": [5, 5],
                                   "estimate": [per_seed["estimate"] + j] * 2})
        for labels, last in (("clean", per_seed["true"]), ("random", per_seed["random"])):
            metrics[f"layers-{labels}-s{s}"] = {
                "kind": "layers", "labels": labels, "seed": s, "last_hidden_id_init": 6.0,
                "last_hidden_id": last + j, "id_trained": per_seed["profile"]}
        for width, params, d in ((32, 1765, per_seed["d_narrow"]), (128, 19333, 320)):
            metrics[f"subspace-w{width}-s{s}"] = {"kind": "subspace", "width": width,
                                                  "seed": s, "n_parameters": params,
                                                  "d_int90": d}
        for d, err in ((2, 0.02), (4, per_seed["err4"])):
            metrics[f"scaling-d{d}-s{s}"] = {"kind": "scaling", "seed": s, "d_data_true": d,
                                             "test_err_by_n": {"250": err + j / 10}}
    return metrics, histories


def test_every_claim_is_judged_over_seeds_each_way() -> None:
    rules = IntrinsicDimClaims(**RULES)
    good = _units(3, estimate=5.0, true=3.0, random=5.0, profile=[6.0, 9.0, 8.0, 3.0, 2.0],
                  d_narrow=226, err4=0.05)
    claims = check_claims(*good, rules)
    assert [c.key for c in claims] == ["twonn", "mle", "layers", "hunchback", "subspace",
                                       "scaling"]
    assert [c.status for c in claims] == ["reproduced"] * 6
    assert all(c.effect["n"] == 3 for c in claims)
    bad = _units(3, estimate=7.0, true=7.0, random=5.0, profile=[6.0, 5.0, 4.0, 3.0, 2.0],
                 d_narrow=40, err4=0.01)
    assert [c.status for c in check_claims(*bad, rules)] == ["not_reproduced"] * 6
    one = _units(1, estimate=5.0, true=3.0, random=5.0, profile=[6.0, 9.0, 8.0, 3.0, 2.0],
                 d_narrow=226, err4=0.05)
    assert [c.status for c in check_claims(*one, rules)] == ["not_run"] * 6


def test_median_d_int90_counts_unreached_as_infinite() -> None:
    assert median_d_int90([320]) == 320 and isinstance(median_d_int90([320]), int)
    assert median_d_int90([160, 320, None]) == 320
    assert median_d_int90([160, 320]) == 240
    assert median_d_int90([320, None]) is None
    assert median_d_int90([]) is None


def test_power_law_exponent() -> None:
    sizes = [250, 1000, 4000]
    assert power_law_exponent(sizes, [3.0 * n ** -0.5 for n in sizes], 1e-9) \
        == pytest.approx(-0.5)
    assert power_law_exponent([250], [0.1], 1e-3) is None
    # zero errors are floored, not dropped: log(0) would be -inf
    assert math.isfinite(power_law_exponent(sizes, [0.1, 0.0, 0.0], 1e-3))


def test_summary_without_runs_of_a_kind_leaves_its_claims_not_run() -> None:
    cfg = config()
    metrics = {"layers-clean-s0": {"kind": "layers", "labels": "clean", "seed": 0,
                                  "status": "fitted", "layers": ["input", "hidden1", "output"],
                                  "widths": [16, 8, 3], "id_init": [3.0, 3.5, 2.0],
                                  "id_trained": [3.0, 2.0, 1.5], "last_hidden_id_init": 3.5,
                                  "last_hidden_id": 2.0, "final_train_acc": 1.0,
                                  "final_test_acc": 0.9, "label_sharpness": {"value": 1.0},
                                  "d_data": {"true": 3, "twonn": 3.1, "mle": 2.9}}}
    histories = {"layers-clean-s0": pa.table({"step": [0, 10], "train_acc": [0.3, 1.0]})}
    summary = summarize(cfg, metrics, histories)
    assert [c.status for c in summary.claims] == ["not_run"] * 6
    assert summary.data["data"]["d_data"]["twonn"] == 3.1
    assert summary.table.num_rows == 2


# ------------------------------------------------------------------------- representations


def test_the_twonn_profile_follows_the_mlp_layers_and_counts_distinct_points() -> None:
    from genlab.analyses.dimension.estimators import TwoNN
    from genlab.analyses.dimension.representations import layer_representations, twonn_profile
    from genlab.models.registry import build_seeded_model
    from genlab.settings import MLPSettings

    model = build_seeded_model("mlp", MLPSettings(hidden=(12, 7), activation="relu"), 5, 3, 0)
    x = torch.randn(40, 5, generator=torch.Generator().manual_seed(0))
    x[1] = x[0]  # a duplicate in every representation
    model.train()
    rows = twonn_profile(model, x, 0.1)
    assert model.training  # flags restored
    assert [r["layer"] for r in rows] == ["input", "hidden 1", "hidden 2", "output"]
    assert [r["width"] for r in rows] == [5, 12, 7, 3]
    for row, (_, h) in zip(rows, layer_representations(model, x), strict=True):
        fit = TwoNN(0.1, duplicates="drop").fit(h)
        assert row["id"] == fit.dimension_
        assert row["n_distinct"] == len(h) - fit.n_duplicates_ < 40


# ----------------------------------------------------------------------- tiny runs end to end


@pytest.fixture(scope="module")
def tiny() -> tuple[IntrinsicDimConfig, dict]:
    torch.set_num_threads(1)
    cfg = config()
    dataset = SPEC.synthesize(cfg)
    return cfg, {name: SPEC.train_run(cfg, name, dataset, CPU) for name in cfg.runs}


def test_dataset_records_the_true_dimension() -> None:
    dataset = SPEC.synthesize(config())
    assert dataset.info["intrinsic_dim"] == 3 and dataset.info["ambient_dim"] == 16
    assert dataset.train.x.shape == (200, 16) and dataset.n_classes == 3


def test_every_kind_of_run_end_to_end(tiny, tmp_path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from genlab.models.registry import load_model
    from genlab.studies.intrinsic_dim.figures import figures as study_figures

    cfg, results = tiny
    for name, result in results.items():
        assert result.metrics["status"] in {"done", "fitted", "budget"}, name
        dumps_json(result.metrics)  # JSON-able
        save_file(result.weights, str(tmp_path / f"{name}.safetensors"))  # CPU tensors
        assert isinstance(result.history, pa.Table) and result.history.num_rows > 0

    estimate = results["estimate-linear-s0"]
    assert estimate.weights == {}
    assert load_file(str(tmp_path / "estimate-linear-s0.safetensors")) == {}
    assert set(estimate.history.column("d").to_pylist()) == {2, 5}
    assert set(estimate.history.column("estimator").to_pylist()) == {
        "twonn", "mle", "mle_mean", "mle_pope"}

    true, random = results["layers-clean-s0"].metrics, results["layers-random-s0"].metrics
    assert true["layers"] == ["input", "hidden 1", "hidden 2", "output"]
    assert true["id_init"] == random["id_init"]  # same seed, same initialisation
    assert true["id_init"][0] == true["id_trained"][0]  # the input layer does not train
    assert true["last_hidden_id"] == true["id_trained"][-2]
    assert true["fraction_replaced"] == 0.0 and random["fraction_replaced"] == 1.0
    assert true["d_data"]["true"] == 3 and 1.5 < true["d_data"]["twonn"] < 4.5
    sharp = true["label_sharpness"]
    assert sharp["num_samples"] == 100 and sharp["resolution_features"] == 16
    assert random["label_sharpness"]["value"] >= 0
    model = load_model(results["layers-clean-s0"].model_spec,
                       tmp_path / "layers-clean-s0.safetensors")
    assert sum(p.numel() for p in model.parameters()) == 16 * 32 + 32 + 32 * 16 + 16 + 16 * 3 + 3

    sub = results["subspace-w4-s0"]
    assert sub.metrics["n_parameters"] == 4 * 4 + 4 + 4 * 3 + 3  # 35: d = 32 fits, not beyond
    assert sub.history.column("d").to_pylist() == [2, 8, 32]
    assert sub.weights["z.d8"].shape == (8,) and "full.net.0.weight" in sub.weights
    assert set(sub.metrics["test_acc_by_d"]) == {"2", "8", "32"}

    scale = results["scaling-d3-s0"]
    assert scale.history.column("n_train").to_pylist() == [50, 100]
    assert "n100.net.0.weight" in scale.weights
    assert scale.metrics["d_data"]["true"] == 3 and scale.metrics["d_data"]["n_points"] == 100

    metrics = {n: json.loads(dumps_json(r.metrics)) for n, r in results.items()}
    summary = summarize(cfg, metrics, {n: r.history for n, r in results.items()})
    # every part has its runs, so every claim has its seed's statistic; one seed gives no
    # interval, so none is decided
    assert len(summary.claims) == 6 and all(c.status == "not_run" for c in summary.claims)
    measured = {c.key: c.numbers["by_seed"]["0"] for c in summary.claims}
    assert all(v is not None for k, v in measured.items() if k != "subspace"), measured
    assert set(summary.table.column("kind").to_pylist()) == {"estimate", "layers", "subspace",
                                                            "scaling"}
    data = json.loads(dumps_json(summary.data))  # as the report reads it back
    figures = study_figures(data, summary.table)
    assert len(figures) == 4 and all(isinstance(caption, str) for caption, _ in figures)
    layers_axes = figures[1][1].axes[0]
    assert len([ln for ln in layers_axes.get_lines() if len(ln.get_xdata()) == 4]) == 3


def test_a_run_is_deterministic(tiny) -> None:
    cfg, results = tiny
    dataset = SPEC.synthesize(cfg)
    for name in ("layers-random-s0", "subspace-w4-s0"):
        again = SPEC.train_run(cfg, name, dataset, CPU)
        first = results[name]
        assert dumps_json(again.metrics) == dumps_json(first.metrics)
        assert again.history.equals(first.history)
        assert again.weights.keys() == first.weights.keys()
        assert all(torch.equal(again.weights[k], first.weights[k]) for k in first.weights)


def test_scaling_sets_are_nested_prefixes_of_one_draw() -> None:
    from genlab.data.manifolds import manifold
    from genlab.studies.intrinsic_dim.experiment import scaling_data_settings

    cfg = config()
    data = manifold(scaling_data_settings(cfg, cfg.runs["scaling-d3-s0"]))
    assert data.train.x.shape == (100, 8) and data.test.x.shape == (200, 8)
    assert np.array_equal(data.train.x, manifold(scaling_data_settings(
        cfg, cfg.runs["scaling-d3-s0"])).train.x)


# ------------------------------------------------------------- the post-hoc analyses' objective


def test_the_analyses_objective_is_the_layers_runs_training_loss(tiny, tmp_path) -> None:
    """A layers run's model, as the analyze stage loads it, on the objective: its loss is the
    train loss of the run's last history row (the same float32 forward pass, summed then
    divided by n there, a mean here: a few ulps apart, rel 1e-6), on the labels it was trained
    on (all replaced for random labels: the clean ones would give another loss), and the
    sharpness record runs on it. The other kinds have no objective, and the stage's reason says
    why."""
    import importlib

    from genlab.analyses.registry import ANALYSES
    from genlab.analyses.settings import SharpnessSettings
    from genlab.io import write_safetensors
    from genlab.models.registry import load_model
    from genlab.stages.analyze import no_model_reason

    cfg, results = tiny
    dataset = SPEC.synthesize(cfg)
    module, _, function = ANALYSES["sharpness"].record.partition(":")
    sharpness_record = getattr(importlib.import_module(module), function)
    losses = {}
    for name in ("layers-clean-s0", "layers-random-s0"):
        result = results[name]
        objective = SPEC.objective(cfg, name, dataset, CPU)
        assert (objective.lr, objective.momentum, objective.batch_size,
                objective.weight_decay) == (0.01, 0.0, 50, 0.0)
        weights = tmp_path / f"{name}.safetensors"
        spec = {**result.model_spec, "weights_sha256": write_safetensors(weights, result.weights)}
        model = load_model(spec, weights).to(CPU)
        with torch.no_grad():
            losses[name] = objective.loss_fn(model(objective.X), objective.y).item()
        assert losses[name] == pytest.approx(result.history.column("train_loss")[-1].as_py(),
                                             rel=1e-6)
        record, _ = sharpness_record(model, objective, SharpnessSettings(
            max_iter=10, trace_num_matvecs=6, density_num_repeats=1, density_num_steps=5),
            lambda: None)
        assert record["status"] == "done" and math.isfinite(record["lambda_max"])
    clean = SPEC.objective(cfg, "layers-clean-s0", dataset, CPU).y
    random = SPEC.objective(cfg, "layers-random-s0", dataset, CPU).y
    assert torch.equal(clean, torch.from_numpy(dataset.train.y))
    assert float((random != clean).double().mean()) > 0.5  # uniform over 3 classes: ~2/3
    for name in ("estimate-linear-s0", "subspace-w4-s0", "scaling-d3-s0"):
        assert SPEC.objective(cfg, name, dataset, CPU) is None, name
    assert no_model_reason(results["estimate-linear-s0"].model_spec) == \
        "estimator run: no model is trained"
    assert "'mlp_subspace'" in no_model_reason(results["subspace-w4-s0"].model_spec)
    assert "'mlp_per_size'" in no_model_reason(results["scaling-d3-s0"].model_spec)


def test_the_group_trainer_gives_each_run_what_train_run_gives_it() -> None:
    """Two seeds' runs through train_group (their layers runs as one ensemble of four, each on
    its seed's draw, as the pipeline gives them) equal, file for file, each run trained alone by
    train_run."""
    runs = {**raw_config()["runs"],
            "layers-clean-s1": {"kind": "layers", "labels": "clean", "seed": 1},
            "layers-random-s1": {"kind": "layers", "labels": "random", "seed": 1}}
    cfg = config(runs=runs)
    datasets = pipeline_datasets(SPEC, cfg)
    assert not np.array_equal(datasets["layers-clean-s0"].train.x,
                              datasets["layers-clean-s1"].train.x)
    assert datasets["layers-clean-s0"] is datasets["layers-random-s0"]
    assert_group_trains_each_run_as_alone(SPEC, cfg, datasets)
