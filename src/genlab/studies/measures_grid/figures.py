"""The measures-grid study's report figures."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
from matplotlib.figure import Figure

from genlab.studies.measures_grid.claims import HYPERPARAMETERS, measure_value

TOP_SCATTER = 4
TABLE_ROWS = 12


def _table_figure(rows: Sequence[Mapping[str, Any]], data: Mapping[str, Any]) -> tuple[str, Figure]:
    """The head of the ranking as a table: τ, Ψ, each ψ_i and the CMI score."""
    def cell(value: Any) -> str:
        return "–" if value is None or (isinstance(value, float) and math.isnan(value)) \
            else f"{value:+.2f}" if isinstance(value, float) else str(value)

    header = ["measure", "τ", "Ψ", *(f"ψ {h}" for h in HYPERPARAMETERS), "CMI", "given", "n"]
    body = [[r["measure"], cell(r["tau"]), cell(r["psi"]),
             *(cell(r[f"psi_{h}"]) for h in HYPERPARAMETERS),
             f"{r['cmi']:.3f}" if not math.isnan(r["cmi"]) else "–", r["cmi_conditioning"],
             str(r["n_models"])] for r in rows]
    fig, ax = plt.subplots(figsize=(8.5, 0.26 * len(rows) + 0.6))
    ax.axis("off")
    table = ax.table(cellText=body, colLabels=header, loc="center", cellLoc="right")
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    table.auto_set_column_width(list(range(len(header))))
    fig.tight_layout()
    return (f"The {len(rows)} measures with the highest Ψ over {data['n_included']} models: "
            "Kendall τ with the gap, granulated Ψ and each ψ_i (– where the grid does not vary "
            "that hyperparameter), the conditional-MI score and the hyperparameters it "
            "conditions on at its minimum", fig)


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    rows = [r for r in table.to_pylist() if r.get("psi") is not None
            and not (math.isnan(r["tau"]) and math.isnan(r["psi"]))]
    out: list[tuple[str, Figure]] = []
    if not rows:
        return out
    fig, ax = plt.subplots(figsize=(7, 0.22 * len(rows) + 1.2))
    y = np.arange(len(rows))
    ax.barh(y - 0.2, [r["oriented_tau"] for r in rows], height=0.4, label="sign·τ",
            color="tab:blue")
    ax.barh(y + 0.2, [r["oriented_psi"] for r in rows], height=0.4, label="sign·Ψ",
            color="tab:orange")
    ax.set_yticks(y, [r["measure"] + (" (−)" if r["sign"] < 0 else "") for r in rows],
                  fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set_xlabel("rank correlation with the gap (> 0: as the measure's paper predicts)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    out.append((f"Kendall τ and granulated Ψ of every measure with the generalization gap, "
                f"{data['n_included']} models ({data['n_excluded']} excluded); ordered by Ψ; "
                "(−): a measure predicted to fall as the gap grows, shown sign-flipped", fig))

    out.append(_table_figure(rows[:TABLE_ROWS], data))
    top = [r["measure"] for r in rows if not math.isnan(r["oriented_psi"])][:TOP_SCATTER]
    included = {n: m for n, m in data["runs"].items() if m["included"]}
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
        out.append((f"The generalization gap against each of the top {len(top)} measures by Ψ, "
                    "one point per included model", fig))
    return out
