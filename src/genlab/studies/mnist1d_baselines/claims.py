"""The MNIST-1D baselines study's summary and the claims checked on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide_units, declare, paired_differences
from genlab.studies.intervals import mean_interval
from genlab.studies.mnist1d_baselines.settings import (
    CITATION,
    NAME,
    BaselineClaims,
    BaselinesConfig,
    variant,
)

MODELS = ("logistic", "mlp", "cnn")
VARIANTS = (False, True)  # shuffle_seq

PAPER_TEST_ACCURACY: dict[tuple[str, bool], float] = {
    ("logistic", False): 32.0, ("mlp", False): 68.0, ("cnn", False): 94.0,
    ("logistic", True): 32.0, ("mlp", True): 68.0, ("cnn", True): 56.0,
}
"""Test accuracy (%) in the MNIST-1D paper's table (README of greydanus/mnist1d; GRU and the
human expert not reproduced here), by (model, shuffled)."""

CLAIMS = declare(NAME, CITATION, {
    "table": ("Each baseline's test accuracy on MNIST-1D matches the paper's table (logistic "
              "32%, MLP 68%, CNN 94%; shuffled: 32%, 68%, 56%)",
              "per seed, the model's final test accuracy minus the paper's number, in "
              "percentage points; one entry per model and variant"),
    "cnn_over_mlp": ("The CNN's spatial prior helps: it beats the MLP on MNIST-1D",
                     "per seed, CNN minus MLP test accuracy on the plain data (the same "
                     "series), in percentage points"),
    "cnn_over_mlp_shuffled": ("Shuffling the positions removes the CNN's advantage: on the "
                              "shuffled variant it falls below the MLP",
                              "per seed, CNN minus MLP test accuracy on the shuffled data, in "
                              "percentage points"),
})


def _accuracy(m: Mapping[str, Any]) -> float | None:
    """A run's final test accuracy in percent; None for a diverged run."""
    # rounded: k / n_test in percent, without the float noise of 100 * 0.545
    return None if m["status"] == "diverged" else round(100.0 * float(m["final_test_acc"]), 6)


def accuracies(metrics: Mapping[str, Mapping[str, Any]]
               ) -> dict[tuple[str, bool], dict[int, float | None]]:
    """(model, shuffled) -> seed -> final test accuracy (%), for every run."""
    out: dict[tuple[str, bool], dict[int, float | None]] = {}
    for m in metrics.values():
        out.setdefault((m["model"], bool(m["shuffle_seq"])), {})[int(m["seed"])] = _accuracy(m)
    return {key: dict(sorted(seeds.items())) for key, seeds in out.items()}


def condition(model: str | None, shuffled: bool) -> str:
    """A claim entry's condition, and the key of the summary's per-condition numbers."""
    return variant(shuffled) if model is None else f"{model}, {variant(shuffled)}"


def accuracy_estimates(acc: Mapping[tuple[str, bool], Mapping[int, float | None]]
                       ) -> dict[str, dict[str, Any]]:
    """condition -> the mean final test accuracy (%) over its seeds with the 95% interval the
    table claim is judged by (the claim shifts both by the paper's number), and n; what the
    report's table and figure show."""
    out = {}
    for (model, shuffled), seeds in sorted(acc.items()):
        measured = [a for a in seeds.values() if a is not None]
        if measured:
            out[condition(model, shuffled)] = mean_interval(measured).to_json()
    return out


def check_claims(metrics: Mapping[str, Mapping[str, Any]],
                 rules: BaselineClaims) -> list[ClaimResult]:
    acc = accuracies(metrics)
    claims = []
    for shuffled in VARIANTS:
        for model in MODELS:
            if (model, shuffled) not in acc:
                continue
            paper = PAPER_TEST_ACCURACY[(model, shuffled)]
            seeds = acc[(model, shuffled)]
            claims.append(decide_units(
                CLAIMS["table"], rules.table,
                {seed: None if a is None else a - paper for seed, a in seeds.items()},
                {"paper_test_acc": paper, "test_acc": {str(s): a for s, a in seeds.items()}},
                condition=condition(model, shuffled)))
    for key, shuffled in (("cnn_over_mlp", False), ("cnn_over_mlp_shuffled", True)):
        if ("cnn", shuffled) in acc or ("mlp", shuffled) in acc:
            claims.append(decide_units(
                CLAIMS[key], getattr(rules, key),
                paired_differences(acc.get(("cnn", shuffled), {}), acc.get(("mlp", shuffled), {})),
                {f"{model}_test_acc": {str(s): a for s, a in acc.get((model, shuffled),
                                                                       {}).items()}
                 for model in ("cnn", "mlp")},
                condition=condition(None, shuffled)))
    return claims


def summarize(config: BaselinesConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    acc = accuracies(metrics)
    data = {"study": NAME,
            "paper_test_acc": {condition(m, s): v for (m, s), v in PAPER_TEST_ACCURACY.items()},
            "table_rule": config.claims.table,
            "test_acc": {condition(m, s): {str(k): v for k, v in seeds.items()}
                         for (m, s), seeds in sorted(acc.items())},
            "test_acc_estimate": accuracy_estimates(acc),
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    table = stack_histories(histories, metrics, ("model", "shuffle_seq", "seed"))
    return Summary(data=data, claims=tuple(check_claims(metrics, config.claims)), table=table)
