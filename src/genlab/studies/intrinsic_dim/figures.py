"""The intrinsic-dimension study's report figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import pyarrow as pa

from genlab.report.bands import plot_mean_band
from genlab.studies.intrinsic_dim.claims import estimate_window

if TYPE_CHECKING:
    from matplotlib.figure import Figure


# The data arrive as the report reads summary.json back: every key is text.
def _numeric_keys(mapping: Mapping[Any, Any]) -> list[tuple[float, Any]]:
    return sorted((float(k), v) for k, v in mapping.items())


def _runs(data: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    """The runs of one kind, as summary.json keeps their metrics (one per seed and setting)."""
    return [m for _, m in sorted((data.get("runs") or {}).items()) if m.get("kind") == kind]


def _figure_estimators(data: Mapping[str, Any]) -> tuple[str, Figure] | None:
    estimates = data.get("estimators") or {}
    if not estimates:
        return None
    embeddings = sorted({e for by_emb in estimates.values() for e in by_emb})
    fig, axes = plt.subplots(1, len(embeddings), figsize=(4.6 * len(embeddings), 3.8),
                             squeeze=False)
    labels = {"twonn": "TwoNN", "mle": "MLE (k - 1, inverse average)",
              "mle_mean": "MLE (k - 2, mean)", "mle_pope": "MLE (Pope et al.'s k - 2)"}
    for ax, embedding in zip(axes[0], embeddings, strict=True):
        dims = sorted({d for by_emb in estimates.values()
                       for d, _ in _numeric_keys(by_emb.get(embedding, {}))})
        ax.plot(dims, dims, color="grey", linestyle=":", label="truth")
        windows = [(d, w) for d in dims if (w := estimate_window(int(d))) is not None]
        ax.vlines([d for d, _ in windows], [w[0] for _, w in windows],
                  [w[1] for _, w in windows], color="grey", linewidth=6, alpha=0.3,
                  label="claimed window")
        for name in sorted(estimates):
            series = _numeric_keys(estimates[name].get(embedding, {}))
            ax.plot([d for d, _ in series], [v for _, v in series], "o-", markersize=4,
                    label=labels.get(name, name))
        ax.set_title(f"{embedding} embedding")
        ax.set_xlabel("true intrinsic dimension d")
        ax.set_ylabel("estimate (seed mean)")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    caption = (f"Estimated vs true intrinsic dimension (MLE k = {data.get('mle_k')}); the grey "
               "bars are the claimed windows (±10% for d ≤ 10, [0.7d, 1.05d] at d = 20).")
    return caption, fig


def _figure_layers(data: Mapping[str, Any]) -> tuple[str, Figure] | None:
    layers = data.get("layers") or {}
    if not layers:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    reference = layers.get("clean") or layers.get("random")
    runs = _runs(data, "layers")

    def by_layer(profiles: list[list[float]]) -> dict[int, list[float]]:
        return {i: [p[i] for p in profiles] for i in range(len(reference["layers"]))}

    plot_mean_band(ax, by_layer([m["id_init"] for m in runs]), color="grey",
                   label="untrained (init)", style="o--")
    for labels, colour, text in (("clean", "tab:blue", "true labels"),
                                 ("random", "tab:red", "random labels")):
        mine = [m["id_trained"] for m in runs if m["labels"] == labels]
        if mine:
            plot_mean_band(ax, by_layer(mine), color=colour, label=f"trained, {text}")
    names = [f"{n}\n({w})" for n, w in zip(reference["layers"], reference["widths"], strict=True)]
    ax.set_xticks(range(len(names)), names, fontsize=7)
    true_dim = (data.get("data") or {}).get("true_intrinsic_dim")
    if true_dim is not None:
        ax.axhline(true_dim, color="black", linestyle=":", linewidth=0.8,
                   label=f"latent dimension ({true_dim})")
    ax.set_ylabel("TwoNN intrinsic dimension (test inputs)")
    ax.set_xlabel("layer (width)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return ("Intrinsic dimension of the representations vs depth (seed means with their 95% "
            "intervals): untrained, trained on true labels, trained on random labels."), fig


def _figure_subspace(data: Mapping[str, Any]) -> tuple[str, Figure] | None:
    subspace = data.get("subspace") or {}
    if not subspace:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    colours = plt.get_cmap("tab10")
    widths = _numeric_keys(subspace)
    parts = []
    for i, (width, entry) in enumerate(widths):
        colour = colours(i % 10)
        units: dict[float, list[float]] = {}
        for m in _runs(data, "subspace"):
            if float(m["width"]) == width:
                for d, acc in m["test_acc_by_d"].items():
                    units.setdefault(float(d), []).append(acc)
        plot_mean_band(ax, units, color=colour,
                       label=f"width {width:g} (D = {entry['n_parameters']:,})")
        ax.axhline(entry["target"], color=colour, linestyle=":", linewidth=0.8)
        parts.append(f"width {width:g}: {entry['d_int90']}")
    ax.set_xscale("log")
    ax.set_xlabel("subspace dimension d")
    ax.set_ylabel("test accuracy")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return (f"Test accuracy of training in a random d-dimensional subspace; dotted: "
            f"{data.get('threshold')} × the full model's. d_int90 by width: "
            f"{', '.join(parts)}."), fig


def _figure_scaling(data: Mapping[str, Any]) -> tuple[str, Figure] | None:
    scaling = data.get("scaling") or {}
    mean_err = scaling.get("mean_test_err") or {}
    if not mean_err:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    floor = scaling["error_floor"]
    cmap = plt.get_cmap("plasma")
    dims = _numeric_keys(mean_err)
    exponents = dict(_numeric_keys(scaling["exponents"]))
    for i, (d, _) in enumerate(dims):
        exponent = exponents[d]["fitted"]
        label = f"d_data = {d:g}" + (f" (slope {exponent:.2f}, law {-1 / d:.2f})"
                                      if exponent is not None else "")
        units: dict[float, list[float]] = {}
        for m in _runs(data, "scaling"):
            if float(m["d_data_true"]) == d:
                for n, err in m["test_err_by_n"].items():
                    units.setdefault(float(n), []).append(err)
        plot_mean_band(ax, units, color=cmap(i / max(1, len(dims))), label=label, floor=floor)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training-set size N")
    ax.set_ylabel("test error")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return ("Test error vs training-set size per intrinsic dimension of the data, with the "
            f"fitted log-log slope beside the law's -1/d_data (errors floored at {floor:g} for "
            "the log)."), fig


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    made = [_figure_estimators(data), _figure_layers(data), _figure_subspace(data),
            _figure_scaling(data)]
    return [f for f in made if f is not None]
