"""The measures-grid study's report figures."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
from matplotlib.figure import Figure

from genlab.studies.measures_grid.claims import measure_value

TOP_SCATTER = 4


TASK_LABEL = {"teacher": "teacher task", "mnist1d": "MNIST-1D", "mnist1d_cnn": "MNIST-1D, CNNs"}


def _defined(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _with_interval(row: Mapping[str, Any], key: str) -> str:
    """``+0.41 [+0.30, +0.52]``; – where undefined, no brackets where the bootstrap is."""
    value = row.get(key)
    if not _defined(value):
        return "–"
    lo, hi = row.get(f"{key}_lo"), row.get(f"{key}_hi")
    text = f"{value:+.2f}" if key != "cmi" else f"{value:.3f}"
    if _defined(lo) and _defined(hi):
        text += (f" [{lo:+.2f}, {hi:+.2f}]" if key != "cmi" else f" [{lo:.3f}, {hi:.3f}]")
    return text


def tables(data: Mapping[str, Any]) -> list[tuple[str, tuple[str, ...], list[dict[str, Any]]]]:
    """Each task's full ranking: every measure's τ, Ψ and CMI score with their bootstrap
    intervals over models, each ψ_i, and the models it is defined on."""
    out = []
    for task in data.get("tasks", []):
        condition = data["conditions"][task]
        varied = condition["hyperparameters_varied"]
        columns = ("measure", "sign", "τ [95%]", "Ψ [95%]", "CMI [95%]", "CMI given",
                   *(f"ψ {h}" for h in varied), "n")
        rows = []
        for r in condition["ranking"]:
            rows.append({"measure": r["measure"], "sign": "−" if r["sign"] < 0 else "+",
                         "τ [95%]": _with_interval(r, "tau"), "Ψ [95%]": _with_interval(r, "psi"),
                         "CMI [95%]": _with_interval(r, "cmi"),
                         "CMI given": r["cmi_conditioning"],
                         **{f"ψ {h}": (f"{r[f'psi_{h}']:+.2f}" if _defined(r[f"psi_{h}"])
                                       else "–") for h in varied},
                         "n": r["n_models"]})
        out.append((
            f"{TASK_LABEL.get(task, task)}: every measure ranked against the gap over "
            f"{condition['n_included']} models ({condition['n_excluded']} excluded), ordered by "
            "sign·Ψ. τ and Ψ as measured (sign −: the measure's paper predicts it falls as the "
            "gap grows); CMI: Jiang et al.'s conditional-mutual-information score, minimised "
            "over conditioning on up to two hyperparameters ('CMI given'). Brackets: 95% "
            f"percentile bootstrap intervals over models ({condition['ranking_resamples']} "
            "resamples), which show how much a number depends on which models the grid held, "
            "not on the data draw (the claims use the seeds for that).", columns, rows))
    return out


def _task_figures(task: str, condition: Mapping[str, Any],
                  runs: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, Figure]]:
    label = TASK_LABEL.get(task, task)
    # summary.json stores NaN as null
    ranking = [{k: math.nan if v is None else v for k, v in r.items()}
               for r in condition["ranking"]]
    rows = [r for r in ranking if not (math.isnan(r["tau"]) and math.isnan(r["psi"]))]
    out: list[tuple[str, Figure]] = []
    if not rows:
        return out
    fig, ax = plt.subplots(figsize=(7, 0.22 * len(rows) + 1.2))
    y = np.arange(len(rows))
    for offset, key, colour, name in ((-0.2, "tau", "tab:blue", "sign·τ"),
                                      (0.2, "psi", "tab:orange", "sign·Ψ")):
        values = np.array([r["sign"] * r[key] for r in rows])
        lo = np.array([r["sign"] * r.get(f"{key}_lo", math.nan) for r in rows])
        hi = np.array([r["sign"] * r.get(f"{key}_hi", math.nan) for r in rows])
        err = np.abs(np.stack([values - np.fmin(lo, hi), np.fmax(lo, hi) - values]))
        ax.barh(y + offset, values, height=0.4, label=name, color=colour,
                xerr=np.nan_to_num(err), error_kw={"elinewidth": 0.6, "capsize": 1.5})
    ax.set_yticks(y, [r["measure"] + (" (−)" if r["sign"] < 0 else "") for r in rows],
                  fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set_xlabel("rank correlation with the gap (> 0: as the measure's paper predicts)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(label, fontsize=9)
    fig.tight_layout()
    out.append((f"{label}: Kendall τ and granulated Ψ of every measure with the generalization "
                f"gap, {condition['n_included']} models ({condition['n_excluded']} excluded), "
                "with 95% bootstrap intervals over models; ordered by Ψ; (−): a measure "
                "predicted to fall as the gap grows, shown sign-flipped", fig))

    top = [r["measure"] for r in rows if not math.isnan(r["oriented_psi"])][:TOP_SCATTER]
    included = {n: m for n, m in runs.items() if m["included"] and m.get("task") == task}
    if top and included:
        fig, axes = plt.subplots(1, len(top), figsize=(3.2 * len(top), 3.0), squeeze=False)
        depths = sorted({m["depth"] for m in included.values()})
        cmap = plt.get_cmap("viridis")
        for ax, name in zip(axes[0], top, strict=False):
            for i, depth in enumerate(depths):
                pts = [(measure_value(m["measures"].get(name)), m["gap"])
                       for m in included.values() if m["depth"] == depth]
                pts = [(x, g) for x, g in pts if math.isfinite(x)]
                ax.scatter([x for x, _ in pts], [g for _, g in pts], s=14, alpha=0.8,
                           color=cmap(i / max(1, len(depths) - 1)), label=f"depth {depth}")
            finite = [measure_value(m["measures"].get(name)) for m in included.values()]
            finite = [x for x in finite if math.isfinite(x)]
            if finite and min(finite) > 0 and max(finite) / min(finite) > 100:
                ax.set_xscale("log")
            row = next(r for r in rows if r["measure"] == name)
            ax.set_title(f"{name}\nτ = {row['tau']:.2f}, Ψ = {row['psi']:.2f}", fontsize=8)
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("gap (train acc − test acc)")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        out.append((f"{label}: the generalization gap against each of the top {len(top)} "
                    "measures by Ψ, one point per included model", fig))
    return out


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    out: list[tuple[str, Figure]] = []
    for task in data.get("tasks", []):
        out += _task_figures(task, data["conditions"][task], data["runs"])
    return out
