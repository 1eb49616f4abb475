"""The measures-grid study: run naming and validation, the ranking against scipy, each claim
check's decision, and a tiny grid trained end to end (grouped and alone, identically)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pyarrow as pa
import pytest
import torch
from pydantic import ValidationError
from scipy.stats import kendalltau

from genlab.analyses.measures.ranking import granulated_kendall
from genlab.analyses.measures.registry import MEASURES
from genlab.io import dumps_json
from genlab.studies.measures_grid.claims import (
    HYPERPARAMETERS,
    JIANG_MEASURES,
    NORM_BASED,
    TEACHER_CAUSE,
    check_claims,
    measure_value,
    seed_statistics,
    summarize,
)
from genlab.studies.measures_grid.experiment import SPEC, ensemble_groups
from genlab.studies.measures_grid.figures import figures, tables
from genlab.studies.measures_grid.settings import (
    GridAxes,
    MeasuresGridClaims,
    MeasuresGridConfig,
    MeasuresGridRun,
    run_id,
)

TEACHER = {"task": "classification", "n_classes": 3, "teacher_hidden": [8], "input_dim": 5,
           "n_train": 60, "n_test": 100}
DATA = {"seed": 1, "teacher": TEACHER}
TEACHER_RECIPE = {"activation": "relu", "momentum": 0.9, "max_steps": 600, "eval_every": 20,
                  "stop_at_train_acc": 1.0}
RECIPE = {"teacher": TEACHER_RECIPE}
RULES_BLOCK = {"flatness_top": "<= 1", "flatness_top_cmi": "<= 1", "spectral_negative": "< 0",
               "norm_below_flatness": "> 0"}
CHEAP = {"sigma_samples": 2, "sigma_depth": 4, "alpha_steps": 2, "alpha_depth": 3,
         "lanczos_max_iter": 4, "trace_num_matvecs": 6, "id_max_examples": 60,
         "jacobian_max_points": 16}


def config(runs: dict[str, MeasuresGridRun], **changes) -> MeasuresGridConfig:
    return MeasuresGridConfig(**{"data": DATA, "recipe": RECIPE, "measures": CHEAP,
                                 "claims": RULES_BLOCK, "ranking_resamples": 20, "grid": {},
                                 "runs": runs, **changes})


def grid_runs(task: str, depth: list[int], width: list[int], lr: list[float],
              batch_size: list[int], weight_decay: list[float], seed: list[int]) -> dict:
    return GridAxes(depth=depth, width=width, lr=lr, batch_size=batch_size,
                    weight_decay=weight_decay, seed=seed).runs(task)


def one_run_config() -> MeasuresGridConfig:
    """A valid config for summaries of synthetic metrics (only the rules and tasks matter)."""
    return config(grid_runs("teacher", [1], [8], [0.1], [20], [0.0], [0]))


def task_data(cfg: MeasuresGridConfig, task: str = "teacher"):
    """The data of ``task`` with the data block's own seed (the synthesize stage sets the task
    of each draw, with the draw's seed)."""
    return SPEC.synthesize(cfg.model_copy(update={"data": type(cfg.data).model_validate(
        {**cfg.data.model_dump(), "task": task})}))


def test_spec_uses_the_module_functions() -> None:
    assert SPEC.run_id is run_id and SPEC.config is MeasuresGridConfig
    assert SPEC.train_group is not None
    assert set(JIANG_MEASURES) <= set(MEASURES)


def test_registered() -> None:
    from genlab.studies import STUDIES, load_study

    assert load_study("measures_grid") is SPEC
    assert load_study("measures_grid").entry is STUDIES["measures_grid"]
    assert STUDIES["measures_grid"].grouped


@pytest.mark.parametrize(("values", "expected"), [
    (("teacher", 2, 64, 0.05, 32, 0.0, 0), "teacher-d2-w64-lr0_05-b32-wd0-s0"),
    (("teacher", 1, 32, 0.01, 128, 5e-4, 3), "teacher-d1-w32-lr0_01-b128-wd0_0005-s3"),
    (("mnist1d", 3, 128, 0.032, 64, 1e-4, 0), "mnist1d-d3-w128-lr0_032-b64-wd0_0001-s0"),
    (("mnist1d", 1, 8, 1.0, 1, 1e-05, 12), "mnist1d-d1-w8-lr1-b1-wd1e-05-s12")])
def test_run_ids(values: tuple, expected: str) -> None:
    run = MeasuresGridRun(**dict(zip(("task", "depth", "width", "lr", "batch_size",
                                      "weight_decay", "seed"), values, strict=True)))
    assert run_id(run) == expected


