"""The repetition study's summary and the claims checked on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide_units, declare, paired_differences
from genlab.studies.intervals import mean_interval
from genlab.studies.repetition.settings import CITATION, NAME, RepetitionConfig

CLAIMS = declare(NAME, CITATION, {
    "repetition_beats_single_use": (
        "At a fixed number of training steps, a model trained on a smaller set of repeated "
        "examples outperforms one trained on single-use examples",
        "per seed, the final test accuracy of the repeated data budget minus that of "
        "single-use training (every example read once), in percentage points; the same test "
        "pairs, training stream and initialisation"),
    "two_set_faster": (
        "Two-set training (a small repeated set mixed with single-use examples) learns faster "
        "than single-use training",
        "per seed, the steps single-use training takes to first reach the target test accuracy "
        "minus those two-set training takes (at the evaluation cadence); a run that never "
        "reaches it counts at the budget's last step, which shrinks the difference towards 0"),
    "two_set_better": (
        "Two-set training reaches a higher test accuracy than single-use training at the same "
        "number of steps",
        "per seed, two-set training's final test accuracy minus single-use training's, in "
        "percentage points"),
})


def steps_to_target(history: pa.Table, target: float) -> int | None:
    """The first evaluated step whose test accuracy reaches ``target``; None if none does."""
    for step, acc in zip(history.column("step").to_pylist(),
                         history.column("test_acc").to_pylist(), strict=True):
        if acc is not None and acc >= target:
            return int(step)
    return None


def _by_seed(metrics: Mapping[str, Mapping[str, Any]], regime: str,
             value: Mapping[str, float | None]) -> dict[int, float | None]:
    """seed -> ``value[run]`` over the runs of ``regime``; None for a diverged run."""
    return {int(m["seed"]): None if m["status"] == "diverged" else value[run]
            for run, m in sorted(metrics.items()) if m["regime"] == regime}


def final_accuracy(metrics: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """run -> final test accuracy in percentage points."""
    return {run: round(100.0 * float(m["final_test_acc"]), 6) for run, m in metrics.items()}


def learning_steps(metrics: Mapping[str, Mapping[str, Any]], histories: Mapping[str, pa.Table],
                   target: float) -> dict[str, int | None]:
    """run -> steps to the target test accuracy (None: not reached within the budget)."""
    return {run: steps_to_target(histories[run], target) for run in metrics}


def check_claims(config: RepetitionConfig, metrics: Mapping[str, Mapping[str, Any]],
                 histories: Mapping[str, pa.Table]) -> list[ClaimResult]:
    c = config.compare
    acc = final_accuracy(metrics)
    reached = learning_steps(metrics, histories, config.target_acc)
    # censored at the budget's end: the difference's size is then a lower bound
    steps = {run: config.recipe.steps if s is None else s for run, s in reached.items()}
    numbers = {"single_use": c.single_use, "repeated": c.repeated, "two_set": c.two_set,
               "target_acc": config.target_acc, "step_budget": config.recipe.steps,
               "test_acc_by_run": {r: acc[r] for r in sorted(acc)},
               "steps_to_target_by_run": {r: reached[r] for r in sorted(reached)},
               "diverged": sorted(r for r, m in metrics.items() if m["status"] == "diverged")}
    return [
        decide_units(CLAIMS["repetition_beats_single_use"],
                     config.claims.repetition_beats_single_use,
                     paired_differences(_by_seed(metrics, c.repeated, acc),
                                        _by_seed(metrics, c.single_use, acc)), numbers),
        decide_units(CLAIMS["two_set_faster"], config.claims.two_set_faster,
                     paired_differences(_by_seed(metrics, c.single_use, steps),
                                        _by_seed(metrics, c.two_set, steps)), numbers),
        decide_units(CLAIMS["two_set_better"], config.claims.two_set_better,
                     paired_differences(_by_seed(metrics, c.two_set, acc),
                                        _by_seed(metrics, c.single_use, acc)), numbers),
    ]


def summarize(config: RepetitionConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    acc = final_accuracy(metrics)
    reached = learning_steps(metrics, histories, config.target_acc)
    regimes: dict[str, dict[str, Any]] = {}
    for name, regime in config.regimes.items():
        runs = [r for r, m in sorted(metrics.items()) if m["regime"] == name]
        finite = [acc[r] for r in runs if metrics[r]["status"] != "diverged"]
        regimes[name] = {
            **regime.model_dump(), "repetitions": regime.repetitions(config.recipe),
            "runs": runs, "n_reached_target": sum(reached[r] is not None for r in runs),
            "test_acc": mean_interval(finite).to_json() if finite else None}
    data = {"study": NAME, "compare": config.compare.model_dump(),
            "target_acc": config.target_acc, "step_budget": config.recipe.steps,
            "examples_read": config.recipe.examples_read, "regimes": regimes,
            "steps_to_target": {r: reached[r] for r in sorted(reached)},
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    table = stack_histories(histories, metrics, ("regime", "seed"))
    return Summary(data=data, claims=tuple(check_claims(config, metrics, histories)),
                   table=table)
