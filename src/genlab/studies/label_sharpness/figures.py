"""The label_sharpness study's report figures and table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa

from genlab.report.bands import plot_mean_band

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MARKERS = {"waves": "o", "mnist1d": "s", "digits": "^"}


def _colour(row: Mapping[str, Any]) -> Any:
    if row["task"] != "waves":
        return "black" if row["task"] == "mnist1d" else "grey"
    return plt.cm.viridis({2: 0.0, 4: 0.45, 8: 0.9}.get(row["intrinsic_dim"], 0.6))


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    fig, (curves, robust, dims) = plt.subplots(1, 3, figsize=(15, 4.2))
    runs = data["runs"]
    for name, row in data["datasets"].items():
        if row["task"] != "waves":
            continue
        by_n: dict[float, list[float]] = {}
        for m in runs.values():
            if m["dataset"] == name and m["status"] != "diverged":
                for model in m["models"]:
                    by_n.setdefault(model["n_train"], []).append(model["test_loss"])
        plot_mean_band(curves, by_n, color=_colour(row),
                       style="o-" if row["frequency"] == min(
                           r["frequency"] for r in data["datasets"].values()
                           if r["task"] == "waves") else "s--",
                       label=name, floor=1e-4)
    curves.set_xscale("log")
    curves.set_yscale("log")
    curves.set_xlabel("training set size N")
    curves.set_ylabel("test cross-entropy")
    curves.legend(fontsize=6)
    for name, row in data["datasets"].items():
        robust.scatter(row["label_sharpness"], row["robust_acc"], color=_colour(row),
                       marker=MARKERS[row["task"]], s=18, label=name)
        dims.scatter(row["d_data"], row["d_repr"], color=_colour(row),
                     marker=MARKERS[row["task"]], s=18)
    robust.set_xscale("log")
    robust.set_xlabel("label sharpness K_F (training set, inputs at RMS 1)")
    robust.set_ylabel(f"test accuracy under PGD, eps = {data['epsilon']:g}")
    robust.legend(fontsize=5, ncol=2)
    top = max(max(r["d_data"] + r["d_repr"]) for r in data["datasets"].values()) * 1.1
    dims.plot([0, top], [0, top], color="black", lw=0.8, ls=":", label="d_repr = d_data")
    dims.set_xlabel("d_data (TwoNN, training inputs)")
    dims.set_ylabel("d_repr (TwoNN, last hidden layer)")
    dims.legend(fontsize=7)
    for ax in (curves, robust, dims):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return [("Left: test loss against training set size on the synthetic datasets (colour: "
             "dimension d; circles the lowest frequency, squares the others), mean over seeds "
             "with its 95% interval, log-log: the law's exponent is the slope. Middle: accuracy "
             "under the attack against the training set's label sharpness, one point per "
             "dataset and seed (circles synthetic, squares MNIST-1D pairs, triangles digits "
             "pairs). Right: the last hidden layer's intrinsic dimension against the inputs', "
             "every dataset and seed at its largest train size", fig)]


def _mean(values: list[Any]) -> float | None:
    finite = [v for v in values if v is not None and np.isfinite(v)]
    return round(float(np.mean(finite)), 3) if finite else None


def tables(data: Mapping[str, Any]) -> list[tuple[str, tuple[str, ...], list[dict[str, Any]]]]:
    rows = []
    for name, row in data["datasets"].items():
        rows.append({"dataset": name, "seeds": len(row["seeds"]),
                     "K_F": _mean(row["label_sharpness"]), "d_data": _mean(row["d_data"]),
                     "d_repr": _mean(row["d_repr"]), "test acc": _mean(row["test_acc"]),
                     "robust acc": _mean(row["robust_acc"]),
                     "alpha": _mean(row["alpha"]) if row["alpha"] else None})
    columns = ("dataset", "seeds", "K_F", "d_data", "d_repr", "test acc", "robust acc", "alpha")
    return [(f"Each dataset at its largest train size, means over seeds: label sharpness, the "
             f"TwoNN dimensions of the inputs and of the last hidden layer, test accuracy, "
             f"accuracy under PGD at eps = {data['epsilon']:g}, and (synthetic) the exponent "
             "alpha of test loss ~ N^-alpha", columns, rows)]
