"""The influence study: settings, each claim's decision on hand-made metrics, one tiny run of
each model through train_run, summarize and figures, and that a run is deterministic."""

from __future__ import annotations

import functools
import json
import math

import pyarrow as pa
import pytest
import torch
from influence_support import assert_same_artifacts
from pydantic import ValidationError

from genlab.io import dumps_json
from genlab.models.registry import MODELS, build_model
from genlab.studies.influence.claims import check_claims, diagnosis, summarize
from genlab.studies.influence.experiment import METHODS, SPEC
from genlab.studies.influence.figures import figures
from genlab.studies.influence.settings import (
    InfluenceClaims,
    InfluenceConfig,
    InfluenceRun,
    run_id,
)

CPU = torch.device("cpu")


def config(**changes) -> InfluenceConfig:
    block = {
        "data": {"input_dim": 4, "n_train": 40, "n_test": 6, "seed": 0},
        "logistic": {"l2": 0.05},
        "mlp": {"hidden": [6], "activation": "tanh", "l2": 0.05},
        "methods": {"lissa_depth": 60, "lissa_batch_size": 20},
        "ground_truth": {"loo_points": 6, "loo_scratch_points": 2, "lds_subsets": 5,
                         "seed": 0},
        "shown_test_points": 1,
        "claims": {"logistic_lds": ">= 0.8", "mlp_warm": ">= 0.8", "mlp_lds": ">= 0.3"},
        "runs": {"logistic-s0": {"model": "logistic", "seed": 0},
                 "mlp-s0": {"model": "mlp", "seed": 0}},
    }
    for key, value in changes.items():
        block[key] = value
    return InfluenceConfig.model_validate(block)


def test_run_ids_and_registration() -> None:
    assert run_id(InfluenceRun(model="mlp", seed=3)) == "mlp-s3"
    assert SPEC.name == "influence" and SPEC.config is InfluenceConfig


def test_settings_are_validated() -> None:
    base = config()
    with pytest.raises(ValidationError, match="loo_scratch_points"):
        config(ground_truth={"loo_points": 3, "loo_scratch_points": 4, "lds_subsets": 5,
                             "seed": 0})
    with pytest.raises(ValidationError, match="exceeds data.n_train"):
        config(ground_truth={"loo_points": 41, "loo_scratch_points": 0, "lds_subsets": 5,
                             "seed": 0})
    with pytest.raises(ValidationError, match="extra"):
        config(logistic={"l2": 0.05, "damping": 1.0})
    with pytest.raises(ValidationError):
        config(logistic={"l2": 0.0})  # the damping must be positive
    with pytest.raises(ValidationError):
        config(runs={"linear-s0": {"model": "linear", "seed": 0}})
    assert base.fit.grad_tol == 1e-9 and base.ground_truth.lds_fraction == 0.5


# --------------------------------------------------------------------------- claim decisions


def metrics(model: str, pearson: float, lds: float, random_lds: float = 0.0,
            cosine: float = 0.999, pearson_scratch: float = 0.5, seed: int = 0,
            hessian: float | None = None) -> dict:
    """One run's metrics; the exact Hessian's Pearson is ``hessian`` (the GGN's by default),
    its LDS the GGN's."""
    warm = {"exact": pearson, "exact_hessian": pearson if hessian is None else hessian}
    methods = {name: {"loo_warm_pearson": warm.get(name, 0.5),
                      "loo_scratch_pearson": pearson_scratch,
                      "lds": {"exact": lds, "exact_hessian": lds,
                              "random": random_lds}.get(name, 0.4)}
               for name in METHODS}
    return {"model": model, "seed": seed, "status": "converged", "methods": methods,
            "inverse_hvp": {"cg": {"min_cosine": 1.0}, "lissa": {"min_cosine": cosine},
                            "exact_hessian": {"positive_definite": True}},
            "ground_truth": {"loo_warm": {"median_shift": 0.05},
                             "loo_scratch": {"median_shift": 0.9}}}


