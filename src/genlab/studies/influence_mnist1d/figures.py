"""The influence_mnist1d study's report figures and its LDS table beside dattri's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
from matplotlib.figure import Figure

from genlab.studies.influence_mnist1d.claims import MODELS
from genlab.studies.influence_mnist1d.experiment import METHODS

LABELS = {"exact": "exact (GGN)", "exact_hessian": "exact (Hessian)", "lissa": "LiSSA",
          "ekfac": "EK-FAC", "grad_dot": "grad-dot", "trak": "TRAK (1 model)",
          "random": "random"}


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    estimates = data.get("lds_estimates", {})
    models = [m for m in MODELS if m in estimates]
    if not models:
        return []
    fig, axes = plt.subplots(1, len(models), figsize=(5.2 * len(models), 3.8), squeeze=False,
                             sharey=True)
    reference = data["reference"]["lds"]
    for ax, model in zip(axes[0], models, strict=True):
        methods = [m for m in METHODS if m in estimates[model]]
        x = np.arange(len(methods))
        values = [estimates[model][m]["estimate"] for m in methods]
        low = [v - (estimates[model][m]["interval"] or [v, v])[0] for m, v in zip(methods, values,
                                                                                   strict=True)]
        high = [(estimates[model][m]["interval"] or [v, v])[1] - v for m, v in zip(methods, values,
                                                                                    strict=True)]
        ax.bar(x, values, yerr=[low, high], capsize=3, color="tab:blue", label="ours (MNIST-1D)")
        refs = [(k, reference[model][m]) for k, m in enumerate(methods) if m in reference[model]]
        ax.scatter([k for k, _ in refs], [v for _, v in refs], marker="_", s=300, color="black",
                   zorder=3, label="dattri, MNIST-10 (reference)")
        ax.set_xticks(x)
        ax.set_xticklabels([LABELS[m] for m in methods], rotation=45, ha="right", fontsize=8)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_title("multinomial logistic regression" if model == "logistic" else "tanh MLP",
                     fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("LDS (mean over seeds, 95% interval)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    out = [("Linear datamodeling score of each method on MNIST-1D (bars: mean over seeds with "
            "its 95% interval) and dattri's MNIST-10 figures (black marks, a reference point)",
            fig)]

    rows = table.to_pylist()
    if rows:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        runs = sorted({r["run"] for r in rows})
        methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
        width = 0.8 / len(runs)
        for j, run in enumerate(runs):
            seconds = {r["method"]: r["seconds"] for r in rows if r["run"] == run}
            ax.bar(np.arange(len(methods)) + j * width,
                   [seconds.get(m, np.nan) for m in methods], width, label=run)
        ax.set_xticks(np.arange(len(methods)) + 0.4 - width / 2)
        ax.set_xticklabels([LABELS[m] for m in methods], rotation=45, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("wall time (s)")
        ax.legend(fontsize=6, ncol=2)
        ax.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        out.append(("Cost of each method (all test × train scores, one CPU thread)", fig))
    return out


def tables(data: Mapping[str, Any]) -> list[tuple[str, tuple[str, ...], list[dict[str, Any]]]]:
    """Each method's LDS per model: our mean over seeds with its 95% interval and n, beside
    dattri's MNIST-10 figure where it has one."""
    rows = []
    for model, methods in data.get("lds_estimates", {}).items():
        for method in METHODS:
            estimate = methods.get(method)
            if estimate is None:
                continue
            row = {"model": model, "method": LABELS[method], "data": "MNIST-1D",
                   "LDS (ours)": round(estimate["estimate"], 3), "n": estimate["n"]}
            if estimate["interval"] is not None:
                row["95% interval"] = [round(v, 3) for v in estimate["interval"]]
            if method in data["reference"]["lds"][model]:
                row["dattri, MNIST-10"] = data["reference"]["lds"][model][method]
            rows.append(row)
    columns = ("model", "method", "data", "LDS (ours)", "95% interval", "n", "dattri, MNIST-10")
    return [("Linear datamodeling score per method: ours on MNIST-1D (mean over seeds, each its "
             "own draw) and dattri's on MNIST-10 (" + data["reference"]["note"] + ")",
             columns, rows)]