def test_grid_runs_is_the_full_product_keyed_by_run_id() -> None:
    runs = grid_runs("teacher", [1, 2], [16, 32], [0.01, 0.1], [32], [0.0, 5e-4], [0, 1])
    assert len(runs) == 2 * 2 * 2 * 1 * 2 * 2
    assert all(run_id(run) == name for name, run in runs.items())
    assert list(runs)[:2] == ["teacher-d1-w16-lr0_01-b32-wd0-s0",
                              "teacher-d1-w16-lr0_01-b32-wd0-s1"]
    config(runs)  # a valid runs block


AXES = {"depth": [1], "width": [16], "lr": [0.01, 0.1], "batch_size": [32],
        "weight_decay": [0.0], "seed": [0, 1]}


def test_the_grid_becomes_runs_with_the_listed_ones_after_it() -> None:
    extra = grid_runs("teacher", [2], [8], [0.5], [16], [0.0], [3])
    cfg = config(extra, grid={"teacher": AXES})
    assert list(cfg.runs) == [*grid_runs("teacher", **AXES), *extra]
    assert cfg.grid["teacher"].lr == (0.01, 0.1)
    # validated again from its own dump (as stages and sidecars do): the same runs
    again = MeasuresGridConfig.model_validate(cfg.model_dump())
    assert again.runs == cfg.runs and list(again.runs) == list(cfg.runs)
    # a listed run the grid also makes is the same run, listed once, in the grid's place
    grid = grid_runs("teacher", **AXES)
    listed_too = config(dict(list(grid.items())[-1:]), grid={"teacher": AXES})
    assert list(listed_too.runs) == list(grid) and listed_too.runs == grid


def test_grid_errors_name_the_key() -> None:
    clash = {"teacher-d1-w16-lr0_01-b32-wd0-s0": MeasuresGridRun(
        task="teacher", depth=2, width=16, lr=0.01, batch_size=32, weight_decay=0.0, seed=0)}
    with pytest.raises(ValidationError, match="grid has a different run of that name"):
        config(clash, grid={"teacher": AXES})
    with pytest.raises(ValidationError, match="no runs"):
        config({}, grid={})
    with pytest.raises(ValidationError, match="lr: a level is listed twice"):
        config({}, grid={"teacher": {**AXES, "lr": [0.1, 0.1]}})
    with pytest.raises(ValidationError, match="need data.mnist1d"):
        config({}, grid={"mnist1d": AXES})
    with pytest.raises(ValidationError) as error:
        config({}, grid={"teacher": {**AXES, "lr": [0.1, -1.0]}})
    assert error.value.errors()[0]["loc"] == ("grid", "teacher", "lr", 1)


def test_ensemble_groups_share_architecture_and_batch_size() -> None:
    runs = grid_runs("teacher", [1, 2], [16], [0.01, 0.1], [32, 64], [0.0], [0])
    groups = ensemble_groups(runs)
    assert sorted(groups) == [("teacher", 1, 16, 32), ("teacher", 1, 16, 64),
                              ("teacher", 2, 16, 32), ("teacher", 2, 16, 64)]
    assert groups[("teacher", 2, 16, 64)] == ["teacher-d2-w16-lr0_01-b64-wd0-s0",
                                              "teacher-d2-w16-lr0_1-b64-wd0-s0"]
    # seeds train together (each on its own draw); tasks, whose inputs differ, apart
    both = {**grid_runs("teacher", [1], [16], [0.1], [32], [0.0], [0, 1]),
            **grid_runs("mnist1d", [1], [16], [0.1], [32], [0.0], [0])}
    assert ensemble_groups(both) == {
        ("teacher", 1, 16, 32): ["teacher-d1-w16-lr0_1-b32-wd0-s0",
                                 "teacher-d1-w16-lr0_1-b32-wd0-s1"],
        ("mnist1d", 1, 16, 32): ["mnist1d-d1-w16-lr0_1-b32-wd0-s0"]}


