"""The double-descent study's report figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import pyarrow as pa
from matplotlib.figure import Figure


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    n = data["n_train"]
    rows = table.to_pylist()
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for run in sorted({r["run"] for r in rows}):
        mine = [r for r in rows if r["run"] == run]
        ax.plot([r["ratio"] for r in mine], [r["test_mse"] for r in mine], color="tab:blue",
                alpha=0.25, linewidth=0.8)
    for key, label, style in (("mean_test_mse_by_n_features", "minimum-norm fit", "-"),
                              ("mean_gd_test_mse_by_n_features",
                               "GD, best validation step", "--")):
        # JSON sorts keys as text ("100" < "25"): order by P before drawing the line
        series = dict(sorted((int(p), v) for p, v in data[key].items()))
        ax.plot([p / n for p in series], list(series.values()), style, color="black"
                if style == "-" else "tab:orange", linewidth=2, label=label + " (mean)")
    ax.axvline(1.0, color="grey", linestyle=":", label="P = N")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("P / N (random features per training point)")
    ax.set_ylabel("test MSE")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    stop = data["early_stopping"]
    caption = ("Test error vs number of random features: each feature draw (thin) and the mean. "
               "Reported, not claimed: gradient descent stopped at its best validation step "
               f"peaks at {stop['peak_early_stopped']:.3g} against {stop['peak_min_norm']:.3g} "
               f"for the minimum-norm fit ({stop['flattening_factor']:.3g}x flatter).")
    return [(caption, fig)]
