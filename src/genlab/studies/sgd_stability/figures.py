"""The SGD-stability study's report figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import pyarrow as pa

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    runs = [m for m in data["runs"].values() if m.get("trace") is not None]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), sharex=True)
    for method, marker in (("sgd", "o"), ("gd", "s")):
        mine = sorted((m for m in runs if m["method"] == method), key=lambda m: m["lr"])
        left.plot([m["lr"] for m in mine], [m["trace_over_edge"] for m in mine],
                  marker=marker, label=method.upper())
        right.plot([m["lr"] for m in mine], [m["lambda_over_edge"] for m in mine],
                   marker=marker, label=method.upper())
    for ax, title in ((left, "Tr H / (2/η)"), (right, "λ_max / (2/η)")):
        ax.axhline(1.0, color="grey", linestyle=":", label="bound")
        ax.set_xscale("log")
        ax.set_xlabel("step size η")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return [("At the end of training: trace and top eigenvalue of the Hessian against 2/η", fig)]
