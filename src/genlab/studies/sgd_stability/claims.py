"""The SGD-stability study's summary and the claims checked on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide_units, declare
from genlab.studies.sgd_stability.settings import (
    CITATION,
    NAME,
    StabilityClaims,
    StabilityConfig,
)

CLAIMS = declare(NAME, CITATION, {
    "sgd_trace": ("A minimum SGD (batch 1) converges to has Tr H <= 2/η",
                  "per seed, the largest Tr H·η/2 over its converged SGD runs (every η)"),
    "gd_lambda": ("A minimum GD converges to has λ_max <= 2/η",
                  "per seed, the largest λ_max·η/2 over its converged GD runs"),
    "gd_trace": ("GD is not bound in trace: its minima can have Tr H > 2/η",
                 "per seed, Tr H·η/2 of the GD run at the largest η that converged"),
})


def _seed_statistics(runs: list[Mapping[str, Any]]) -> dict[str, float | None]:
    """One seed's statistic for each claim from its converged runs (None without one)."""
    sgd = [m for m in runs if m["method"] == "sgd" and m["converged"]]
    gd = sorted((m for m in runs if m["method"] == "gd" and m["converged"]),
                key=lambda m: m["lr"])
    return {"sgd_trace": max((m["trace_over_edge"] for m in sgd), default=None),
            "gd_lambda": max((m["lambda_over_edge"] for m in gd), default=None),
            "gd_trace": gd[-1]["trace_over_edge"] if gd else None}


def check_claims(metrics: Mapping[str, Mapping[str, Any]],
                 rules: StabilityClaims) -> list[ClaimResult]:
    by_seed: dict[int, list[Mapping[str, Any]]] = {}
    for m in metrics.values():
        by_seed.setdefault(int(m["seed"]), []).append(m)
    stats = {seed: _seed_statistics(runs) for seed, runs in sorted(by_seed.items())}
    not_converged = sorted(f"{m['method']}:lr={m['lr']:g},seed={m['seed']}"
                           for m in metrics.values() if not m["converged"])
    detail = {f"{m['method']}:lr={m['lr']:g},seed={m['seed']}": {
        "trace_over_edge": m["trace_over_edge"], "lambda_over_edge": m["lambda_over_edge"]}
        for m in sorted(metrics.values(), key=lambda m: (m["method"], m["lr"], m["seed"]))
        if m["converged"]}
    numbers = {"not_converged": not_converged, "converged_runs": detail}
    return [decide_units(CLAIMS[key], getattr(rules, key),
                         {seed: v[key] for seed, v in stats.items()}, numbers)
            for key in CLAIMS]


def summarize(config: StabilityConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    data = {"study": NAME, "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(check_claims(metrics, config.claims)),
                   table=stack_histories(histories, metrics))
