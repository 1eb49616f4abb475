"""The benign-oscillation study's report figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import pyarrow as pa
from matplotlib.figure import Figure


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    """One row of panels per σ_p (a condition), every seed's curve coloured by its η."""
    rows = table.to_pylist()
    out = []
    for noise in sorted({r["noise_std"] for r in rows}):
        mine_rows = [r for r in rows if r["noise_std"] == noise]
        out.append((f"σ_p = {noise:g}: growth of the weak-feature alignment α_v from "
                    "initialisation (the claim's measure), training loss and weak-only test "
                    "accuracy during training, every seed", _condition(mine_rows, noise)))
    return out


def _condition(rows: list[dict[str, Any]], noise: float) -> Figure:
    lrs = sorted({r["lr"] for r in rows})
    colour = {lr: c for lr, c in zip(lrs, ("tab:blue", "tab:red", "tab:green", "tab:purple"),
                                     strict=False)}
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    panels = (("alpha_v_growth", "α_v − α_v(init)", "symlog"),
              ("train_loss", "training loss", "log"),
              ("test_acc_weak_only", "weak-only test accuracy", "linear"))
    for ax, (key, title, scale) in zip(axes, panels, strict=True):
        for run in sorted({r["run"] for r in rows}):
            mine = [r for r in rows if r["run"] == run and r.get(key) is not None]
            if not mine:
                continue
            lr = mine[0]["lr"]
            ax.plot([r["step"] for r in mine], [r[key] for r in mine], color=colour.get(lr),
                    alpha=0.6, linewidth=0.9,
                    label=f"η = {lr:g}" if mine[0]["seed"] == min(
                        r["seed"] for r in rows if r["lr"] == lr) else None)
        ax.set_title(f"{title} (σ_p = {noise:g})")
        ax.set_xlabel("SGD step")
        if scale == "symlog":
            ax.set_yscale("symlog", linthresh=1e-3)
        else:
            ax.set_yscale(scale)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return fig
