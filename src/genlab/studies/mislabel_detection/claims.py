"""The mislabel-detection study's summary and claims: each ranking's AUC and detection curve."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from genlab.analyses.influence.detection import CHECKED
from genlab.studies.base import ClaimResult, Summary
from genlab.studies.claims import Claim, decide, decide_units, declare
from genlab.studies.mislabel_detection.settings import (
    CITATION,
    NAME,
    MislabelClaims,
    MislabelConfig,
)

CLAIMS = declare(NAME, CITATION, {
    "self_influence_logistic": (
        "Self-influence ranks mislabelled training points first, for logistic regression",
        "per seed (its own teacher, data and flips), ROC AUC of the exact self-influence "
        "ranking for the flipped labels"),
    "self_influence_mlp": (
        "Self-influence ranks mislabelled training points first, for a network that memorised "
        "them",
        "per seed, ROC AUC of the exact (GGN) self-influence ranking of an MLP at 100% "
        "training accuracy (a seed whose MLP did not memorise the flips is left out, named)"),
    "random": (
        "A random ranking finds the flipped labels at chance",
        "ROC AUC of the random ranking within 0.5 ± 0.1 (mean over runs; one draw's standard "
        "error is √((n+1)/(12·n₊·n₋)), 0.056 at n = 300 with 30 flips)"),
}, controls=("random",))
# a random ranking at chance checks the AUC machinery, not a paper's claim


def auc_of(m: Mapping[str, Any], method: str) -> float:
    """A run's ROC AUC for ``method`` (NaN where undefined)."""
    value = m["methods"][method]["auc"]
    return math.nan if value is None else float(value)


def random_ranking_control(claim: Claim, done: Mapping[str, Mapping[str, Any]],
                           skipped: list[str]) -> ClaimResult:
    """The random ranking at chance: its mean AUC over the runs with rankings within 0.5 ± 0.1
    (shared with mislabel_mnist1d)."""
    if not done:
        return decide(claim, None, {"reason": "no trained run", "skipped": skipped})
    chance = {name: auc_of(m, "random") for name, m in done.items()}
    mean = float(np.mean(list(chance.values())))
    return decide(claim, abs(mean - 0.5) <= 0.1,
                  {"mean_auc_random": mean, "auc_random_by_run": chance})


def check_claims(metrics: Mapping[str, Mapping[str, Any]],
                 rules: MislabelClaims) -> list[ClaimResult]:
    done = {name: m for name, m in sorted(metrics.items()) if "methods" in m}
    skipped = sorted(name for name in metrics if name not in done)
    out = []
    for kind in ("logistic", "mlp"):
        runs = {name: m for name, m in done.items() if m["model"] == kind}
        not_fitted = sorted(name for name, m in runs.items()
                            if kind == "mlp" and not m["interpolates"])
        units = {int(m["seed"]): None if name in not_fitted else auc_of(m, "exact")
                 for name, m in runs.items()}
        loss = {name: auc_of(m, "loss") for name, m in runs.items()}
        exact = {name: auc_of(m, "exact") for name, m in runs.items()}
        numbers: dict[str, Any] = {
            "skipped": skipped, "not_interpolating": not_fitted,
            "auc_loss_by_run": loss,
            "auc_ekfac_by_run": {name: auc_of(m, "ekfac") for name, m in runs.items()},
            "auc_grad_dot_by_run": {name: auc_of(m, "grad_dot") for name, m in runs.items()},
            # reported, not claimed: does influence beat the loss ranking?
            "mean_exact_minus_loss": float(np.mean([exact[n] - loss[n] for n in runs]))
            if runs else None}
        out.append(decide_units(CLAIMS[f"self_influence_{kind}"],
                                getattr(rules, f"self_influence_{kind}"), units, numbers))
    out.append(random_ranking_control(CLAIMS["random"], done, skipped))
    return out


def detection_table(metrics: Mapping[str, Mapping[str, Any]]) -> pa.Table:
    """One row per run, method and fraction checked: the AUC and the fraction of flips found
    (the figure's curves); shared with mislabel_mnist1d."""
    rows = []
    for run, m in sorted(metrics.items()):
        for method, values in m.get("methods", {}).items():
            for checked, found in zip(CHECKED, values["found"], strict=True):
                rows.append({"run": run, "model": m["model"], "seed": m["seed"],
                             "method": method, "auc": auc_of(m, method),
                             "checked": checked, "found": float(found)})
    schema = pa.schema([("run", pa.string()), ("model", pa.string()), ("seed", pa.int64()),
                        ("method", pa.string()), ("auc", pa.float64()),
                        ("checked", pa.float64()), ("found", pa.float64())])
    return pa.Table.from_pylist(rows, schema=schema)


def summarize(config: MislabelConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    data = {"study": NAME, "flip_fraction": config.data.flip_fraction,
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(check_claims(metrics, config.claims)),
                   table=detection_table(metrics))
