"""``genlab aggregate``: a study's summary (its claims checked), its analyses' tables stacked,
and its key curves exported for DVC's ``plots:``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from genlab.analyses.registry import ANALYSES
from genlab.io import read_json, read_parquet, write_csv, write_json, write_parquet
from genlab.paths import METRICS
from genlab.report.metrics import metric_files, write_metric_folder
from genlab.stages.common import log, provenance, setup
from genlab.stages.settings import stage_settings
from genlab.studies import STUDIES, load_claims
from genlab.studies.base import plot_table
from genlab.studies.entry import PlotSpec


def run(args: argparse.Namespace) -> int:
    params = setup(args)
    config = params.study(args.study)
    entry = STUDIES[args.study]
    # Only the runs params.yaml declares: a folder left over from an older grid is ignored.
    metrics, histories = {}, {}
    for run_id in config.runs:
        folder = args.runs / run_id
        metrics[run_id] = read_json(folder / "metrics.json")
        histories[run_id] = read_parquet(folder / "history.parquet")
    summary = load_claims(args.study).summarize(config, metrics, histories)
    analyses = gather_analyses(args.analyses, config, args.out)
    write_parquet(args.out / "summary.parquet", summary.table)
    write_plots(entry.plots, summary.table, args.out)
    claims = [c.to_json() for c in summary.claims]
    write_json(args.out / "summary.json", {
        **summary.data, "claims": claims, **analyses,
        "provenance": provenance(stage_settings(config, "aggregate"), "cpu")})
    write_metric_folder(args.out / METRICS, metric_files(claims))  # DVC's metrics, small, flat
    for claim in summary.claims:
        log.info("%s: %s -- %s", args.study, claim.status, claim.claim)
    return 0


def write_plots(plots: Sequence[PlotSpec], table: pa.Table, out: Path) -> None:
    """Each plot's CSV export of the summary table, under OUT (the study folder), for DVC's
    ``plots:``: the table itself stays Parquet, DVC reads only CSV/TSV/JSON/YAML."""
    for plot in plots:
        write_csv(out / plot.file, plot_table(plot, table))


def gather_analyses(folder: Path | None, config: Any, out: Path) -> dict[str, Any]:
    """Each enabled analysis' per-run numbers for summary.json (``{"analyses": {name: {run:
    …}}}``) and its per-run tables stacked into OUT/<name>_<table>.parquet with a ``run``
    column."""
    if folder is None:
        return {}
    found: dict[str, Any] = {}
    for name, analysis in ANALYSES.items():
        if getattr(config.analyses, name, None) is None:
            continue
        records, tables = {}, {}
        for run_id in config.runs:
            record = read_json(folder / name / f"{run_id}.json")
            record.pop("provenance")
            records[run_id] = record
            for path in sorted((folder / name).glob(f"{run_id}_*.parquet")):
                table = read_parquet(path)
                table = table.append_column("run", pa.array([run_id] * table.num_rows))
                tables.setdefault(path.stem.removeprefix(f"{run_id}_"), []).append(table)
        found[name] = records
        for table_name in analysis.tables:  # every declared table, empty if all runs skipped
            parts = tables.get(table_name)
            write_parquet(out / f"{name}_{table_name}.parquet",
                          pa.concat_tables(parts) if parts else pa.table({"run": pa.array(
                              [], pa.string())}))
    return {"analyses": found} if found else {}
