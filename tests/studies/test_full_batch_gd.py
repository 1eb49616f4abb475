"""The full_batch_gd study: its settings' checks, the claims on hand-made metrics, and tiny runs
end to end."""

from __future__ import annotations

import json

import pytest
import torch
from pydantic import ValidationError

from genlab.io import dumps_json
from genlab.studies.full_batch_gd.claims import accuracies, check_claims, summarize
from genlab.studies.full_batch_gd.experiment import SPEC
from genlab.studies.full_batch_gd.figures import figures, tables
from genlab.studies.full_batch_gd.settings import FullBatchConfig, FullBatchRun, run_id

CPU = torch.device("cpu")
RULES = {"plain_gd_worse": "> 0", "penalty_matches_sgd": "within [-2, 2]",
         "penalty_helps": "> 0"}
FULL = {"stochastic": False, "lr": 0.1, "steps": 6, "warmup": 1, "eval_every": 3}
RECIPES = {"sgd": {"stochastic": True, "lr": 0.1, "steps": 2, "warmup": 1, "batch_size": 20,
                   "eval_every": 1},
           "gd": FULL,
           "gd_penalty": {**FULL, "lr": 0.2, "grad_clip": 0.25, "penalty": 0.5,
                          "block_size": 20}}


def config(runs: dict, **changes) -> FullBatchConfig:
    return FullBatchConfig.model_validate({
        "data": {"num_samples": 200, "train_split": 0.5, "seed": 0}, "min_train_acc": 1.0,
        "model": {"channels": [4, 4], "kernel_sizes": [5, 3]}, "recipes": RECIPES,
        "compare": {"sgd": "sgd", "plain": "gd", "penalised": "gd_penalty"}, "claims": RULES,
        "runs": runs, **changes})


def every_run(seeds: range) -> dict:
    return {run_id(FullBatchRun(recipe=r, seed=s)): {"recipe": r, "seed": s}
            for r in RECIPES for s in seeds}


def test_settings_name_the_recipes_the_claims_compare() -> None:
    assert run_id(FullBatchRun(recipe="gd_penalty", seed=2)) == "gd_penalty-s2"
    with pytest.raises(ValidationError, match="runs.x-s0.recipe: not one of recipes"):
        config({"x-s0": {"recipe": "x", "seed": 0}})
    with pytest.raises(ValidationError, match="compare.sgd: recipe 'gd' must be stochastic"):
        config(every_run(range(1)), compare={"sgd": "gd", "plain": "gd",
                                             "penalised": "gd_penalty"})
    with pytest.raises(ValidationError, match="compare.plain: .* no penalty and no grad_clip"):
        config(every_run(range(1)), compare={"sgd": "sgd", "plain": "gd_penalty",
                                             "penalised": "gd_penalty"})
    with pytest.raises(ValidationError, match="compare.penalised: .* penalty > 0"):
        config(every_run(range(1)), compare={"sgd": "sgd", "plain": "gd", "penalised": "gd"})
    with pytest.raises(ValidationError, match="block_size 30 does not divide the 100"):
        config(every_run(range(1)),
               recipes={**RECIPES, "gd_penalty": {**RECIPES["gd_penalty"], "block_size": 30}})


def metrics(recipe: str, seed: int, acc: float, status: str = "budget") -> dict:
    return {"recipe": recipe, "seed": seed, "status": status, "final_test_acc": acc,
            "final_train_acc": 1.0}


def test_claims_are_paired_differences_over_seeds() -> None:
    runs = {}
    for seed in range(3):
        runs[f"sgd-s{seed}"] = metrics("sgd", seed, 0.94 + 0.002 * seed)
        runs[f"gd-s{seed}"] = metrics("gd", seed, 0.90 - 0.003 * seed)
        runs[f"gd_penalty-s{seed}"] = metrics("gd_penalty", seed, 0.935 + 0.001 * seed)
    cfg = config(every_run(range(3)))
    claims = check_claims(cfg, runs)
    assert [c.key for c in claims] == ["plain_gd_worse", "penalty_matches_sgd", "penalty_helps"]
    assert [c.status for c in claims] == ["reproduced"] * 3
    assert claims[0].numbers["by_seed"] == {"0": pytest.approx(4.0), "1": pytest.approx(4.5),
                                            "2": pytest.approx(5.0)}
    # penalised GD 3 points below SGD in every seed: outside the ±2 margin
    for seed in range(3):
        runs[f"gd_penalty-s{seed}"]["final_test_acc"] = 0.91 + 0.002 * seed
    assert check_claims(cfg, runs)[1].status == "not_reproduced"
    # a diverged run, and one that did not fit its training set, are left out of their seed's
    # difference (None) and named; the rest still decide
    runs["gd-s0"]["status"] = "diverged"
    runs["gd-s1"]["final_train_acc"] = 0.98
    assert accuracies(runs, 0.99)["gd"] == {0: None, 1: None, 2: pytest.approx(89.4)}
    assert accuracies(runs, 0.97)["gd"][1] == pytest.approx(89.7)
    claim = check_claims(cfg, runs)[0]
    assert claim.numbers["by_seed"]["0"] is None and claim.numbers["by_seed"]["1"] is None
    assert claim.numbers["left_out"] == ["gd-s0", "gd-s1"]
    assert claim.status == "not_run"  # one seed left: no interval


def test_tiny_runs_end_to_end() -> None:
    cfg = config(every_run(range(1)))
    dataset = SPEC.synthesize(cfg)
    results = {name: SPEC.train_run(cfg, name, dataset, CPU) for name in cfg.runs}
    for result in results.values():
        m = result.metrics
        recipe = cfg.recipes[m["recipe"]]
        assert m["status"] == "budget" and m["steps"] == recipe.steps
        assert result.history.column("step").to_pylist() == list(
            range(0, recipe.steps + 1, recipe.eval_every))
        assert 0.0 <= m["final_test_acc"] <= 1.0
    assert results["gd_penalty-s0"].metrics["clipped_fraction_of_evaluated_steps"] is not None
    again = SPEC.train_run(cfg, "gd_penalty-s0", dataset, CPU)  # deterministic on a CPU
    assert dumps_json(again.metrics) == dumps_json(results["gd_penalty-s0"].metrics)
    metrics_json = {k: json.loads(dumps_json(r.metrics)) for k, r in results.items()}
    histories = {k: r.history for k, r in results.items()}
    # 100% training accuracy required: the tiny runs fit nothing, every one is left out
    strict = summarize(cfg, metrics_json, histories)
    assert strict.data["left_out"] == sorted(cfg.runs) and not strict.data["test_acc_estimate"]
    (_, _, rows), = tables(json.loads(dumps_json(strict.data)))
    assert [r["left out"] for r in rows] == [1, 1, 1] and all(r["n"] == 0 for r in rows)
    lenient = cfg.model_copy(update={"min_train_acc": 1e-6})
    summary = summarize(lenient, metrics_json, histories)
    assert [c.status for c in summary.claims] == ["not_run"] * 3  # one seed: no interval
    data = json.loads(dumps_json(summary.data))
    assert set(data["test_acc_estimate"]) == set(RECIPES) and data["left_out"] == []
    assert len(figures(data, summary.table)) == 1
    (_, columns, rows), = tables(data)
    assert [r["recipe"] for r in rows] == ["sgd", "gd", "gd_penalty"]
    assert rows[0]["batch"] == 20 and rows[1]["batch"] == "full" and "test acc (%)" in columns
