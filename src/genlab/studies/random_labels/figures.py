"""The random-labels study's report figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import pyarrow as pa
from matplotlib.figure import Figure


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    runs = table.to_pylist()
    noise_levels = sorted({r["label_noise"] for r in runs})
    cmap = plt.get_cmap("viridis")
    colour = {p: cmap(i / max(1, len(noise_levels) - 1)) for i, p in enumerate(noise_levels)}
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for (ax, key, title) in ((axes[0], "train_acc", "train accuracy"),
                             (axes[1], "test_acc", "test accuracy")):
        for run in sorted({r["run"] for r in runs}):
            rows = [r for r in runs if r["run"] == run]
            p = rows[0]["label_noise"]
            ax.plot([r["step"] for r in rows], [r[key] for r in rows], color=colour[p],
                    label=f"p = {p:g}, seed {rows[0]['seed']}")
        ax.set_xlabel("SGD step")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[1].axhline(1.0 / data["n_classes"], color="grey", linestyle=":", label="chance (1/C)")
    axes[0].set_ylabel("accuracy")
    axes[1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return [("Train and test accuracy during training, per label-noise level p", fig)]
