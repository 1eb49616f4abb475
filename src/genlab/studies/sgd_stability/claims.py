"""The SGD-stability study's summary and the claims checked on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide, declare
from genlab.studies.sgd_stability.settings import CITATION, NAME, StabilityConfig

CLAIMS = declare(NAME, CITATION, {
    "sgd_trace": ("A minimum SGD (batch 1) converges to has Tr H <= 2/η",
                  "Tr H <= 1.05·(2/η) for every converged SGD run"),
    "gd_lambda": ("A minimum GD converges to has λ_max <= 2/η",
                  "λ_max <= 1.05·(2/η) for every converged GD run"),
    "gd_trace": ("GD is not bound in trace: its minima can have Tr H > 2/η",
                 "Tr H > 2/η for at least one converged GD run"),
})


def check_claims(metrics: Mapping[str, Mapping[str, Any]]) -> list[ClaimResult]:
    def runs(method: str) -> list[Mapping[str, Any]]:
        return sorted((m for m in metrics.values() if m["method"] == method and m["converged"]),
                      key=lambda m: (m["lr"], m["seed"]))

    def label(m: Mapping[str, Any]) -> str:
        return f"lr={m['lr']:g},seed={m['seed']}"

    not_converged = sorted(f"{m['method']}:{label(m)}" for m in metrics.values()
                           if not m["converged"])
    sgd, gd = runs("sgd"), runs("gd")
    out = []
    if not sgd:
        out.append(decide(CLAIMS["sgd_trace"], None, {"reason": "no converged SGD run",
                                                      "not_converged": not_converged}))
    else:
        ratios = {label(m): m["trace_over_edge"] for m in sgd}
        out.append(decide(CLAIMS["sgd_trace"], max(ratios.values()) <= 1.05,
                          {"trace_over_edge": ratios, "not_converged": not_converged}))
    if not gd:
        out += [decide(CLAIMS[k], None, {"reason": "no converged GD run",
                                         "not_converged": not_converged})
                for k in ("gd_lambda", "gd_trace")]
        return out
    lam = {label(m): m["lambda_over_edge"] for m in gd}
    out.append(decide(CLAIMS["gd_lambda"], max(lam.values()) <= 1.05,
                      {"lambda_over_edge": lam, "not_converged": not_converged}))
    tr = {label(m): m["trace_over_edge"] for m in gd}
    out.append(decide(CLAIMS["gd_trace"], max(tr.values()) > 1.0, {"trace_over_edge": tr}))
    return out


def summarize(config: StabilityConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    data = {"study": NAME, "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(check_claims(metrics)),
                   table=stack_histories(histories, metrics))
