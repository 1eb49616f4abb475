"""The report's view of the post-hoc analyses: the same table and figure for every study.

Each study's summary.json holds ``analyses.<name>.<run>`` (the per-run numbers the analyze stage
wrote) and the aggregate stacks the per-run tables into ``<name>_<table>.parquet``; each
analysis here turns them into one :class:`AnalysisView` (intro, figure, run table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Records = Mapping[str, Mapping[str, Any]]  # run -> the analysis' numbers for it


@dataclass(frozen=True)
class AnalysisView:
    title: str
    intro: str
    figure: Any  # a matplotlib Figure, or None when no run was analysed
    caption: str
    columns: tuple[str, ...]
    rows: list[dict[str, Any]]  # "run" plus one value per column


def _table(records: Records, columns: tuple[tuple[str, str], ...]
           ) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
    """The columns some run has a value in, and one row per run: its numbers, or why the
    analysis skipped it."""
    shown = tuple(col for col, key in columns
                  if any(r.get(key) is not None for r in records.values()))
    rows = []
    for run, record in records.items():
        row = {"run": run, **{col: record.get(key) for col, key in columns}}
        if record.get("status") == "skipped":
            row["status"] = f"skipped: {record.get('reason', '')}"
        rows.append(row)
    return shown, rows


def _analysed(records: Records) -> list[str]:
    return [run for run, r in records.items() if r.get("status") == "done"]


def _colours(runs: list[str]) -> dict[str, Any]:
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("viridis")
    return {run: cmap(i / max(1, len(runs) - 1)) for i, run in enumerate(runs)}


def _rows_of(table: pa.Table, run: str) -> list[dict[str, Any]]:
    return [row for row in table.to_pylist() if row["run"] == run]


# ------------------------------------------------------------------------------------ sharpness

# (column in the run table, key in the per-run record)
SHARPNESS_COLUMNS = (
    ("status", "status"), ("λ_max", "lambda_max"), ("top eigenvalues", "top_eigenvalues"),
    ("trace", "trace"), ("trace s.e.", "trace_stderr"),
    ("(2 + 2β)/η", "threshold"), ("λ_max / threshold", "lambda_over_threshold"),
    ("trace / threshold", "trace_over_threshold"),
    ("worst-case sharpness", "worst_case_sharpness"), ("SAM (1 step)", "sam_sharpness"),
    ("ρ", "worst_case_rho"), ("non-uniformity s", "nonuniformity"),
    ("s·η·√((n−B)/(B(n−1)))", "nonuniformity_ratio"),
    ("examples", "n_examples"), ("parameters", "n_parameters"),
)


def sharpness_figure(records: Records, density: pa.Table, curvature: str) -> Figure | None:
    """Each run's spectral density (log scale, as in Ghorbani et al. 2019) with its
    stability threshold (2 + 2β)/η dotted in the same colour, or, when it lies far beyond every
    spectrum, written at the axis' edge; None if no run was analysed."""
    import matplotlib.pyplot as plt

    runs = _analysed(records)
    if not runs or density.num_rows == 0:
        return None
    colour = _colours(runs)
    fig, ax = plt.subplots(figsize=(10, 3.6))
    eigenvalues = []
    for run in runs:
        rows = _rows_of(density, run)
        eigenvalues += [r["eigenvalue"] for r in rows]
        ax.plot([r["eigenvalue"] for r in rows], [max(r["density"], 1e-12) for r in rows],
                color=colour[run], label=run, linewidth=1)
    # the axis fits the spectra; a threshold far beyond them is written at the right edge, not
    # drawn there (random_labels' 76 squeezed every density into a tenth of the axis)
    low, high = min(eigenvalues, default=0.0), max(eigenvalues, default=1.0)
    span = max(high - low, 1e-12)
    shown_to = high + 0.05 * span
    beyond = []
    for run in runs:
        threshold = records[run]["threshold"]
        if threshold <= high + 0.5 * span:
            ax.axvline(threshold, color=colour[run], linestyle=":", linewidth=1)
            shown_to = max(shown_to, threshold + 0.05 * span)
        else:
            beyond.append(f"{run}: {threshold:.3g}")
    ax.set_xlim(low - 0.05 * span, shown_to)
    if beyond:
        ax.annotate("threshold beyond the axis → " + "; ".join(beyond), xy=(0.99, 0.97),
                    xycoords="axes fraction", ha="right", va="top", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylim(bottom=1e-8)
    ax.set_xlabel(f"eigenvalue of the training-loss {curvature}")
    ax.set_ylabel("density")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def sharpness_view(records: Records, folder: Path, settings: Any) -> AnalysisView:
    from genlab.io import read_parquet

    columns, rows = _table(records, SHARPNESS_COLUMNS)
    return AnalysisView(
        title="Curvature of the trained models",
        intro="Post-hoc, on each model's training loss (the labels it was trained on): top "
              "eigenvalues by Lanczos, trace by Hutch++ with its standard error, spectral density "
              "by stochastic Lanczos quadrature; where set, the worst-case (SAM) sharpness in a "
              "ρ-ball and Wu, Ma & E's non-uniformity s against its SGD bound. The threshold "
              "(2 + 2β)/η is where the run's own optimizer (step size η, momentum β) stops being "
              "stable on a quadratic; dotted in the figure.",
        figure=sharpness_figure(records, read_parquet(folder / "sharpness_density.parquet"),
                                settings.curvature),
        caption="Spectral density of the training-loss curvature per run, with each run's "
                "threshold (2 + 2β)/η dotted",
        columns=columns, rows=rows)


# -------------------------------------------------------------------------------- intrinsic_dim

INTRINSIC_DIM_COLUMNS = (
    ("status", "status"), ("d_data (input ID)", "d_data"), ("input width", "input_width"),
    ("last hidden ID, trained", "last_hidden_trained"),
    ("last hidden ID, init", "last_hidden_init"),
    ("ID per layer, trained", "layer_ids_trained"), ("ID per layer, init", "layer_ids_init"),
    ("label sharpness K_F", "label_sharpness"), ("examples", "n_examples"),
)


def intrinsic_dim_figure(records: Records, layers: pa.Table) -> Figure | None:
    """ID vs depth per run, trained (solid) and at initialisation (dashed)."""
    import matplotlib.pyplot as plt

    runs = _analysed(records)
    if not runs or layers.num_rows == 0:
        return None
    colour = _colours(runs)
    fig, ax = plt.subplots(figsize=(10, 3.6))
    for run in runs:
        rows = _rows_of(layers, run)
        depth = [r["layer"] for r in rows]
        ax.plot(depth, [r["id_trained"] for r in rows], color=colour[run], marker="o",
                label=f"{run} trained")
        ax.plot(depth, [r["id_init"] for r in rows], color=colour[run], linestyle="--",
                linewidth=1, label=f"{run} init")
    names = _rows_of(layers, runs[0])
    ax.set_xticks([r["layer"] for r in names], [r["name"] for r in names])
    ax.set_ylabel("intrinsic dimension")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=3)
    fig.tight_layout()
    return fig


def intrinsic_dim_view(records: Records, folder: Path, settings: Any) -> AnalysisView:
    from genlab.io import read_parquet

    columns, rows = _table(records, INTRINSIC_DIM_COLUMNS)
    estimator = {"twonn": "TwoNN (Facco et al. 2017)",
                 "mle": f"MLE with k = {settings.k}"}[settings.estimator]
    return AnalysisView(
        title="Intrinsic dimension of the representations",
        intro=f"Post-hoc, on the representations of {settings.max_examples or 'all'} training "
              f"inputs: the intrinsic dimension ({estimator}) of the input (d_data), of each "
              "hidden layer and of the output, for the trained model and for the same "
              "architecture at its initialisation (Ansuini et al. 2019: networks that "
              "generalise compress the last hidden layer; untrained and random-label networks "
              "do not). K_F is the label sharpness of the training inputs and the labels the "
              "model was trained on (Konz & Mazurowski 2024), in 1/(input units).",
        figure=intrinsic_dim_figure(records, read_parquet(folder / "intrinsic_dim_layers.parquet")),
        caption="Intrinsic dimension per layer: trained (solid) and at initialisation (dashed)",
        columns=columns, rows=rows)
