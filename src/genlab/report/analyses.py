"""The report's view of the post-hoc analyses: the same table and figure for every study.

Each study's summary.json holds ``analyses.<name>.<run>`` (the per-run numbers the analyze stage
wrote) and the aggregate stacks the per-run tables into ``<name>_<table>.parquet``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# (column in the run table, key in the per-run record); the columns the report shows
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


def sharpness_rows(records: Mapping[str, Mapping[str, Any]]
                   ) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
    """The columns some run has a value in, and one row per run: its curvature numbers, or why
    the analysis skipped it."""
    columns = tuple(col for col, key in SHARPNESS_COLUMNS
                    if any(r.get(key) is not None for r in records.values()))
    rows = []
    for run, record in records.items():
        row = {"run": run, **{col: record.get(key) for col, key in SHARPNESS_COLUMNS}}
        if record.get("status") == "skipped":
            row["status"] = f"skipped: {record.get('reason', '')}"
        rows.append(row)
    return columns, rows


def sharpness_figure(records: Mapping[str, Mapping[str, Any]], density: pa.Table,
                     curvature: str) -> Figure | None:
    """Each run's spectral density (log scale, as in Ghorbani et al. 2019) with its
    stability threshold (2 + 2β)/η dotted in the same colour; None if no run was analysed."""
    import matplotlib.pyplot as plt

    analysed = [run for run, r in records.items() if r.get("status") == "done"]
    if not analysed or density.num_rows == 0:
        return None
    rows = density.to_pydict()
    cmap = plt.get_cmap("viridis")
    fig, ax = plt.subplots(figsize=(10, 3.6))
    for i, run in enumerate(analysed):
        colour = cmap(i / max(1, len(analysed) - 1))
        points = [(e, d) for r, e, d in zip(rows["run"], rows["eigenvalue"], rows["density"],
                                            strict=True) if r == run]
        ax.plot([e for e, _ in points], [max(d, 1e-12) for _, d in points], color=colour,
                label=run, linewidth=1)
        ax.axvline(records[run]["threshold"], color=colour, linestyle=":", linewidth=1)
    ax.set_yscale("log")
    ax.set_ylim(bottom=1e-8)
    ax.set_xlabel(f"eigenvalue of the training-loss {curvature}")
    ax.set_ylabel("density")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig
