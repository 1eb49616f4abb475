"""The repetition study: its settings' checks, the claims on hand-made runs, and tiny runs end
to end."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
import torch
from pydantic import ValidationError

from genlab.io import dumps_json
from genlab.studies.repetition.claims import check_claims, steps_to_target, summarize
from genlab.studies.repetition.experiment import SPEC
from genlab.studies.repetition.figures import figures, tables
from genlab.studies.repetition.settings import RepetitionConfig, RepetitionRun, run_id

CPU = torch.device("cpu")
RULES = {"repetition_beats_single_use": "> 0", "two_set_faster": "> 0", "two_set_better": "> 0"}
REGIMES = {"single_use": {}, "repeat4": {"data_budget": 40},
           "two_set": {"repeated_set": 20, "repeated_prob": 0.25}}
COMPARE = {"single_use": "single_use", "repeated": "repeat4", "two_set": "two_set"}


def config(runs: dict, **changes) -> RepetitionConfig:
    return RepetitionConfig.model_validate({
        "data": {"operand_range": 40, "modulus": 7, "operation": "mul", "n_train": 400,
                 "n_test": 100, "seed": 0},
        "model": {"vocab_size": 40, "max_len": 2, "d_model": 16, "n_heads": 2, "d_mlp": 32},
        "recipe": {"lr": 0.003, "batch_size": 8, "steps": 20, "eval_every": 5},
        "regimes": REGIMES, "compare": COMPARE, "target_acc": 0.5, "claims": RULES,
        "runs": runs, **changes})


def every_run(seeds: range) -> dict:
    return {run_id(RepetitionRun(regime=r, seed=s)): {"regime": r, "seed": s}
            for r in REGIMES for s in seeds}


def test_settings_check_the_regimes_against_the_stream_and_the_roles() -> None:
    assert run_id(RepetitionRun(regime="two_set", seed=3)) == "two_set-s3"
    with pytest.raises(ValidationError, match="runs.x-s0.regime: not one of regimes"):
        config({"x-s0": {"regime": "x", "seed": 0}})
    with pytest.raises(ValidationError, match="compare.repeated: regime 'two_set' is not a "
                       "repeated regime"):
        config(every_run(range(1)), compare={**COMPARE, "repeated": "two_set"})
    with pytest.raises(ValidationError, match="compare.single_use: regime 'repeat4' is not"):
        config(every_run(range(1)), compare={**COMPARE, "single_use": "repeat4"})
    # two-set reads its 20 repeated examples plus up to 160 fresh: 180 of the 400
    with pytest.raises(ValidationError, match="regimes.two_set: reads up to 820 examples; "
                       "data.n_train is 400"):
        config(every_run(range(1)), regimes={**REGIMES, "two_set": {
            "repeated_set": 660, "repeated_prob": 0.25}})
    with pytest.raises(ValidationError, match="regimes.repeat4.data_budget: below one batch"):
        config(every_run(range(1)), regimes={**REGIMES, "repeat4": {"data_budget": 4}})
    with pytest.raises(ValidationError, match="model.vocab_size: must equal data.operand_range"):
        config(every_run(range(1)), model={"vocab_size": 50, "max_len": 2})


def history(accs: list[float], every: int = 100) -> pa.Table:
    return pa.table({"step": [every * i for i in range(len(accs))], "test_acc": accs})


def run(regime: str, seed: int, acc: float, status: str = "budget") -> dict:
    return {"regime": regime, "seed": seed, "status": status, "final_test_acc": acc}


def test_steps_to_target_is_the_first_evaluation_at_or_above_it() -> None:
    assert steps_to_target(history([0.1, 0.4, 0.9, 0.85, 1.0]), 0.9) == 200
    assert steps_to_target(history([0.1, 0.4, 0.89]), 0.9) is None


def test_claims_are_paired_over_seeds_and_censored_at_the_budget() -> None:
    cfg = config(every_run(range(3)), recipe={"lr": 0.003, "batch_size": 1, "steps": 400,
                                              "eval_every": 100},
                 data={"operand_range": 40, "modulus": 7, "operation": "mul", "n_train": 420,
                       "n_test": 100, "seed": 0})
    metrics, histories = {}, {}
    # two-set learns at step 100-200, single-use at 300 in seed 0 and never in seeds 1, 2
    curves = {"single_use": [[0.1, 0.1, 0.2, 0.9, 1.0], [0.1] * 5, [0.1, 0.1, 0.2, 0.3, 0.4]],
              "repeat4": [[0.1, 0.1, 0.3, 0.4, 0.95], [0.1, 0.2, 0.3, 0.4, 0.5],
                          [0.1, 0.1, 0.2, 0.6, 0.7]],
              "two_set": [[0.1, 0.9, 1.0, 1.0, 1.0], [0.1, 0.2, 0.95, 1.0, 1.0],
                          [0.1, 0.5, 0.92, 0.97, 0.99]]}
    for regime, per_seed in curves.items():
        for seed, accs in enumerate(per_seed):
            name = f"{regime}-s{seed}"
            metrics[name], histories[name] = run(regime, seed, accs[-1]), history(accs)
    cfg = cfg.model_copy(update={"target_acc": 0.9})
    repeated, faster, better = check_claims(cfg, metrics, histories)
    assert repeated.numbers["by_seed"] == {"0": pytest.approx(-5.0), "1": pytest.approx(40.0),
                                           "2": pytest.approx(30.0)}
    assert repeated.status == "inconclusive"
    # single-use minus two-set steps; seeds 1 and 2 never reach 0.9: counted at step 400
    assert faster.numbers["by_seed"] == {"0": 200, "1": 200, "2": 200}
    assert faster.numbers["steps_to_target_by_run"]["single_use-s1"] is None
    assert better.numbers["by_seed"] == {"0": pytest.approx(0.0), "1": pytest.approx(90.0),
                                         "2": pytest.approx(59.0)}
    # a diverged run drops its seed from every claim that uses it
    metrics["two_set-s2"]["status"] = "diverged"
    _, faster, better = check_claims(cfg, metrics, histories)
    assert faster.numbers["by_seed"]["2"] is None and better.numbers["by_seed"]["2"] is None
    assert faster.numbers["diverged"] == ["two_set-s2"]


def test_tiny_runs_end_to_end() -> None:
    cfg = config(every_run(range(2)))
    dataset = SPEC.synthesize(cfg)
    results = {name: SPEC.train_run(cfg, name, dataset, CPU) for name in cfg.runs}
    for result in results.values():
        m = result.metrics
        assert m["status"] == "budget" and m["steps"] == 20
        assert result.history.column("step").to_pylist() == [0, 5, 10, 15, 20]
        assert 0.0 <= m["final_test_acc"] <= 1.0
    assert results["repeat4-s0"].metrics["repetitions"] == 4  # 160 reads of 40 examples
    assert results["single_use-s0"].metrics["repetitions"] == 1
    again = SPEC.train_run(cfg, "two_set-s1", dataset, CPU)  # deterministic on a CPU
    assert dumps_json(again.metrics) == dumps_json(results["two_set-s1"].metrics)
    metrics_json = {k: json.loads(dumps_json(r.metrics)) for k, r in results.items()}
    summary = summarize(cfg, metrics_json, {k: r.history for k, r in results.items()})
    assert [c.key for c in summary.claims] == list(RULES)
    assert all(c.status in {"reproduced", "not_reproduced", "inconclusive"}
               for c in summary.claims)  # two seeds: every claim has an interval
    data = json.loads(dumps_json(summary.data))
    assert data["regimes"]["repeat4"]["runs"] == ["repeat4-s0", "repeat4-s1"]
    assert len(figures(data, summary.table)) == 1
    (_, columns, rows), = tables(data)
    # the most repeated one-set regime first, single-use last of them, then two-set
    assert [r["regime"] for r in rows] == ["repeat4", "single_use", "two_set"]
    assert rows[1]["data budget"] == "160 (single-use)" and "test acc (%)" in columns
