"""The double-descent study's summary and claim check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide_units, declare
from genlab.studies.double_descent.settings import (
    CITATION,
    NAME,
    DoubleDescentClaims,
    DoubleDescentConfig,
)

CLAIMS = declare(NAME, CITATION, {
    "peak_location": ("Test error of the minimum-norm fit peaks at the interpolation threshold "
                      "P ≈ N",
                      "per seed (its own features and training draw), the P of the largest "
                      "test MSE over N; the mean over seeds judged by the rule"),
    "peak_height": ("The peak is an order of magnitude above the error on either side",
                    "per seed, log10 of the smaller of peak / MSE(P = N/4) and peak / "
                    "MSE(P = 8N); the mean over seeds judged by the rule"),
})


def seed_statistics(mse: Mapping[int, float], n_train: int) -> dict[str, float | None]:
    """One seed's peak location P*/N and log10 of its height over the far ends of the sweep
    (None where the sweep lacks P = N/4 or P = 8N)."""
    peak = max(mse, key=lambda p: mse[p])
    ends = [n_train // 4, 8 * n_train]
    height = None
    if n_train % 4 == 0 and all(p in mse for p in ends):
        height = float(np.log10(min(mse[peak] / mse[p] for p in ends)))
    return {"location": peak / n_train, "log10_height": height}


def check_claims(mse_by_seed: Mapping[int, Mapping[int, float]], n_train: int,
                 rules: DoubleDescentClaims) -> list[ClaimResult]:
    stats = {seed: seed_statistics(mse, n_train) for seed, mse in sorted(mse_by_seed.items())}
    numbers = {"N": n_train}
    return [
        decide_units(CLAIMS["peak_location"], rules.peak_location,
                     {s: v["location"] for s, v in stats.items()}, numbers),
        decide_units(CLAIMS["peak_height"], rules.peak_height,
                     {s: v["log10_height"] for s, v in stats.items()}, numbers),
    ]


def summarize(config: DoubleDescentConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    table = stack_histories(histories, metrics)
    by_p: dict[int, dict[str, list[float]]] = {}
    for row in table.to_pylist():
        entry = by_p.setdefault(row["n_features"], {"test_mse": [], "gd_test_mse": []})
        entry["test_mse"].append(row["test_mse"])
        entry["gd_test_mse"].append(row["gd_test_mse"])
    mean = {p: float(np.mean(v["test_mse"])) for p, v in sorted(by_p.items())}
    mean_gd = {p: float(np.mean(v["gd_test_mse"])) for p, v in sorted(by_p.items())}
    mse_by_seed: dict[int, dict[int, float]] = {}
    for row in table.to_pylist():
        mse_by_seed.setdefault(int(metrics[row["run"]]["seed"]), {})[row["n_features"]] = \
            row["test_mse"]
    claims = check_claims(mse_by_seed, config.data.n_train, config.claims)
    peak_gd = max(mean_gd.values())
    data = {"study": NAME, "n_train": config.data.n_train,
            "mean_test_mse_by_n_features": {str(p): v for p, v in mean.items()},
            "mean_gd_test_mse_by_n_features": {str(p): v for p, v in mean_gd.items()},
            # reported, not claimed: Advani & Saxe predict early stopping flattens the peak
            "early_stopping": {"peak_min_norm": max(mean.values()), "peak_early_stopped": peak_gd,
                               "flattening_factor": max(mean.values()) / peak_gd},
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(claims), table=table)