@pytest.mark.parametrize(("field", "value", "match"), [
    ("data", {**DATA, "teacher": {**TEACHER, "task": "regression", "n_classes": None}},
     "teacher: the measures rank classifiers"),
    ("data", {**DATA, "teacher": {**TEACHER, "random_inputs": True}}, "random_inputs false"),
    ("data", {**DATA, "teacher": {**TEACHER, "seed": 3}}, "data.teacher.seed"),
    ("data", {**DATA, "mnist1d": {"num_samples": 1001}}, "mnist1d: num_samples .1001. must "
     "be a multiple of 10"),
    ("data", {"seed": 1, "mnist1d": {"num_samples": 1000}}, "runs of task 'teacher' need "
     "data.teacher"),
    ("recipe", {"mnist1d": TEACHER_RECIPE}, "runs of task 'teacher' need recipe.teacher"),
    ("recipe", {"teacher": {**TEACHER_RECIPE, "stop_at_train_acc": 0.0}}, "stop_at_train_acc"),
    ("recipe", {"teacher": {**TEACHER_RECIPE, "stop_at_train_acc": None}},
     "set stop_at_train_acc or stop_at_train_loss"),
    ("recipe", {"teacher": {**TEACHER_RECIPE, "momentum": 1.0}}, "momentum"),
    ("measures", {**CHEAP, "sigma_loss": "hinge"}, "sigma_loss"),
    ("measures", {**CHEAP, "no_such_knob": 1}, "no_such_knob"),
])
def test_invalid_blocks_are_rejected(field: str, value: dict, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        one_run_config().model_validate({**one_run_config().model_dump(), field: value})


@pytest.mark.parametrize("bad", [{"task": "cifar10"}, {"depth": 0}, {"width": 0}, {"lr": 0.0},
                                 {"batch_size": 0}, {"weight_decay": -1.0}, {"seed": -1},
                                 {"depth": True}])
def test_invalid_runs_are_rejected(bad: dict) -> None:
    fields = {"task": "teacher", "depth": 1, "width": 8, "lr": 0.1, "batch_size": 20,
              "weight_decay": 0.0, "seed": 0}
    with pytest.raises(ValidationError):
        MeasuresGridRun(**{**fields, **bad})


def test_measure_values_read_back_from_json() -> None:
    stored = json.loads(dumps_json({"a": math.nan, "b": math.inf, "c": -math.inf, "d": 2.5}))
    assert math.isnan(measure_value(stored["a"]))
    assert measure_value(stored["b"]) == math.inf and measure_value(stored["c"]) == -math.inf
    assert measure_value(stored["d"]) == 2.5


# ------------------------------------------------------------------------- ranking (synthetic)


def synthetic_metrics(seed: int = 0) -> dict[str, dict]:
    """A 2⁴ grid (depth, lr, batch size, weight decay; one width) of fake runs: a gap, and
    measures with ties, an inf and a NaN; the last run did not fit."""
    rng = np.random.default_rng(seed)
    metrics = {}
    points = list(itertools.product([1, 2], [0.01, 0.1], [32, 128], [0.0, 5e-4]))
    for i, (depth, lr, batch, wd) in enumerate(points):
        run = MeasuresGridRun(task="teacher", depth=depth, width=16, lr=lr, batch_size=batch,
                              weight_decay=wd, seed=0)
        gap = float(rng.integers(0, 6)) / 100  # ties in the gap
        measures = {"prod_of_spec": float(rng.normal()) + 3 * gap,
                    "param_norm": float(rng.integers(0, 4)),  # ties in the measure
                    "pacbayes_flatness": math.inf if i == 3 else float(rng.normal()),
                    "pacbayes_mag_flatness": math.nan if i == 5 else float(rng.normal()),
                    "layer_rotation": float(rng.normal())}
        fitted = i != len(points) - 1
        metrics[run_id(run)] = json.loads(dumps_json({
            **run.model_dump(), "status": "fitted" if fitted else "budget", "included": fitted,
            "gap": gap, "measures": measures}))
    return metrics


def included_columns(metrics: dict[str, dict], measure: str) -> tuple[np.ndarray, np.ndarray]:
    runs = [m for _, m in sorted(metrics.items()) if m["included"]]
    return (np.array([measure_value(m["measures"][measure]) for m in runs]),
            np.array([m["gap"] for m in runs]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tau_equals_scipy_kendalltau(seed: int) -> None:
    metrics = synthetic_metrics(seed)
    summary = summarize(one_run_config(), metrics, {})
    rows = {r["measure"]: r for r in summary.table.to_pylist()}
    for name in ("prod_of_spec", "param_norm", "pacbayes_flatness", "pacbayes_mag_flatness",
                 "layer_rotation"):
        values, gap = included_columns(metrics, name)
        expected = kendalltau(values, gap, nan_policy="omit").statistic
        assert rows[name]["tau"] == pytest.approx(expected, abs=1e-12), name
        assert rows[name]["n_models"] == int(np.count_nonzero(~np.isnan(values)))


def test_psi_and_cmi_over_the_varied_hyperparameters() -> None:
    metrics = synthetic_metrics()
    summary = summarize(one_run_config(), metrics, {})
    assert summary.data["tasks"] == ["teacher"]
    data = summary.data["conditions"]["teacher"]
    assert data["n_runs"] == 16 and data["n_included"] == 15
    assert data["excluded_by_status"] == {"budget": 1}
    assert data["hyperparameters_varied"] == ["depth", "lr", "batch_size", "weight_decay"]
    rows = {r["measure"]: r for r in summary.table.to_pylist()}
    runs = [m for _, m in sorted(metrics.items()) if m["included"]]
    values, gap = included_columns(metrics, "prod_of_spec")
    expected = granulated_kendall(values, gap, {h: [m[h] for m in runs]
                                                for h in data["hyperparameters_varied"]})
    row = rows["prod_of_spec"]
    assert row["psi"] == pytest.approx(expected.psi)
    assert math.isnan(row["psi_width"])  # one width: not a hyperparameter of this grid
    for h in data["hyperparameters_varied"]:
        assert row[f"psi_{h}"] == pytest.approx(expected.per_hyperparameter[h])
    for r in rows.values():
        assert -1 <= r["tau"] <= 1 and -1 <= r["psi"] <= 1 and 0 <= r["cmi"] <= 1
    assert rows["layer_rotation"]["sign"] == -1
    assert rows["layer_rotation"]["oriented_psi"] == pytest.approx(-rows["layer_rotation"]["psi"])
    psis = [r["oriented_psi"] for r in summary.table.to_pylist()]
    assert psis == sorted(psis, reverse=True)
    assert set(summary.table.column_names) >= {"measure", "tau", "psi", "cmi", "n_models",
                                               *(f"psi_{h}" for h in HYPERPARAMETERS)}
    assert len(summary.claims) == 4 and {c.condition for c in summary.claims} == {"teacher"}
    stored = json.loads(dumps_json(summary.data))
    assert len(figures(stored, summary.table)) == 2  # the ranking bars, the top measures' scatter
    ((caption, columns, table_rows),) = tables(stored)
    assert "15 models" in caption and "20 resamples" in caption
    assert len(table_rows) == len(rows) and {"τ [95%]", "Ψ [95%]", "CMI [95%]"} <= set(columns)
    for r in rows.values():  # every defined statistic has its bootstrap interval
        for key in ("tau", "psi", "cmi"):
            if not math.isnan(r[key]):
                assert r[f"{key}_lo"] <= r[f"{key}_hi"], (r["measure"], key)


def test_a_grid_where_nothing_fitted_summarizes_to_not_run() -> None:
    metrics = {name: {**m, "status": "diverged", "included": False}
               for name, m in synthetic_metrics().items()}
    summary = summarize(one_run_config(), metrics, {})
    data = summary.data["conditions"]["teacher"]
    assert data["n_included"] == 0 and data["excluded_by_status"] == {"diverged": 16}
    assert data["hyperparameters_varied"] == [] and data["gap"] is None
    assert {c.status for c in summary.claims} == {"not_run"}
    assert figures(json.loads(dumps_json(summary.data)), summary.table) == []


# -------------------------------------------------------------------------------- claim checks


def rows(psi: dict[str, float], tau: dict[str, float] | None = None,
         cmi: dict[str, float] | None = None) -> list[dict]:
    """Ranking rows; the CMI score in Ψ's order unless given."""
    tau, cmi = tau or {}, cmi or {}
    return [{"measure": m, "psi": v, "oriented_psi": v, "tau": tau.get(m, 0.0),
             "cmi": cmi.get(m, max(v, 0.0) / 10 if not math.isnan(v) else math.nan),
             "n_models": 10} for m, v in psi.items()]


def status(claims, key_words: str) -> str:
    (match,) = [c for c in claims if key_words in c.claim]
    return match.status


OTHERS = {m: 0.1 * i for i, m in enumerate(
    [m for m in JIANG_MEASURES if m not in ("pacbayes_flatness", "pacbayes_mag_flatness",
                                            "prod_of_spec")])}  # 22 measures, Ψ 0 … 2.1


RULES = MeasuresGridClaims(**RULES_BLOCK)


def judged(psi: dict[str, float], tau: dict[str, float] | None = None, n_included: int = 30,
           seeds: int = 3, cmi: dict[str, float] | None = None):
    """The claims over ``seeds`` seeds whose rankings are these rows, τ a little apart."""
    per_seed = {}
    for seed in range(seeds):
        shifted = {k: v - 0.01 * seed for k, v in (tau or {}).items()}
        per_seed[seed] = seed_statistics(rows(psi, shifted, cmi), n_included)
    return check_claims(per_seed, RULES, "teacher")


def test_claims_reproduced_on_the_papers_outcome() -> None:
    claims = judged({**OTHERS, "pacbayes_mag_flatness": 5.0, "pacbayes_flatness": 4.0,
                     "prod_of_spec": -0.3}, {"prod_of_spec": -0.4})
    assert [c.status for c in claims] == ["reproduced"] * 4
    assert {c.condition for c in claims} == {"teacher"}
    (flat, flat_cmi, spec, norms) = claims
    detail = flat.numbers["by_seed_detail"]["0"]
    assert detail["flatness_measure"] == "pacbayes_mag_flatness"
    assert detail["flatness_rank"] == 1 and detail["n_ranked"] == 25
    assert flat.numbers["by_seed"]["0"] == pytest.approx(1 / 9)  # rank 1 of cutoff ⌈25/3⌉
    assert flat_cmi.numbers["by_seed"]["0"] == pytest.approx(1 / 9)
    assert spec.effect["n"] == 3
    # the 16 norm-based measures: 15 of OTHERS' Ψ and prod_of_spec's −0.3
    norm_psi = [v for m, v in OTHERS.items() if m in NORM_BASED] + [-0.3]
    assert len(norm_psi) == len(NORM_BASED)
    assert norms.numbers["by_seed"]["0"] == pytest.approx(4.0 - float(np.median(norm_psi)))


def test_each_claim_can_fail() -> None:
    # the flatness measures rank 10th and below among 25, prod_of_spec has τ > 0, and
    # pacbayes_flatness's Ψ of 0 is below the median norm-based measure's
    claims = judged({**OTHERS, "pacbayes_mag_flatness": 1.25, "pacbayes_flatness": 0.0,
                     "prod_of_spec": 0.5}, {"prod_of_spec": 0.2})
    assert status(claims, "Sharpness") == "not_reproduced"
    assert status(claims, "conditional-mutual-information") == "not_reproduced"
    assert status(claims, "spectral") == "not_reproduced"
    assert status(claims, "Norm-based") == "not_reproduced"


def test_cmi_ranks_apart_from_psi() -> None:
    # the flatness measures last by Ψ but first by the CMI score (which has no sign)
    psi = {**OTHERS, "pacbayes_mag_flatness": -0.5, "pacbayes_flatness": -0.4,
           "prod_of_spec": -0.3}
    cmi = {m: 0.01 for m in psi} | {"pacbayes_flatness": 0.3}
    claims = judged(psi, {"prod_of_spec": -0.4}, cmi=cmi)
    assert status(claims, "Sharpness") == "not_reproduced"
    assert status(claims, "conditional-mutual-information") == "reproduced"


def test_a_negative_psi_fails_even_at_the_top() -> None:
    negative = {m: -1.0 for m in OTHERS}
    claims = judged({**negative, "pacbayes_mag_flatness": -0.1, "prod_of_spec": -1.0})
    assert status(claims, "Sharpness") == "not_reproduced"


def test_measures_outside_the_paper_do_not_push_flatness_down() -> None:
    extra = {f"nc{i}": 10.0 for i in range(30)}  # not among Jiang et al.'s measures
    claims = judged({**OTHERS, **extra, "pacbayes_mag_flatness": 5.0, "prod_of_spec": -0.3},
                    {"prod_of_spec": -0.4})
    assert status(claims, "Sharpness") == "reproduced"


def test_too_few_models_one_seed_or_missing_measures_are_not_run() -> None:
    assert {c.status for c in judged(OTHERS, n_included=3)} == {"not_run"}
    assert {c.status for c in judged({**OTHERS, "pacbayes_mag_flatness": 5.0,
                                      "prod_of_spec": -0.3}, {"prod_of_spec": -0.4},
                                     seeds=1)} == {"not_run"}
    claims = judged({**OTHERS, "pacbayes_flatness": math.nan, "prod_of_spec": 0.1},
                    {"prod_of_spec": math.nan})
    assert status(claims, "Sharpness") == "not_run"
    assert status(claims, "conditional-mutual-information") == "not_run"
    assert status(claims, "spectral") == "not_run"
    assert status(claims, "Norm-based") == "not_run"


# ------------------------------------------------------------------------------ end to end


def same(a: object, b: object) -> bool:
    """Equality with NaN equal to NaN, through nested dicts."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def test_tiny_grid_end_to_end() -> None:
    # two ensembles (batch 20 and 30); lr 1e-4 cannot fit within 600 steps: excluded
    runs = {**grid_runs("teacher", [1], [16], [1e-4, 0.05, 0.2], [20], [0.0, 1e-3], [0]),
            **grid_runs("teacher", [2], [8], [0.1], [30], [0.0], [0])}
    cfg = config(runs)
    dataset = task_data(cfg)
    device = torch.device("cpu")
    grouped = SPEC.train_group(cfg, list(runs), {n: dataset for n in runs}, device)
    assert list(grouped) == list(runs)
    for name in ("teacher-d1-w16-lr0_0001-b20-wd0-s0", "teacher-d1-w16-lr0_2-b20-wd0_001-s0",
                 "teacher-d2-w8-lr0_1-b30-wd0-s0"):
        alone = SPEC.train_run(cfg, name, dataset, device)
        assert same(alone.metrics, grouped[name].metrics), name
        for key, tensor in alone.weights.items():
            assert torch.equal(tensor, grouped[name].weights[key])
    metrics = {name: json.loads(dumps_json(a.metrics)) for name, a in grouped.items()}
    for m in metrics.values():
        assert m["gap"] == pytest.approx(m["final_train_acc"] - m["final_test_acc"])
        assert set(m["measures"]) == set(MEASURES)
        assert m["included"] == (m["status"] == "fitted")
        if m["included"]:
            assert m["final_train_acc"] >= TEACHER_RECIPE["stop_at_train_acc"]
            assert m["measures"]["num_params"] == m["n_parameters"]
            finite = [v for v in m["measures"].values() if v is not None]
            assert len(finite) >= len(MEASURES) - 3, m["measure_reasons"]
        else:
            assert all(v is None for v in m["measures"].values())
    summary = summarize(cfg, metrics, {n: a.history for n, a in grouped.items()})
    assert summary.table.num_rows == len(MEASURES)
    assert isinstance(summary.table, pa.Table)
    assert summary.data["conditions"]["teacher"]["excluded_by_status"] == {"budget": 2}
    assert summary.data["conditions"]["teacher"]["n_included"] == len(runs) - 2


def test_mnist1d_runs_stop_at_a_cross_entropy_and_low_accuracy_is_excluded() -> None:
    """Jiang et al.'s protocol on MNIST-1D: each run stops at its first evaluation with training
    cross-entropy <= stop_at_train_loss; one that stops there below min_train_acc, or never
    gets there, is excluded with its reason; the summary ranks each task apart."""
    mnist = {"num_samples": 400, "train_split": 0.25}
    recipe = {"activation": "relu", "momentum": 0.9, "max_steps": 1500, "eval_every": 50,
              "stop_at_train_loss": 0.05, "min_train_acc": 0.99}
    runs = {**grid_runs("mnist1d", [1], [64], [1e-4, 0.05], [25], [0.0], [0]),
            **grid_runs("teacher", [1], [16], [0.2], [20], [0.0], [0])}
    cfg = config(runs, data={**DATA, "mnist1d": mnist},
                 recipe={**RECIPE, "mnist1d": recipe})
    dataset = task_data(cfg, "mnist1d")
    assert dataset.train.x.shape == (100, 40) and dataset.test.x.shape == (300, 40)
    names = [n for n in runs if n.startswith("mnist1d")]
    trained = SPEC.train_group(cfg, names, {n: dataset for n in names}, torch.device("cpu"))
    slow, fast = (trained[n].metrics for n in names)  # lr 1e-4 cannot get there
    assert fast["status"] == "fitted" and fast["included"] and fast["exclusion"] is None
    assert fast["final_train_loss"] <= 0.05 and fast["final_train_acc"] >= 0.99
    losses = trained[names[1]].history.column("train_loss").to_pylist()
    assert all(v > 0.05 for v in losses[:-1])  # stopped at the first evaluation below
    assert slow["status"] == "budget" and not slow["included"]
    assert slow["exclusion"].startswith("the run budget")
    strict = cfg.model_copy(update={"recipe": type(cfg.recipe).model_validate(
        {**RECIPE, "mnist1d": {**recipe, "min_train_acc": 1.0, "stop_at_train_loss": 0.5}})})
    loose = SPEC.train_run(strict, names[1], dataset, torch.device("cpu")).metrics
    assert loose["status"] == "fitted" and loose["final_train_acc"] < 1.0
    assert not loose["included"] and "< min_train_acc 1" in loose["exclusion"]
    metrics = {n: json.loads(dumps_json(a.metrics)) for n, a in trained.items()}
    teacher = task_data(cfg)
    metrics |= {n: json.loads(dumps_json(SPEC.train_run(cfg, n, teacher,
                                                         torch.device("cpu")).metrics))
                for n in runs if n.startswith("teacher")}
    summary = summarize(cfg, metrics, {})
    assert summary.data["tasks"] == ["teacher", "mnist1d"]
    assert summary.data["conditions"]["mnist1d"]["excluded_runs"] == {
        names[0]: slow["exclusion"]}
    assert [c.condition for c in summary.claims] == ["teacher"] * 4 + ["mnist1d"] * 4
    assert set(summary.table.column("task").to_pylist()) == {"teacher", "mnist1d"}


# ------------------------------------------------------------- the post-hoc analyses' objective


def test_the_analyses_objective_is_the_loss_the_run_minimised(tmp_path) -> None:
    """At the trained weights (the model as the analyze stage loads it), the objective's loss is
    the train loss of the run's last history row: the same float32 forward pass on the same
    inputs and labels, summed then divided by n there, a mean here, so a few ulps apart (rel
    1e-6); the weight decay's (λ/2)‖θ‖² folded in would be far outside it. And the sharpness
    record runs on it, beside the run's own step size, momentum and batch size."""
    import importlib

    from genlab.analyses.registry import ANALYSES
    from genlab.analyses.settings import SharpnessSettings
    from genlab.io import write_safetensors
    from genlab.models.registry import load_model

    name = "teacher-d1-w16-lr0_2-b20-wd0_001-s0"
    cfg = config(grid_runs("teacher", [1], [16], [0.2], [20], [1e-3], [0]))
    dataset, cpu = task_data(cfg), torch.device("cpu")
    result = SPEC.train_run(cfg, name, dataset, cpu)
    assert result.metrics["status"] == "fitted"
    objective = SPEC.objective(cfg, name, dataset, cpu)
    weights = tmp_path / "model.safetensors"
    spec = {**result.model_spec, "weights_sha256": write_safetensors(weights, result.weights)}
    model = load_model(spec, weights).to(cpu)
    with torch.no_grad():
        loss = objective.loss_fn(model(objective.X), objective.y).item()
    assert loss == pytest.approx(result.history.column("train_loss")[-1].as_py(), rel=1e-6)
    assert loss == pytest.approx(result.metrics["final_train_loss"], rel=1e-6)
    assert (objective.lr, objective.momentum, objective.batch_size,
            objective.weight_decay) == (0.2, 0.9, 20, 1e-3)
    module, _, function = ANALYSES["sharpness"].record.partition(":")
    record, _ = getattr(importlib.import_module(module), function)(
        model, objective, SharpnessSettings(max_iter=10, trace_num_matvecs=6,
                                            density_num_repeats=1, density_num_steps=5),
        lambda: None)
    assert record["status"] == "done" and math.isfinite(record["lambda_max"])
    assert record["threshold"] == pytest.approx((2 + 2 * 0.9) / 0.2)


# ------------------------------------------------------------------------- the CNN family

CNN_RECIPE = {"activation": "relu", "momentum": 0.9, "max_steps": 400, "eval_every": 50,
              "stop_at_train_loss": 0.5, "conv": {"kernel_size": 3, "stride": 2}}
MNIST = {"num_samples": 400, "train_split": 0.25}


def test_the_cnn_family_needs_its_conv_block_and_a_depth_that_fits() -> None:
    runs = grid_runs("mnist1d_cnn", [2], [4], [0.1], [25], [0.0], [0])
    data = {**DATA, "mnist1d_cnn": MNIST}
    assert config(runs, data=data, recipe={**RECIPE, "mnist1d_cnn": CNN_RECIPE}).runs
    no_conv = {k: v for k, v in CNN_RECIPE.items() if k != "conv"}
    with pytest.raises(ValidationError, match="the CNN family needs the convolutions' shape"):
        config(runs, data=data, recipe={**RECIPE, "mnist1d_cnn": no_conv})
    with pytest.raises(ValidationError, match="only the CNN tasks"):
        config(runs, data=data, recipe={**RECIPE, "mnist1d_cnn": CNN_RECIPE,
                                        "teacher": {**TEACHER_RECIPE,
                                                    "conv": CNN_RECIPE["conv"]}})
    # no padding: 40 points become 19, 9, 4, 1, then nothing
    unpadded = {**CNN_RECIPE, "conv": {"kernel_size": 3, "stride": 2, "padding": 0}}
    four, five = (grid_runs("mnist1d_cnn", [d], [4], [0.1], [25], [0.0], [0]) for d in (4, 5))
    assert config(four, data=data, recipe={**RECIPE, "mnist1d_cnn": unpadded}).runs
    with pytest.raises(ValidationError, match="5 conv layers .* shrink a series of 40 points"):
        config(five, data=data, recipe={**RECIPE, "mnist1d_cnn": unpadded})


def test_the_cnn_family_trains_in_groups_as_alone_with_its_measures() -> None:
    runs = grid_runs("mnist1d_cnn", [2], [8], [0.05, 0.1], [25], [0.0], [0])
    cfg = config(runs, data={**DATA, "mnist1d_cnn": MNIST},
                 recipe={**RECIPE, "mnist1d_cnn": CNN_RECIPE})
    dataset = task_data(cfg, "mnist1d_cnn")
    mlp_task = config(grid_runs("mnist1d", [1], [8], [0.1], [25], [0.0], [0]),
                      data={**DATA, "mnist1d": MNIST},
                      recipe={**RECIPE, "mnist1d": {k: v for k, v in CNN_RECIPE.items()
                                                    if k != "conv"}})
    assert np.array_equal(dataset.train.x, task_data(mlp_task, "mnist1d").train.x)
    device = torch.device("cpu")
    grouped = SPEC.train_group(cfg, list(runs), {n: dataset for n in runs}, device)
    for name, artifacts in grouped.items():
        m = json.loads(dumps_json(artifacts.metrics))
        assert artifacts.model_spec["kind"] == "conv1d", artifacts.model_spec
        assert m["status"] == "fitted" and m["included"], m["exclusion"]
        # the vectorised trainer (vmap for a CNN) sums in another order than the loop: the
        # same run to float32 rounding, as train_classifier_ensemble documents
        alone = SPEC.train_run(cfg, name, dataset, device).metrics
        assert (alone["status"], alone["steps"], alone["fit_step"]) == (
            m["status"], m["steps"], m["fit_step"])
        assert alone["final_train_loss"] == pytest.approx(m["final_train_loss"], rel=1e-4)
        for measure in ("prod_of_spec", "path_norm", "param_norm"):
            assert alone["measures"][measure] == pytest.approx(m["measures"][measure], rel=1e-4)
        # the norms and the path norm are defined on the CNN; the fully connected ones are not
        assert m["measures"]["path_norm"] is not None and m["measures"]["path_norm"] > 0
        assert m["measures"]["prod_of_spec"] is not None
        undefined = {k for k, v in m["measures"].items() if v is None}
        # the fully connected measures (α of Linear layers: the head alone is too small; the
        # neural collapse of an MLP's last hidden layer), and the tiny run's stop above 0.1
        assert undefined == {"alpha_mean", "alpha_weighted", "nc1", "nc2_equinorm",
                             "nc2_max_angle", "nc3", "nc4", "steps_to_loss"}, m["measure_reasons"]
        assert "never reached" in m["measure_reasons"]["steps_to_loss"]
        assert all(m["measure_reasons"][k] for k in undefined)
    summary = summarize(cfg, {n: json.loads(dumps_json(a.metrics)) for n, a in grouped.items()},
                        {})
    assert summary.data["tasks"] == ["mnist1d_cnn"]


def test_the_diagnosis_gives_each_axis_tau_with_the_gap_and_the_claims_measures() -> None:
    """The "why these verdicts" lines: per task, the runs kept, the gap's range, Kendall τ of
    every varied axis with the gap and of the claims' measures with the gap and each axis, as
    scipy computes them over the included runs."""
    metrics = synthetic_metrics()
    summary = summarize(one_run_config(), metrics, {})
    lines = summary.data["diagnosis"]
    assert len(lines) == 3 and lines[0] == TEACHER_CAUSE
    teacher, within = lines[1], lines[2]
    runs = [m for _, m in sorted(metrics.items()) if m["included"]]
    gap = np.array([m["gap"] for m in runs])
    assert teacher.startswith(f"teacher: 15 of 16 runs kept (the rest missed the stop or "
                              f"min_train_acc), gap {gap.mean():.3f} (range {gap.min():.3f} to "
                              f"{gap.max():.3f}).")
    depth = np.array([m["depth"] for m in runs], dtype=np.float64)
    spec = np.array([m["measures"]["prod_of_spec"] for m in runs])
    assert f"by axis: depth {kendalltau(depth, gap).statistic:+.2f}, lr " in teacher
    assert (f"prod_of_spec: with the gap {kendalltau(spec, gap).statistic:+.2f}, with depth "
            f"{kendalltau(spec, depth).statistic:+.2f}, lr ") in teacher
    assert "pacbayes_flatness: with the gap" in teacher and "pacbayes_mag_flatness" in teacher
    # one axis at a time: each measure's ψ_i as the ranking table has it, and the axes whose
    # sign is the claims' opposite (negative wanted of prod_of_spec, positive of flatness)
    rows = {r["measure"]: r for r in summary.data["conditions"]["teacher"]["ranking"]}
    varied = summary.data["conditions"]["teacher"]["hyperparameters_varied"]
    assert within.startswith("teacher, one axis at a time")
    for name, wanted in (("prod_of_spec", -1), ("pacbayes_flatness", 1),
                         ("pacbayes_mag_flatness", 1)):
        psi = {h: rows[name][f"psi_{h}"] for h in varied}
        wrong = [h for h, v in psi.items() if not np.isnan(v) and v * wanted < 0]
        text = ", ".join(f"{h} {v:+.2f}" if not np.isnan(v) else f"{h} undefined"
                         for h, v in psi.items())
        assert f"{name} ψ {text} (Ψ {rows[name]['psi']:+.2f}" in within
        defined = sum(not np.isnan(v) for v in psi.values())
        assert f"opposite on {len(wrong)} of {defined} axes" in within
    nothing = {n: {**m, "included": False} for n, m in metrics.items()}
    assert summarize(one_run_config(), nothing, {}).data["diagnosis"] == []
