"""The double-descent study's report figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import pyarrow as pa
from matplotlib.figure import Figure

from genlab.report.bands import plot_mean_band


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    n = data["n_train"]
    rows = table.to_pylist()
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for run in sorted({r["run"] for r in rows}):
        mine = [r for r in rows if r["run"] == run]
        ax.plot([r["ratio"] for r in mine], [r["test_mse"] for r in mine], color="tab:blue",
                alpha=0.25, linewidth=0.8)
    for column, label, colour in (("test_mse", "minimum-norm fit", "black"),
                                  ("gd_test_mse", "GD, best validation step", "tab:orange")):
        units: dict[float, list[float]] = {}
        for r in rows:  # one value per seed (feature and data draw) at each P / N
            units.setdefault(r["n_features"] / n, []).append(r[column])
        plot_mean_band(ax, units, color=colour, label=label, style="-", linewidth=2)
    ax.axvline(1.0, color="grey", linestyle=":", label="P = N")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("P / N (random features per training point)")
    ax.set_ylabel("test MSE")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    stop = data["early_stopping"]
    caption = ("Test error vs number of random features: each seed (thin) and the mean with its "
               "95% interval over seeds. "
               "Reported, not claimed: gradient descent stopped at its best validation step "
               f"peaks at {stop['peak_early_stopped']:.3g} against {stop['peak_min_norm']:.3g} "
               f"for the minimum-norm fit ({stop['flattening_factor']:.3g}x flatter).")
    return [(caption, fig)]
