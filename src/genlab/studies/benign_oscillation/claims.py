"""The benign-oscillation study's summary and claim checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.benign_oscillation.settings import CITATION, NAME, BenignOscillationConfig
from genlab.studies.claims import decide, declare

CLAIMS = declare(NAME, CITATION, {
    "alpha_v": ("Large-step SGD learns the weak feature: α_v grows far more than with a small step",
                "mean α_v at the largest η is >= 5x the mean α_v at the smallest η"),
    "weak_acc": ("Only the large-step model classifies weak-feature-only test points",
                 "mean weak-only test accuracy is >= 0.10 higher at the largest η"),
    "strong_acc": ("Both step sizes classify points with the strong feature",
                   "strong-point test accuracy >= 0.99 at both η (every seed's mean)"),
    "oscillation": ("Large-step SGD keeps oscillating instead of converging",
                    "late-phase mean |y·f − 1| on strong training points >= 0.2 at the largest η"),
})


def check_claims(metrics: Mapping[str, Mapping[str, Any]]) -> list[ClaimResult]:
    """Compare the smallest and the largest η over the seeds that did not diverge."""
    by_lr: dict[float, list[Mapping[str, Any]]] = {}
    for m in metrics.values():
        by_lr.setdefault(float(m["lr"]), []).append(m)
    if len(by_lr) < 2:
        return [decide(c, None, {}, reason="needs runs at two step sizes")
                for c in CLAIMS.values()]
    small, large = min(by_lr), max(by_lr)

    def values(lr: float, key: str) -> list[float]:
        return [m[key] for m in by_lr[lr] if m["status"] != "diverged" and m[key] is not None]

    def mean(lr: float, key: str) -> float | None:
        v = values(lr, key)
        return float(np.mean(v)) if v else None

    diverged = {str(lr): sum(m["status"] == "diverged" for m in by_lr[lr]) for lr in (small, large)}
    base = {"eta_small": small, "eta_large": large, "n_diverged": diverged}
    claims = []
    a_small, a_large = mean(small, "alpha_v"), mean(large, "alpha_v")
    per_seed = {str(lr): values(lr, "alpha_v") for lr in (small, large)}
    if a_small is None or a_large is None:
        claims.append(decide(CLAIMS["alpha_v"], None, base, reason="every run diverged"))
    else:
        ratio = a_large / a_small if a_small > 0 else float("inf")
        claims.append(decide(CLAIMS["alpha_v"], ratio >= 5,
                             {**base, "alpha_v_small": a_small, "alpha_v_large": a_large,
                              "ratio": ratio, "alpha_v_per_seed": per_seed}))
    w_small, w_large = mean(small, "test_acc_weak_only"), mean(large, "test_acc_weak_only")
    if w_small is None or w_large is None:
        claims.append(decide(CLAIMS["weak_acc"], None, base,
                             reason="no weak-only test points or every run diverged"))
    else:
        claims.append(decide(CLAIMS["weak_acc"], w_large - w_small >= 0.10,
                             {**base, "weak_acc_small": w_small, "weak_acc_large": w_large,
                              "gap": w_large - w_small,
                              "weak_acc_per_seed": {str(lr): values(lr, "test_acc_weak_only")
                                                    for lr in (small, large)}}))
    strong = {str(lr): mean(lr, "test_acc_strong") for lr in (small, large)}
    if None in strong.values():
        claims.append(decide(CLAIMS["strong_acc"], None, base,
                             reason="no strong test points or every run diverged"))
    else:
        claims.append(decide(CLAIMS["strong_acc"], min(strong.values()) >= 0.99,
                             {**base, "strong_acc": strong}))
    osc = mean(large, "late_oscillation_strong")
    if osc is None:
        claims.append(decide(CLAIMS["oscillation"], None, base, reason="every run diverged"))
    else:
        claims.append(decide(CLAIMS["oscillation"], osc >= 0.2,
                             {**base, "late_oscillation_large": osc,
                              "late_oscillation_small": mean(small, "late_oscillation_strong")}))
    return claims


def summarize(config: BenignOscillationConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    data = {"study": NAME, "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(check_claims(metrics)),
                   table=stack_histories(histories, metrics, ("lr", "seed")))
