"""The double-descent study's summary and claim check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide, declare
from genlab.studies.double_descent.settings import CITATION, NAME, DoubleDescentConfig

CLAIMS = declare(NAME, CITATION, {
    "peak": ("Test error of the minimum-norm fit peaks at the interpolation threshold P ≈ N",
             "the mean test MSE over feature draws peaks at P in [0.9N, 1.1N], and the peak is "
             "> 10x the error at both P = N/4 and P = 8N"),
})


def check_claim(mean_mse: Mapping[int, float], n_train: int) -> ClaimResult:
    widths = sorted(mean_mse)
    peak = max(widths, key=lambda p: mean_mse[p])
    numbers: dict[str, Any] = {"N": n_train, "peak_P": peak, "peak_test_mse": mean_mse[peak]}
    needed = {"P=N/4": n_train // 4, "P=8N": 8 * n_train}
    missing = [name for name, p in needed.items() if p not in mean_mse or n_train % 4]
    if missing:
        return decide(CLAIMS["peak"], None, numbers,
                      reason=f"the sweep has no {', '.join(missing)}")
    for name, p in needed.items():
        numbers[f"test_mse_{name}"] = mean_mse[p]
        numbers[f"peak_over_{name}"] = mean_mse[peak] / mean_mse[p]
    in_window = 0.9 * n_train <= peak <= 1.1 * n_train
    tall = all(numbers[f"peak_over_{name}"] > 10 for name in needed)
    return decide(CLAIMS["peak"], in_window and tall, numbers)


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
    claim = check_claim(mean, config.data.n_train)
    peak_gd = max(mean_gd.values())
    data = {"study": NAME, "n_train": config.data.n_train,
            "mean_test_mse_by_n_features": {str(p): v for p, v in mean.items()},
            "mean_gd_test_mse_by_n_features": {str(p): v for p, v in mean_gd.items()},
            # reported, not claimed: Advani & Saxe predict early stopping flattens the peak
            "early_stopping": {"peak_min_norm": max(mean.values()), "peak_early_stopped": peak_gd,
                               "flattening_factor": max(mean.values()) / peak_gd},
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=(claim,), table=table)