RULES = InfluenceClaims(logistic_lds=">= 0.8", mlp_warm=">= 0.8", mlp_lds=">= 0.3")


def statuses(claims) -> list[str]:
    return [c.status for c in claims]


def three(model: str, pearson: float, lds: float, **kw) -> dict:
    """Three seeds of one model, their numbers a little apart."""
    return {f"{model}-s{s}": metrics(model, pearson + 0.01 * s, lds + 0.01 * s, seed=s, **kw)
            for s in range(3)}


def test_the_papers_picture_reproduces() -> None:
    claims = check_claims(three("logistic", 0.98, 0.95) | three("mlp", 0.91, 0.6), RULES)
    assert [c.key for c in claims] == ["logistic_loo", "logistic_lds", "lds_random", "mlp_warm",
                                       "mlp_lds", "mlp_warm", "mlp_lds", "solvers"]
    assert [c.condition for c in claims] == [None] * 3 + ["GGN"] * 2 + ["Hessian"] * 2 + [None]
    assert statuses(claims) == ["passed", "reproduced", "passed", "reproduced", "reproduced",
                                "reproduced", "reproduced", "passed"]
    assert [c.kind for c in claims] == ["control", "literature", "control", "literature",
                                        "literature", "literature", "literature", "control"]
    assert claims[0].numbers["mean_pearson"] == pytest.approx(0.99)
    assert claims[1].effect["n"] == 3 and claims[1].numbers["by_seed"]["1"] == 0.96


def test_each_claim_can_fail() -> None:
    claims = check_claims(three("logistic", 0.92, 0.7) | three("mlp", 0.7, 0.1, cosine=0.98),
                          RULES)
    assert statuses(claims) == ["failed", "not_reproduced", "passed", "not_reproduced",
                                "not_reproduced", "not_reproduced", "not_reproduced", "failed"]
    # random scores that correlate fail their control, whatever the exact LDS does
    claims = check_claims(three("logistic", 0.99, 0.9, random_lds=-0.11)
                          | three("mlp", 0.9, 0.5), RULES)
    assert statuses(claims)[2] == "failed"


def test_seeds_that_straddle_the_rule_are_inconclusive_and_nan_is_left_out() -> None:
    runs = {"logistic-s0": metrics("logistic", 0.99, 0.95),
            "logistic-s1": metrics("logistic", 0.99, 0.6, seed=1),
            "logistic-s2": metrics("logistic", 0.99, 0.9, seed=2)}
    assert check_claims(runs, RULES)[1].status == "inconclusive"
    runs["logistic-s2"] = metrics("logistic", math.nan, math.nan, seed=2)
    lds = check_claims(runs, RULES)[1]
    assert lds.effect["n"] == 2 and lds.numbers["by_seed"]["2"] is not None
    assert check_claims(runs, RULES)[0].status == "failed"  # NaN fails the control's mean


def test_missing_or_unconverged_models_are_not_run() -> None:
    claims = check_claims(three("mlp", 0.9, 0.5) | {
        "logistic-s0": {"model": "logistic", "seed": 0, "status": "not_converged"}}, RULES)
    assert statuses(claims) == ["not_run", "not_run", "not_run", "reproduced", "reproduced",
                                "reproduced", "reproduced", "passed"]
    assert claims[0].numbers["skipped"] == ["logistic-s0"]
    assert statuses(check_claims({}, RULES)) == ["not_run"] * 8
    assert [c.condition for c in check_claims({}, RULES)][3:7] == ["GGN", "GGN", "Hessian",
                                                                  "Hessian"]


