"""The full_batch_gd study's summary and the claims checked on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide_units, declare, paired_differences
from genlab.studies.full_batch_gd.settings import CITATION, NAME, FullBatchConfig
from genlab.studies.intervals import mean_interval

CLAIMS = declare(NAME, CITATION, {
    "plain_gd_worse": (
        "Plain full-batch gradient descent generalizes worse than small-batch SGD",
        "per seed, the SGD baseline's final test accuracy minus plain full-batch GD's (no "
        "clipping, no penalty), in percentage points; the same data draw and initialisation"),
    "penalty_matches_sgd": (
        "Full-batch GD with gradient clipping and an explicit gradient-norm penalty reaches the "
        "test accuracy of small-batch SGD",
        "per seed, the SGD baseline's final test accuracy minus that of full-batch GD with "
        "clipping and the penalty, in percentage points; reproduced when the 95% interval lies "
        "inside the stated margin"),
    "penalty_helps": (
        "Clipping and the gradient-norm penalty close (part of) full-batch GD's gap to SGD",
        "per seed, the final test accuracy of full-batch GD with clipping and the penalty minus "
        "plain full-batch GD's, in percentage points"),
})


def fitted(m: Mapping[str, Any], min_train_acc: float) -> bool:
    """Whether a run ended trained: not diverged, final training accuracy ≥ ``min_train_acc``."""
    return m["status"] != "diverged" and float(m["final_train_acc"]) >= min_train_acc


def accuracies(metrics: Mapping[str, Mapping[str, Any]], min_train_acc: float
               ) -> dict[str, dict[int, float | None]]:
    """recipe -> seed -> final test accuracy (%), None for a run that diverged or did not fit
    its training set."""
    out: dict[str, dict[int, float | None]] = {}
    for m in metrics.values():
        value = round(100.0 * float(m["final_test_acc"]), 6) if fitted(m, min_train_acc) else None
        out.setdefault(m["recipe"], {})[int(m["seed"])] = value
    return {recipe: dict(sorted(seeds.items())) for recipe, seeds in sorted(out.items())}


def left_out(metrics: Mapping[str, Mapping[str, Any]], min_train_acc: float) -> list[str]:
    """The runs the claims leave out, by name."""
    return sorted(n for n, m in metrics.items() if not fitted(m, min_train_acc))


def check_claims(config: FullBatchConfig, metrics: Mapping[str, Mapping[str, Any]]
                 ) -> list[ClaimResult]:
    acc = accuracies(metrics, config.min_train_acc)
    c = config.compare
    pairs = {"plain_gd_worse": (c.sgd, c.plain), "penalty_matches_sgd": (c.sgd, c.penalised),
             "penalty_helps": (c.penalised, c.plain)}
    numbers = {"dataset": "mnist1d", "sgd": c.sgd, "plain": c.plain, "penalised": c.penalised,
               "min_train_acc": config.min_train_acc,
               "left_out": left_out(metrics, config.min_train_acc),
               "test_acc_by_recipe": {r: {str(s): v for s, v in seeds.items()}
                                      for r, seeds in acc.items()},
               "final_train_acc_by_run": {n: m["final_train_acc"]
                                          for n, m in sorted(metrics.items())}}
    return [decide_units(CLAIMS[key], getattr(config.claims, key),
                         paired_differences(acc.get(a, {}), acc.get(b, {})),
                         {**numbers, "minuend": a, "subtrahend": b})
            for key, (a, b) in pairs.items()]


def summarize(config: FullBatchConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    acc = accuracies(metrics, config.min_train_acc)
    estimates = {recipe: mean_interval([v for v in seeds.values() if v is not None]).to_json()
                 for recipe, seeds in acc.items() if any(v is not None for v in seeds.values())}
    data = {"study": NAME, "compare": config.compare.model_dump(),
            "recipes": {name: r.model_dump() for name, r in config.recipes.items()},
            "test_acc": {r: {str(s): v for s, v in seeds.items()} for r, seeds in acc.items()},
            "test_acc_estimate": estimates, "min_train_acc": config.min_train_acc,
            "left_out": left_out(metrics, config.min_train_acc),
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    table = stack_histories(histories, metrics, ("recipe", "seed"))
    return Summary(data=data, claims=tuple(check_claims(config, metrics)), table=table)
