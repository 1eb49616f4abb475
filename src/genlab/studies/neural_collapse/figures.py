"""The neural-collapse study's report figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import pyarrow as pa

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    rows = table.to_pylist()
    panels = (("nc1", "NC1 = Tr(Σ_W Σ_B†)/C"), ("nc2_equiangular", "NC2: spread of the cosines"),
              ("nc3", "NC3 = ‖W/‖W‖ − M/‖M‖‖²"), ("nc4", "NC4: NCC disagreement"))
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.6))
    colours = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange")
    for colour, run in zip(colours * 20, sorted({r["run"] for r in rows}), strict=False):
        # log x: the TPT starts early; step 0 (the initialisation) is off the axis
        mine = [r for r in rows if r["run"] == run and r["step"] > 0]
        steps = [r["step"] for r in mine]
        tpt = mine[0]["tpt_step"] if mine else None
        for ax, (column, _) in zip(axes, panels, strict=True):
            ax.plot(steps, [r[column] for r in mine], color=colour, label=run)
            if tpt is not None:
                ax.axvline(tpt, color=colour, linestyle=":", linewidth=1)
    for ax, (column, title) in zip(axes, panels, strict=True):
        # NC4 is exactly 0 once the two rules agree: linear near 0, logarithmic above 1e-3
        if column == "nc4":
            ax.set_yscale("symlog", linthresh=1e-3)
            ax.set_ylim(bottom=0)
        else:
            ax.set_yscale("log")
        ax.set_xscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("SGD step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, title="dotted: TPT start", title_fontsize=7)
    fig.tight_layout()
    return [("Neural collapse of the last hidden layer on the training set; dotted lines mark "
             "the first step at 100% train accuracy (the terminal phase)", fig)]
