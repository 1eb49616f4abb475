"""The deep-double-descent study's report figure: train and test error against width."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import pyarrow as pa
from matplotlib.figure import Figure

from genlab.report.bands import plot_mean_band
from genlab.studies.deep_double_descent.claims import MODELS


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    rows = [r for r in table.to_pylist() if r.get("status") != "diverged"]
    models = [m for m in MODELS if any(r.get("model") == m for r in rows)]
    if not models:
        return []
    fig, axes = plt.subplots(1, len(models), figsize=(4.4 * len(models), 3.4), squeeze=False)
    noise = 100 * float(data["label_noise"])
    for ax, model in zip(axes[0], models, strict=True):
        mine = [r for r in rows if r["model"] == model]
        for column, colour, style, label in (("test_err", "tab:blue", "o-", "test"),
                                             ("train_err", "tab:orange", "s--",
                                              "train (noisy labels)")):
            units: dict[float, list[float]] = {}
            for r in mine:  # one value per seed at each width
                units.setdefault(r["width"], []).append(100 * r[column])
            plot_mean_band(ax, units, color=colour, label=label, style=style)
        thresholds = [w for w in data["thresholds"].get(model, {}).values() if w is not None]
        if thresholds:
            ax.axvline(statistics.median(thresholds), color="grey", ls=":",
                       label="interpolation threshold (median over seeds)")
        ax.axhline(noise * 0.9, color="#aaaaaa", lw=0.8, ls="-.",
                   label=f"wrong training labels ({noise * 0.9:.1f}%)")
        ax.set_xscale("log")
        ax.set_xlabel("width (units per hidden layer)" if model == "mlp"
                      else "width (channels per layer)")
        ax.set_ylabel("classification error (%)")
        ax.set_title(model.upper(), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    return [(f"Deep double descent on MNIST-1D with {noise:.0f}% of the training labels "
             "redrawn: train and test error against width, the mean over seeds with its 95% "
             "interval; the dotted line is the interpolation threshold (the narrowest width "
             "that fits its noisy training set)", fig)]
