"""Gather what the report shows from each study's summary: claims, figures, tables, provenance."""

from __future__ import annotations

import importlib
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genlab import __version__
from genlab.config import Params, settings_hash
from genlab.io import read_json, read_parquet
from genlab.report.tally import EVERY_STUDY


@dataclass(frozen=True)
class AnalysisSection:
    title: str
    intro: str
    figure: str | None  # inline SVG
    caption: str
    columns: tuple[str, ...]
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class StudyTable:
    """A table a study's figures module adds to its section (``tables(data)``): e.g. its numbers
    beside a paper's."""

    caption: str
    columns: tuple[str, ...]
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class StudySection:
    name: str
    title: str
    description: str
    claims: list[dict[str, Any]]
    figures: list[tuple[str, str]]  # (caption, inline SVG)
    run_columns: tuple[str, ...]
    runs: list[dict[str, Any]]  # one row per run: its metrics
    provenance: dict[str, Any]
    # the post-hoc analyses of every run (genlab.report.analyses), with figures as inline SVG
    analyses: list[AnalysisSection] = field(default_factory=list)
    tables: list[StudyTable] = field(default_factory=list)
    # "why these verdicts": the study's diagnostics of its claims, from its own numbers
    diagnosis: tuple[str, ...] = ()


@dataclass(frozen=True)
class MissingStudy:
    """A study declared in params.yaml whose summary is not there yet: listed, not a crash."""

    name: str
    title: str
    description: str
    reason: str


@dataclass(frozen=True)
class StageTime:
    """One stage's wall time, read from its log (never from an artifact, see genlab.provenance)."""

    stage: str  # the log's path under logs/, without .log: ``random_labels/train``
    seconds: float
    finished: str  # the log's last timestamp
    exact: bool  # from the CLI's closing line; else the span of the log's timestamps


@dataclass(frozen=True)
class Report:
    title: str
    params_sha256: str
    scale: str
    sections: list[StudySection]
    provenance: dict[str, Any]
    missing: list[MissingStudy] = field(default_factory=list)
    wall_times: list[StageTime] = field(default_factory=list)

    @property
    def claims(self) -> list[dict[str, Any]]:
        return [c for s in self.sections for c in s.claims]


def figure_to_svg(fig: Any) -> str:
    """SVG text of a matplotlib figure, byte-stable: no date, fixed id salt."""
    import matplotlib
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "genlab", "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE: inline in HTML


def _analyses(data: dict[str, Any], folder: Path, config: Any) -> list[AnalysisSection]:
    from genlab.analyses.registry import ANALYSES

    sections = []
    for name, records in data.get("analyses", {}).items():
        module, _, function = ANALYSES[name].view.partition(":")
        view = getattr(importlib.import_module(module), function)(
            records, folder, getattr(config.analyses, name))
        sections.append(AnalysisSection(
            title=view.title, intro=view.intro, caption=view.caption, columns=view.columns,
            rows=view.rows, figure=figure_to_svg(view.figure) if view.figure else None))
    return sections


# the closing line genlab.cli.main logs, and the timestamp logging.basicConfig puts on each line
_WALL = re.compile(r"wall time (\d+(?:\.\d+)?) s")
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ", re.MULTILINE)


def stage_times(logs: Path | None) -> list[StageTime]:
    """Wall time of every stage that left a log under ``logs`` (Snakemake writes one per job).

    The CLI's closing ``wall time N s`` line when there is one; otherwise (older logs) the span
    between the log's first and last timestamps, which misses the imports before the first line.
    """
    from datetime import datetime

    if logs is None or not logs.is_dir():
        return []
    times = []
    for path in sorted(logs.rglob("*.log")):
        stage = path.relative_to(logs).with_suffix("").as_posix()
        if stage == "report":  # this stage's own log, still being written
            continue
        text = path.read_text(errors="replace")
        stamps = [datetime.strptime(f"{d}.{ms}", "%Y-%m-%d %H:%M:%S.%f")
                  for d, ms in _STAMP.findall(text)]
        if not stamps:
            continue
        wall = _WALL.findall(text)
        seconds = float(wall[-1]) if wall else (stamps[-1] - stamps[0]).total_seconds()
        finished = stamps[-1].isoformat(sep=" ", timespec="seconds")
        times.append(StageTime(stage=stage, seconds=seconds, finished=finished, exact=bool(wall)))
    return times


def collect(params: Params, study_dirs: dict[str, Path], logs: Path | None = None) -> Report:
    """The report's content. A declared study with no folder given or no summary in it yet is
    listed as missing (the report renders while a workflow is half done); ``logs``, when given,
    is the folder of stage logs the wall times are read from."""
    import matplotlib

    matplotlib.use("Agg")  # no display, no GUI toolkit
    from genlab.studies import STUDIES, load_figures

    declared = params.declared_studies()
    sections, missing = [], []
    for name in params.switched_off:
        missing.append(MissingStudy(name=name, title=STUDIES[name].title,
                                    description=params.studies_block(name).description,
                                    reason="switched off in params.yaml (enabled: false); the cpu "
                                           f"preset runs every study ({EVERY_STUDY})"))
    for name, config in declared.items():
        folder = study_dirs.get(name)
        absent = [f for f in ("summary.json", "summary.parquet")
                  if folder is None or not (folder / f).is_file()]
        if absent:
            reason = ("no summary folder was given" if folder is None
                      else f"{', '.join(absent)} not in {folder}")
            missing.append(MissingStudy(name=name, title=STUDIES[name].title,
                                        description=config.description, reason=reason))
            continue
        data = read_json(folder / "summary.json")
        table = read_parquet(folder / "summary.parquet")
        spec = STUDIES[name]
        drawn = load_figures(name)
        figures = [(caption, figure_to_svg(fig)) for caption, fig in drawn.figures(data, table)]
        # optional: a study whose figures module has tables(data) shows them under its figures
        tables = [StudyTable(caption, tuple(columns), rows)
                  for caption, columns, rows in getattr(drawn, "tables", lambda _: [])(data)]
        runs = [{"run": run, **metrics} for run, metrics in data.get("runs", {}).items()]
        sections.append(StudySection(
            name=name, title=spec.title, description=config.description, claims=data["claims"],
            figures=figures, run_columns=spec.run_columns, runs=runs,
            provenance=data["provenance"], analyses=_analyses(data, folder, config),
            tables=tables, diagnosis=tuple(data.get("diagnosis", ()))))
    if sections:
        first = sections[0].provenance
    else:  # nothing has run: what this process would record
        from genlab.provenance import git_commit, library_versions

        first = {"git_commit": git_commit(), "versions": library_versions()}
    provenance = {
        "git_commit": first.get("git_commit", "unknown"),
        "genlab_version": first.get("genlab_version", __version__),
        "versions": first.get("versions", {}),
        "devices": sorted({s.provenance.get("device", "?") for s in sections}),
    }
    return Report(title=params.report.title,
                  params_sha256=settings_hash(params.model_dump(mode="json", exclude={"runtime"})),
                  scale=params.scale, sections=sections, provenance=provenance,
                  missing=missing, wall_times=stage_times(logs))
