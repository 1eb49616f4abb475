"""The influence study's report figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
from matplotlib.figure import Figure

from genlab.studies.influence.experiment import METHODS

LABELS = {"exact": "exact (GGN)", "exact_hessian": "exact (Hessian)", "cg": "CG", "lissa": "LiSSA",
          "ekfac": "EK-FAC", "grad_dot": "grad-dot", "random": "random"}


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    rows = table.to_pylist()
    runs = sorted({r["run"] for r in rows})
    out: list[tuple[str, Figure]] = []
    if not runs:
        return out
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    metrics = (("loo_warm_pearson", "Pearson with warm-started LOO"),
               ("loo_scratch_pearson", "Pearson with LOO from scratch"), ("lds", "LDS"))
    fig, axes = plt.subplots(1, len(metrics), figsize=(13, 3.8), sharey=True)
    width = 0.8 / len(runs)
    for ax, (key, title) in zip(axes, metrics, strict=True):
        for j, run in enumerate(runs):
            values = {r["method"]: r[key] for r in rows if r["run"] == run}
            ax.bar(np.arange(len(methods)) + j * width, [values.get(m, np.nan) for m in methods],
                   width, label=run)
        ax.set_xticks(np.arange(len(methods)) + 0.4 - width / 2)
        ax.set_xticklabels([LABELS[m] for m in methods], rotation=45, ha="right", fontsize=8)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_title(title)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("correlation")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    out.append(("Every method against the ground truths, side by side (higher is better)", fig))

    scatter = data.get("loo_scatter", {})
    if scatter:
        fig, axes = plt.subplots(1, len(scatter), figsize=(4.5 * len(scatter), 4), squeeze=False)
        for ax, (run, pairs) in zip(axes[0], sorted(scatter.items()), strict=True):
            measured = np.asarray(pairs["measured"], dtype=float)
            for method, marker in (("exact", "o"), ("ekfac", "^"), ("grad_dot", "x")):
                predicted = np.asarray(pairs[method], dtype=float)
                if method == "grad_dot":  # no curvature: another scale; fit it for display
                    scale = (predicted @ measured) / max(predicted @ predicted, 1e-300)
                    predicted = predicted * scale
                ax.scatter(measured, predicted, s=6, marker=marker, alpha=0.5,
                           label=LABELS[method] + (" (rescaled)" if method == "grad_dot" else ""))
            lim = np.nanmax(np.abs(measured)) if measured.size else 1.0
            ax.plot([-lim, lim], [-lim, lim], color="grey", linestyle=":")
            ax.set_xlabel("measured change of test loss (warm-started LOO)")
            ax.set_ylabel("predicted −I/n")
            ax.set_title(run)
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
        fig.tight_layout()
        out.append(("Leave-one-out: predicted against measured test-loss changes, every (test "
                    "point, removed point) pair", fig))

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for j, run in enumerate(runs):
        values = {r["method"]: r["seconds"] for r in rows if r["run"] == run}
        ax.bar(np.arange(len(methods)) + j * width, [values.get(m, np.nan) for m in methods],
               width, label=run)
    ax.set_xticks(np.arange(len(methods)) + 0.4 - width / 2)
    ax.set_xticklabels([LABELS[m] for m in methods], rotation=45, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("wall time (s)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    out.append(("Cost of each method (all test × train scores, one CPU thread)", fig))

    examples = data.get("examples", {})
    panels = [(run, ex) for run, exs in sorted(examples.items()) for ex in exs]
    if panels:
        fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.6 * len(panels)), squeeze=False)
        for ax, (run, ex) in zip(axes[:, 0], panels, strict=True):
            items = ex["proponents"] + ex["opponents"][::-1]
            y = np.arange(len(items))
            ax.barh(y, [-it["exact"] for it in items], color=["tab:green"] * len(ex["proponents"])
                    + ["tab:red"] * len(ex["opponents"]), label="exact")
            ax.scatter([-it["ekfac"] for it in items if it.get("ekfac") is not None],
                       [k for k, it in enumerate(items) if it.get("ekfac") is not None],
                       marker="^", color="black", zorder=3, label="EK-FAC")
            warm = [(k, it["loo_warm"]) for k, it in enumerate(items)
                    if it.get("loo_warm") is not None]
            if warm:
                ax.scatter([-v for _, v in warm], [k for k, _ in warm], marker="*", s=60,
                           color="tab:blue", zorder=3, label="measured (LOO)")
            ax.set_yticks(y)
            ax.set_yticklabels([f"train {it['train_id']}" for it in items], fontsize=7)
            ax.axvline(0, color="grey", linewidth=0.8)
            ax.set_title(f"{run}, test point {ex['test_id']}: top proponents (green: removing "
                         "them raises its loss) and opponents (red)", fontsize=9)
            ax.set_xlabel("−I  (n × predicted change of the test loss on removal)")
            ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        out.append(("Top proponents and opponents of the test points with the highest loss", fig))
    return out
