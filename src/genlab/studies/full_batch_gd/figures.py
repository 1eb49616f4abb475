"""The full_batch_gd study's report figures and table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa

from genlab.report.bands import plot_mean_band, units_by_x

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _recipes(data: Mapping[str, Any]) -> list[str]:
    """The SGD baseline first, then the full-batch recipes in name order."""
    sgd = data["compare"]["sgd"]
    return [sgd, *sorted(r for r in data["recipes"] if r != sgd)]


def _final_panel(ax: Any, data: Mapping[str, Any], colours: Mapping[str, Any]) -> None:
    names = _recipes(data)
    sgd = data["test_acc_estimate"].get(data["compare"]["sgd"])
    if sgd is not None:
        ax.axhline(sgd["estimate"], color="black", lw=1, label="SGD baseline (mean)")
    for x, name in enumerate(names):
        seeds = [v for v in data["test_acc"].get(name, {}).values() if v is not None]
        estimate = data["test_acc_estimate"].get(name)
        if estimate is None:
            continue
        ax.plot([x] * len(seeds), seeds, ".", color=colours[name], alpha=0.5)
        mean = estimate["estimate"]
        low, high = estimate["interval"] or (mean, mean)
        ax.errorbar([x], [mean], yerr=[[mean - low], [high - mean]], fmt="o", capsize=4,
                    color=colours[name])
    ax.set_xticks(range(len(names)), names, fontsize=8, rotation=20)
    ax.set_ylabel("final test accuracy (%)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    names = _recipes(data)
    colours = dict(zip(names, plt.cm.tab10(np.arange(len(names)) % 10), strict=True))
    fig, (final, curves) = plt.subplots(1, 2, figsize=(12, 4))
    _final_panel(final, data, colours)
    rows = table.to_pylist()
    for name in names:
        by_step = units_by_x(rows, "step", "test_acc", lambda r, n=name: r["recipe"] == n, 100.0)
        plot_mean_band(curves, by_step, color=colours[name], style="-", label=name)
    curves.set_xlabel("schedule step (SGD: epoch; full-batch GD: gradient step)")
    curves.set_ylabel("test accuracy (%)")
    curves.grid(alpha=0.3)
    curves.legend(fontsize=7)
    fig.tight_layout()
    return [("MNIST-1D CNN trained by small-batch SGD and by full-batch gradient descent "
             "(plain, with the paper's step size, with clipping, with clipping and the "
             "gradient-norm penalty): left, each seed's final test accuracy (dots) and the mean "
             "with its 95% interval over the runs that fitted their training set; right, test "
             "accuracy over training, every run. One SGD epoch and one "
             "full-batch step each pass over the training set once (a penalised step costs "
             "about three passes)", fig)]


def tables(data: Mapping[str, Any]) -> list[tuple[str, tuple[str, ...], list[dict[str, Any]]]]:
    """Each recipe's settings that differ between recipes, and its mean final test accuracy."""
    rows = []
    for name in _recipes(data):
        r = data["recipes"][name]
        row: dict[str, Any] = {
            "recipe": name, "batch": r["batch_size"] if r["stochastic"] else "full",
            "steps": f"{r['steps']} {'epochs' if r['stochastic'] else 'steps'}",
            "peak lr": r["lr"], "clip": r["grad_clip"], "penalty α": r["penalty"], "n": 0,
            "left out": sum(data["runs"][run]["recipe"] == name for run in data["left_out"])}
        estimate = data["test_acc_estimate"].get(name)
        if estimate is not None:
            row["test acc (%)"] = round(estimate["estimate"], 2)
            row["n"] = estimate["n"]
            if estimate["interval"] is not None:
                row["95% interval"] = [round(v, 2) for v in estimate["interval"]]
        rows.append(row)
    columns = ("recipe", "batch", "steps", "peak lr", "clip", "penalty α", "test acc (%)",
               "95% interval", "n", "left out")
    return [("The recipes (Nesterov momentum 0.9, weight decay, linear warm-up then cosine "
             "decay in every one) and their final test accuracy over the seeds whose run fitted "
             f"its training set (final training accuracy ≥ {data['min_train_acc']:g}); left "
             "out: runs that diverged or did not fit, which the claims leave out too",
             columns, rows)]

