"""The mislabel-detection study's report figures."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import matplotlib.pyplot as plt
import pyarrow as pa
from matplotlib.figure import Figure

from genlab.report.bands import plot_mean_band, units_by_x
from genlab.studies.mislabel_detection.experiment import METHODS

LABELS = {"exact": "self-influence, exact GGN", "ekfac": "self-influence, EK-FAC",
          "grad_dot": "‖∇ℓ‖² (TracIn)", "loss": "training loss", "random": "random"}


def by_model(run: Mapping[str, Any]) -> str:
    """A panel per model."""
    return str(run["model"])


def figures(data: Mapping[str, Any], table: pa.Table,
            panel: Callable[[Mapping[str, Any]], str] = by_model) -> list[tuple[str, Figure]]:
    """The detection curves (Koh & Liang's Fig. 6): one panel per ``panel`` of a run's metrics
    (a model, or a dataset and model), each method's fraction of flips found after checking a
    fraction of the data, as the mean over the panel's seeds with its 95% interval."""
    rows = table.to_pylist()
    runs = data.get("runs", {})
    panels: dict[str, set[str]] = {}
    for run in sorted({r["run"] for r in rows}):
        panels.setdefault(panel(runs.get(run, {"model": run})), set()).add(run)
    if not panels:
        return []
    flip = float(data.get("flip_fraction", 0.1))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4), squeeze=False,
                             sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (name, members) in zip(axes[0], panels.items(), strict=True):
        for color, method in zip(colors, METHODS, strict=False):
            mine = [r for r in rows if r["run"] in members and r["method"] == method]
            if not mine:
                continue
            curve = units_by_x(mine, "checked", "found", lambda _: True)
            curve[0.0] = [0.0] * len(members)
            aucs = {r["run"]: r["auc"] for r in mine}
            plot_mean_band(ax, curve, color=color, style=".-",
                           label=f"{LABELS[method]}, AUC {sum(aucs.values()) / len(aucs):.2f}")
        ax.plot([0, flip, 1], [0, 1, 1], color="grey", linestyle=":", label="perfect")
        ax.set_xlabel("fraction of training data checked")
        ax.set_title(name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="lower right")
    axes[0, 0].set_ylabel("fraction of flipped labels found")
    fig.tight_layout()
    return [("Finding the flipped labels: inspecting training points in each method's order "
             "(Koh & Liang 2017, Fig. 6), mean over seeds with its 95% interval", fig)]