def test_each_curvature_is_judged_on_its_own_scores_and_the_diagnosis_names_the_gap() -> None:
    """The GGN condition is judged on the exact GGN scores, the Hessian's on the Hessian's; the
    diagnosis gives both means and names the curvature approximation only when the Hessian is
    clearly ahead (by more than 0.05)."""
    runs = {f"mlp-s{s}": metrics("mlp", 0.70 + 0.01 * s, 0.5, seed=s, hessian=0.95 + 0.01 * s)
            for s in range(3)}
    claims = {(c.key, c.condition): c for c in check_claims(runs, RULES)}
    assert claims["mlp_warm", "GGN"].status == "not_reproduced"
    assert claims["mlp_warm", "GGN"].effect["estimate"] == pytest.approx(0.71)
    assert claims["mlp_warm", "Hessian"].status == "reproduced"
    assert claims["mlp_warm", "Hessian"].numbers["method"] == "exact_hessian"
    lines = diagnosis(runs)
    assert "mlp (3 seeds; the Hessian positive definite in 3)" in lines[0]
    assert "Hessian 0.960 against GGN 0.710" in lines[1] and "curvature approximation" in lines[1]
    assert "a median 0.900 from the trained model, a warm-started one 0.050" in lines[2]
    same = {f"mlp-s{s}": metrics("mlp", 0.9, 0.5, seed=s, hessian=0.92) for s in range(3)}
    assert "agree within 0.05" in diagnosis(same)[1]
    assert diagnosis({}) == []


# ------------------------------------------------------------------------------- real runs


@functools.cache
def tiny() -> tuple[InfluenceConfig, dict]:
    cfg = config()
    dataset = SPEC.synthesize(cfg)
    return cfg, {name: SPEC.train_run(cfg, name, dataset, CPU) for name in cfg.runs}


def test_tiny_runs_end_to_end() -> None:
    cfg, results = tiny()
    n, n_test = 40, 6
    for name, result in results.items():
        m = result.metrics
        assert m["status"] == "converged" and m["fit"]["grad_max"] <= 1e-9
        assert set(m["methods"]) == set(METHODS)
        table = result.history
        assert table.column_names == ["train_id", "test_id", "score", "method"]
        counts = {k: 0 for k in (*METHODS, "loo_warm", "loo_scratch")}
        for method in table.column("method").to_pylist():
            counts[method] += 1
        assert counts == {**{k: n * n_test for k in METHODS}, "loo_warm": 6 * n_test,
                          "loo_scratch": 2 * n_test}
        assert m["ground_truth"]["loo_warm"]["not_converged"] == 0
        assert m["inverse_hvp"]["cg"]["min_cosine"] > 0.999999
        # the model rebuilds from model.json's spec and the weights
        spec = result.model_spec
        settings_cls, _ = MODELS[spec["kind"]]
        rebuilt = build_model(spec["kind"], settings_cls.model_validate(spec["settings"]),
                              spec["input_dim"], spec["output_dim"]).double()
        rebuilt.load_state_dict(result.weights, strict=True)
        assert name.split("-")[0] in ("logistic", "mlp")
    logistic = results["logistic-s0"].metrics
    # convex: the exact influence predicts leave-one-out almost perfectly even at n = 40
    assert logistic["methods"]["exact"]["loo_warm_pearson"] > 0.95
    # and the warm and scratch retrainings reach the same optimum
    assert logistic["methods"]["exact"]["loo_scratch_pearson"] == pytest.approx(
        logistic["methods"]["exact"]["loo_warm_pearson"], abs=0.05)

    metrics = {k: json.loads(dumps_json(r.metrics)) for k, r in results.items()}
    summary = summarize(cfg, metrics, {k: r.history for k, r in results.items()})
    assert len(summary.claims) == 8  # the MLP's two claims under each curvature
    # the controls are decided; one seed gives the literature claims no interval
    assert all((c.status == "not_run") == (c.kind == "literature") for c in summary.claims)
    assert summary.table.num_rows == 2 * len(METHODS)
    assert isinstance(summary.table, pa.Table)
    data = json.loads(dumps_json(summary.data))
    assert data["diagnosis"][0].startswith("logistic (1 seed;")  # from the real runs' numbers
    (example,) = data["examples"]["mlp-s0"]
    assert example["test_id"] == metrics["mlp-s0"]["test_ids_by_loss"][0]
    assert len(example["proponents"]) == 5 and example["proponents"][0]["exact"] <= 0
    assert example["opponents"][0]["exact"] >= example["opponents"][-1]["exact"]
    # how many test points the report shows is chosen at aggregation, from the same runs
    more = summarize(config(shown_test_points=3), metrics,
                     {k: r.history for k, r in results.items()})
    assert [e["test_id"] for e in json.loads(dumps_json(more.data))["examples"]["mlp-s0"]] == \
        metrics["mlp-s0"]["test_ids_by_loss"][:3]
    assert len(data["loo_scatter"]["logistic-s0"]["measured"]) == 6 * n_test
    drawn = figures(data, summary.table)
    assert len(drawn) == 4 and all(isinstance(caption, str) for caption, _ in drawn)


