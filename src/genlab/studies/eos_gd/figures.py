"""The edge-of-stability study's report figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import pyarrow as pa
from matplotlib.figure import Figure


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    rows = table.to_pylist()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    colours = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange")
    for colour, run in zip(colours * 20, sorted({r["run"] for r in rows}), strict=False):
        mine = [r for r in rows if r["run"] == run]
        lr = mine[0]["lr"]
        steps = [r["step"] for r in mine]
        left.plot(steps, [r["lambda_max"] for r in mine], color=colour, label=f"λ_max, η = {lr:g}")
        left.axhline(2.0 / lr, color=colour, linestyle="--", linewidth=1, label=f"2/η = {2 / lr:g}")
        right.plot(steps, [r["train_loss"] for r in mine], color=colour, label=f"η = {lr:g}")
    left.set_title("sharpness λ_max vs 2/η")
    right.set_title("training loss")
    right.set_yscale("log")
    for ax in (left, right):
        ax.set_xlabel("GD step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return [("Full-batch GD: sharpness rises to 2/η and hovers there while the loss falls", fig)]
