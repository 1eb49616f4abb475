"""The edge-of-stability study's summary and claim checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide, declare
from genlab.studies.eos_gd.settings import CITATION, NAME, EoSConfig

# each claim must hold at every step size (and seed): any run not checked leaves it not run
CLAIMS = declare(NAME, CITATION, {
    "sharpening": ("Progressive sharpening: λ_max rises during training",
                   "at every η, max tracked λ_max >= 2.5x its value at initialisation"),
    "edge": ("λ_max reaches 2/η and hovers just above it (the edge of stability)",
             "at every η, after λ_max first crosses 0.9·(2/η): median λ_max/(2/η) in "
             "[0.95, 1.15] and max <= 1.3"),
    "loss": ("Training still makes progress at the edge of stability",
             "at every η, the final train loss is below its value at the crossing"),
})


def check_claims(metrics: Mapping[str, Mapping[str, Any]]) -> list[ClaimResult]:
    runs = sorted(metrics.values(), key=lambda m: (m["lr"], m["seed"]))
    label = {id(m): f"lr={m['lr']:g},seed={m['seed']}" for m in runs}
    alive = [m for m in runs if m["status"] != "diverged"]
    diverged = [label[id(m)] for m in runs if m["status"] == "diverged"]
    sharpening = decide(CLAIMS["sharpening"],
                        [None if m["sharpening"] is None else m["sharpening"] >= 2.5
                         for m in alive] + [False] * len(diverged),
                        {"sharpening": {label[id(m)]: m["sharpening"] for m in alive},
                         "diverged": diverged}, every_unit_checked=True)
    edge_verdicts, edge_numbers, loss_verdicts, loss_numbers = [], {}, [], {}
    for m in alive:
        if m["crossing_step"] is None:
            edge_verdicts.append(False)
            loss_verdicts.append(False)
            edge_numbers[label[id(m)]] = {"crossed": False,
                                          "lambda_final_over_edge": m["lambda_final"]
                                          / m["two_over_lr"]}
            continue
        edge_verdicts.append(0.95 <= m["ratio_median_after"] <= 1.15
                             and m["ratio_max_after"] <= 1.3)
        edge_numbers[label[id(m)]] = {k: m[k] for k in ("crossing_step", "ratio_median_after",
                                                        "ratio_min_after", "ratio_max_after")}
        loss_verdicts.append(m["final_train_loss"] < m["loss_at_crossing"])
        loss_numbers[label[id(m)]] = {"at_crossing": m["loss_at_crossing"],
                                      "final": m["final_train_loss"]}
    diverged_false = [False] * len(diverged)
    return [sharpening,
            decide(CLAIMS["edge"], edge_verdicts + diverged_false,
                   {**edge_numbers, "diverged": diverged}, every_unit_checked=True),
            decide(CLAIMS["loss"], loss_verdicts + diverged_false,
                   {**loss_numbers, "diverged": diverged}, every_unit_checked=True)]


def summarize(config: EoSConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    data = {"study": NAME, "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(check_claims(metrics)),
                   table=stack_histories(histories, metrics, ("lr",)))
