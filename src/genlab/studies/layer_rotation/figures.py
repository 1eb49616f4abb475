"""The layer_rotation study's report figures: the per-layer rotation curves over training (as
the paper plots them) and test accuracy against the mean layer rotation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
from matplotlib.figure import Figure


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    rows = [r for r in table.to_pylist() if r["mean_rotation"] is not None]
    if not rows:
        return []
    out = []
    seed = min(r["seed"] for r in rows)
    for optimizer in ("sgd", "layca"):
        mine = sorted((r for r in rows if r["optimizer"] == optimizer and r["seed"] == seed),
                      key=lambda r: -r["lr"])
        if not mine:
            continue
        fig, axes = plt.subplots(1, len(mine), figsize=(2.3 * len(mine), 2.8), sharey=True,
                                 squeeze=False)
        for ax, r in zip(axes[0], mine, strict=True):
            curve = data["curves"][r["run"]]
            layers = sorted(k for k in curve if k.startswith("rotation_"))
            colours = plt.cm.viridis(np.linspace(0, 0.9, len(layers)))
            for layer, colour in zip(layers, colours, strict=True):
                ax.plot(curve["step"], curve[layer], color=colour,
                        label=f"layer {int(layer.split('_')[1]) + 1}")
            ax.set_title(f"{'η' if optimizer == 'sgd' else 'ρ'} = {r['lr']:.3g}\n"
                         f"test {100 * r['final_test_acc']:.1f}%", fontsize=8)
            ax.set_xlabel("step", fontsize=8)
            ax.set_ylim(0, 1.1)
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("cosine distance to init")
        axes[0][-1].legend(fontsize=6)
        fig.tight_layout()
        out.append((f"Layer rotation curves with {'SGD' if optimizer == 'sgd' else 'Layca'} "
                    f"(seed {seed}): each layer's cosine distance from its initial weights over "
                    "training, one panel per learning rate (first layer dark)", fig))
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for optimizer, marker in (("sgd", "o"), ("layca", "^")):
        mine = [r for r in rows if r["optimizer"] == optimizer]
        ax.scatter([r["mean_rotation"] for r in mine],
                   [100 * r["final_test_acc"] for r in mine], marker=marker, label=optimizer)
    ax.axvline(data["high"], color="grey", ls=":")
    ax.axvline(data["low"], color="grey", ls=":")
    ax.set_xlabel("mean final layer rotation (cosine distance)")
    ax.set_ylabel("test accuracy (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    out.append(("Test accuracy against the mean layer rotation, every run and seed (dotted: the "
                "low and high thresholds of the Layca claim)", fig))
    return out
