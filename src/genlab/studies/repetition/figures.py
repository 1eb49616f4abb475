"""The repetition study's report figures and table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa

from genlab.report.bands import plot_mean_band, units_by_x

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _regimes(data: Mapping[str, Any]) -> list[str]:
    """One-set regimes from the most repeated to single-use, then two-set regimes."""
    regimes = data["regimes"]
    one_set = sorted((r for r in regimes if regimes[r]["repeated_set"] is None),
                     key=lambda r: -regimes[r]["repetitions"])
    return one_set + sorted(r for r in regimes if regimes[r]["repeated_set"] is not None)


def _label(name: str, regime: Mapping[str, Any]) -> str:
    return f"{name} ({regime['repetitions']:.3g}x)"


def _final_panel(ax: Any, data: Mapping[str, Any], colours: Mapping[str, Any]) -> None:
    names = _regimes(data)
    for x, name in enumerate(names):
        runs = data["regimes"][name]["runs"]
        values = [100.0 * data["runs"][r]["final_test_acc"] for r in runs
                  if data["runs"][r]["status"] != "diverged"]
        ax.plot([x] * len(values), values, ".", color=colours[name], alpha=0.6)
        estimate = data["regimes"][name]["test_acc"]
        if estimate is None:
            continue
        mean = estimate["estimate"]
        low, high = estimate["interval"] or (mean, mean)
        ax.errorbar([x], [mean], yerr=[[mean - low], [high - mean]], fmt="o", capsize=4,
                    color=colours[name])
    ax.set_xticks(range(len(names)), [_label(n, data["regimes"][n]) for n in names],
                  fontsize=7, rotation=20)
    ax.set_ylabel(f"test accuracy after {data['step_budget']} steps (%)")
    ax.grid(axis="y", alpha=0.3)


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    names = _regimes(data)
    colours = dict(zip(names, plt.cm.tab10(np.arange(len(names)) % 10), strict=True))
    fig, (final, curves, seen) = plt.subplots(1, 3, figsize=(15, 4))
    _final_panel(final, data, colours)
    rows = table.to_pylist()
    for name in names:
        for run in data["regimes"][name]["runs"]:
            mine = [r for r in rows if r["run"] == run]
            curves.plot([r["step"] for r in mine], [100.0 * r["test_acc"] for r in mine], "-",
                        color=colours[name], lw=0.8, alpha=0.7,
                        label=_label(name, data["regimes"][name])
                        if run == data["regimes"][name]["runs"][0] else None)
        by_step = units_by_x(rows, "step", "seen_acc", lambda r, n=name: r["regime"] == n, 100.0)
        plot_mean_band(seen, by_step, color=colours[name], style="-", label=name)
    curves.axhline(100.0 * data["target_acc"], color="black", lw=0.8, ls=":",
                   label="target accuracy")
    for ax, what in ((curves, "test accuracy, each run"),
                     (seen, "accuracy on the repeated examples")):
        ax.set_xlabel("training step")
        ax.set_ylabel(f"{what} (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    return [("Modular multiplication learned by the same transformer in the same number of "
             "steps from data read in different ways (the label: each repeated example's "
             "average number of reads): left, each seed's test accuracy at the end of the "
             "budget (dots) and the mean with its 95% interval; middle, every run's test "
             "accuracy over training (learning comes as a sudden jump, at a step that varies "
             "from seed to seed); right, the accuracy on the examples each run repeats (its "
             "head of the stream, or its repeated set; single-use: the first examples, read "
             "once), mean over seeds with its 95% interval", fig)]


def tables(data: Mapping[str, Any]) -> list[tuple[str, tuple[str, ...], list[dict[str, Any]]]]:
    """Each regime: how it reads the stream, its final test accuracy and how many of its runs
    reached the target accuracy, and when."""
    rows = []
    for name in _regimes(data):
        regime = data["regimes"][name]
        reached = [data["steps_to_target"][r] for r in regime["runs"]
                   if data["steps_to_target"][r] is not None]
        row: dict[str, Any] = {
            "regime": name, "data budget": regime["data_budget"] or
            (f"{regime['repeated_set']} at p = {regime['repeated_prob']:g} + single-use"
             if regime["repeated_set"] else f"{data['examples_read']} (single-use)"),
            "reads per repeated example": round(regime["repetitions"], 2),
            "runs": len(regime["runs"]),
            "reached target": f"{regime['n_reached_target']} of {len(regime['runs'])}",
            "median steps to target": float(np.median(reached)) if reached else None}
        estimate = regime["test_acc"]
        if estimate is not None:
            row["test acc (%)"] = round(estimate["estimate"], 2)
            if estimate["interval"] is not None:
                row["95% interval"] = [round(v, 2) for v in estimate["interval"]]
        rows.append(row)
    columns = ("regime", "data budget", "reads per repeated example", "test acc (%)",
               "95% interval", "runs", "reached target", "median steps to target")
    return [(f"The regimes, each trained for {data['step_budget']} steps "
             f"({data['examples_read']} examples read): final test accuracy over the seeds "
             f"and how many runs reached {100 * data['target_acc']:g}% test accuracy "
             "(median over those that did)", columns, rows)]