def test_the_shown_test_points_are_not_a_training_setting() -> None:
    from genlab.stages.settings import stage_settings

    assert stage_settings(config(shown_test_points=1), "train", "mlp-s0") == \
        stage_settings(config(shown_test_points=3), "train", "mlp-s0")
    assert "shown_test_points" in stage_settings(config(), "aggregate")


def test_a_run_is_deterministic() -> None:
    cfg, results = tiny()
    again = SPEC.train_run(cfg, "mlp-s0", SPEC.synthesize(cfg), CPU)
    first = results["mlp-s0"]
    assert_same_artifacts(again, first)
    assert set(first.metrics["seconds"]) >= {*METHODS, "fit", "loo_warm", "loo_scratch", "lds"}


# ------------------------------------------------------------- the post-hoc analyses' objective


def test_the_analyses_objective_is_the_data_loss_the_fit_minimised(tmp_path) -> None:
    """Each run's model, as the analyze stage loads it (float64, the weights exactly as
    trained), on the objective: its loss is the run's train_loss (the fit's regularised loss
    less ½λ‖θ‖², float64 round-off apart: 1e-12), and its gradient plus λθ (weight_decay
    recording λ) is the fit's stationarity, max ≤ grad_tol = 1e-9 up to float64 round-off of
    a gradient recomputed the other way (2e-9). The penalty folded into the loss would leave
    a gradient of λθ, other labels one of order 0.1."""
    import importlib

    from genlab.analyses.registry import ANALYSES
    from genlab.analyses.settings import SharpnessSettings
    from genlab.io import write_safetensors
    from genlab.models.registry import load_model

    cfg, results = tiny()
    dataset = SPEC.synthesize(cfg)
    module, _, function = ANALYSES["sharpness"].record.partition(":")
    sharpness_record = getattr(importlib.import_module(module), function)
    for name, result in results.items():
        objective = SPEC.objective(cfg, name, dataset, CPU)
        assert objective.X.dtype == objective.y.dtype == torch.float64
        assert (objective.weight_decay, objective.batch_size, objective.momentum,
                objective.lr) == (0.05, None, 0.0, 1.0)
        weights = tmp_path / f"{name}.safetensors"
        spec = {**result.model_spec, "weights_sha256": write_safetensors(weights, result.weights)}
        model = load_model(spec, weights).to(CPU)
        assert all(torch.equal(v, result.weights[k]) for k, v in model.state_dict().items())
        params = [p for p in model.parameters() if p.requires_grad]
        loss = objective.loss_fn(model(objective.X), objective.y)
        assert loss.item() == pytest.approx(result.metrics["train_loss"], rel=0, abs=1e-12)
        grads = torch.autograd.grad(loss, params)
        stationarity = max(float((g + objective.weight_decay * p.detach()).abs().max())
                           for g, p in zip(grads, params, strict=True))
        assert stationarity <= 2e-9, name
        record, _ = sharpness_record(model, objective, SharpnessSettings(
            max_iter=10, trace_num_matvecs=6, density_num_repeats=1, density_num_steps=5),
            lambda: None)
        assert record["status"] == "done" and record["weight_decay"] == 0.05
        assert record["lambda_max"] > 0 and record["threshold"] == 2.0
