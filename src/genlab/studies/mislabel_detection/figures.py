"""The mislabel-detection study's report figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import pyarrow as pa
from matplotlib.figure import Figure

from genlab.studies.mislabel_detection.experiment import METHODS

LABELS = {"exact": "self-influence, exact GGN", "ekfac": "self-influence, EK-FAC",
          "grad_dot": "‖∇ℓ‖² (TracIn)", "loss": "training loss", "random": "random"}


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    rows = table.to_pylist()
    runs = sorted({r["run"] for r in rows})
    if not runs:
        return []
    flip = float(data.get("flip_fraction", 0.1))
    fig, axes = plt.subplots(1, len(runs), figsize=(4.6 * len(runs), 4), squeeze=False,
                             sharey=True)
    for ax, run in zip(axes[0], runs, strict=True):
        for method in METHODS:
            mine = [r for r in rows if r["run"] == run and r["method"] == method]
            if mine:
                ax.plot([0.0] + [r["checked"] for r in mine], [0.0] + [r["found"] for r in mine],
                        marker=".", label=f"{LABELS[method]} (AUC {mine[0]['auc']:.2f})")
        ax.plot([0, flip, 1], [0, 1, 1], color="grey", linestyle=":", label="perfect")
        ax.set_xlabel("fraction of training data checked")
        ax.set_title(run)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[0, 0].set_ylabel("fraction of flipped labels found")
    fig.tight_layout()
    return [("Finding the flipped labels: inspecting training points in each method's order "
             "(Koh & Liang 2017, Fig. 6)", fig)]
