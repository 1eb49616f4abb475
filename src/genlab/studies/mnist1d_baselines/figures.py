"""The MNIST-1D baselines study's report figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa

from genlab.claim_rules import Rule
from genlab.report.bands import plot_mean_band, units_by_x
from genlab.studies.mnist1d_baselines.claims import MODELS, VARIANTS, condition

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLOURS = {"logistic": "tab:red", "mlp": "tab:green", "cnn": "tab:blue"}


def _accuracy_panel(ax: Any, data: Mapping[str, Any]) -> None:
    """Each model's test accuracy per variant: seeds as dots, the mean with the 95% interval the
    claim is judged by, and the paper's number with the band the params.yaml rule allows."""
    rule = Rule.parse(data["table_rule"])
    for i, shuffled in enumerate(VARIANTS):
        for j, model in enumerate(MODELS):
            key = condition(model, shuffled)
            x = i * (len(MODELS) + 1) + j
            paper = data["paper_test_acc"][key]
            if rule.op == "within":  # a one-sided rule has no band to draw
                low, high = rule.threshold  # type: ignore[misc]
                ax.add_patch(plt.Rectangle((x - 0.4, paper + low), 0.8, high - low,
                                           color="0.85", linewidth=0))
            ax.plot([x - 0.4, x + 0.4], [paper, paper], color="black", linewidth=1.5,
                    label=f"paper's table (grey: ours − paper {rule})" if x == 0 else None)
            seeds = [v for v in data["test_acc"].get(key, {}).values()
                     if v is not None and np.isfinite(v)]
            estimate = data["test_acc_estimate"].get(key)
            if estimate is None:
                continue
            ax.plot([x] * len(seeds), seeds, ".", color=COLOURS[model], alpha=0.5)
            mean = estimate["estimate"]
            low, high = estimate["interval"] or (mean, mean)
            ax.errorbar([x], [mean], yerr=[[mean - low], [high - mean]], fmt="o",
                        color=COLOURS[model], capsize=4,
                        label=f"{model} (mean ± 95% CI)" if i == 0 else None)
    ticks = [i * (len(MODELS) + 1) + j for i in range(len(VARIANTS)) for j in range(len(MODELS))]
    ax.set_xticks(ticks, [f"{m}\n{condition(None, v)}" for v in VARIANTS for m in MODELS],
                  fontsize=8)
    ax.set_ylabel("final test accuracy (%)")
    ax.set_ylim(0, 100)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    fig, (bars, curves) = plt.subplots(1, 2, figsize=(12, 4))
    _accuracy_panel(bars, data)
    rows = table.to_pylist()
    for model in MODELS:
        for shuffled, style in zip(VARIANTS, ("-", "--"), strict=True):
            by_step = units_by_x(rows, "step", "test_acc", lambda r, m=model, v=shuffled: (
                r["model"] == m and bool(r["shuffle_seq"]) == v), 100.0)
            plot_mean_band(curves, by_step, color=COLOURS[model], style=style,
                           label=condition(model, shuffled))
    curves.set_xlabel("Adam step")
    curves.set_ylabel("test accuracy (%)")
    curves.grid(alpha=0.3)
    curves.legend(fontsize=7)
    fig.tight_layout()
    return [("MNIST-1D test accuracy of the paper's three baselines on the plain and the "
             "spatially shuffled series: left, the final accuracy of each seed (dots) and their "
             "mean with its 95% interval against the paper's table (black line; grey, the "
             "±3-point band of the claim); right, test accuracy over training", fig)]


def tables(data: Mapping[str, Any]) -> list[tuple[str, tuple[str, ...], list[dict[str, Any]]]]:
    """The paper's table and ours side by side: per model and variant, the paper's number, our
    mean over seeds with the 95% interval the claim is judged by, and n."""
    rows = []
    for shuffled in VARIANTS:
        for model in MODELS:
            key = condition(model, shuffled)
            row: dict[str, Any] = {"model": model, "data": f"MNIST-1D, {condition(None, shuffled)}",
                                   "paper (%)": data["paper_test_acc"][key], "n": 0}
            estimate = data["test_acc_estimate"].get(key)
            if estimate is not None:
                row["ours (%)"] = round(estimate["estimate"], 2)
                row["n"] = estimate["n"]
                if estimate["interval"] is not None:
                    row["95% interval"] = [round(v, 2) for v in estimate["interval"]]
            rows.append(row)
    columns = ("model", "data", "paper (%)", "ours (%)", "95% interval", "n")
    return [("Final test accuracy: the MNIST-1D paper's table (one run on its pickled dataset) "
             "and ours (mean over seeds, each its own draw from the package's generator)",
             columns, rows)]
