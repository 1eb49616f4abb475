"""The layer-ID study's report figure: the ID profile per architecture and labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import pyarrow as pa
from matplotlib.figure import Figure

from genlab.report.bands import plot_mean_band
from genlab.studies.layer_id.claims import MODELS, TASKS

STYLE = {"clean": "tab:blue", "random": "tab:red"}
DATASET_NAMES = {"mnist1d": "MNIST-1D", "digits": "digits (8x8)"}


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    rows = table.to_pylist()
    panels = [(task, model) for task in TASKS for model in MODELS
              if any(r.get("task") == task and r.get("model") == model for r in rows)]
    if not panels:
        return []
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, (task, model) in zip(axes[0], panels, strict=True):
        mine = [r for r in rows if r["model"] == model and r["task"] == task]
        names = {r["depth"]: r["layer"] for r in mine}
        # a seed's clean and random runs start from one initialisation: its profile once, grey
        for labels, column, colour, style, label in (
                ("clean", "id_init", "grey", "--", "at initialisation"),
                *((lab, "id_trained", c, "o-", f"trained, {lab} labels")
                  for lab, c in STYLE.items())):
            units: dict[float, list[float]] = {}
            for r in mine:
                if r["labels"] == labels:  # one value per seed at each depth
                    units.setdefault(r["depth"], []).append(r[column])
            plot_mean_band(ax, units, color=colour, label=label, style=style)
        ax.set_xticks(sorted(names), [names[d] for d in sorted(names)], rotation=30,
                      fontsize=7)
        ax.set_title(f"{model.upper()} on {DATASET_NAMES[task]}", fontsize=9)
        ax.set_ylabel("TwoNN intrinsic dimension")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    return [("TwoNN intrinsic dimension of each layer's representation of the test inputs: "
             "the mean over seeds with its 95% interval, after fitting the true labels "
             "(blue) or random ones (red), and at initialisation (grey, dashed: a seed's two "
             "runs share it)",
             fig)]
