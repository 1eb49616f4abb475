"""Gather what the report shows from each study's summary: claims, figures, tables, provenance."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genlab.config import Params, settings_hash
from genlab.io import read_json, read_parquet


@dataclass(frozen=True)
class AnalysisSection:
    title: str
    intro: str
    figure: str | None  # inline SVG
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


@dataclass(frozen=True)
class Report:
    title: str
    params_sha256: str
    scale: str
    sections: list[StudySection]
    provenance: dict[str, Any]

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
    from genlab.report.analyses import VIEWS

    sections = []
    for name, records in data.get("analyses", {}).items():
        view = VIEWS[name](records, folder, getattr(config.analyses, name))
        sections.append(AnalysisSection(
            title=view.title, intro=view.intro, caption=view.caption, columns=view.columns,
            rows=view.rows, figure=figure_to_svg(view.figure) if view.figure else None))
    return sections


def collect(params: Params, study_dirs: dict[str, Path]) -> Report:
    import matplotlib

    matplotlib.use("Agg")  # no display, no GUI toolkit
    from genlab.studies import STUDIES

    declared = params.declared_studies()
    sections = []
    for name, config in declared.items():
        if name not in study_dirs:
            raise ValueError(f"studies.{name} is declared but no summary folder was given")
        folder = study_dirs[name]
        data = read_json(folder / "summary.json")
        table = read_parquet(folder / "summary.parquet")
        spec = STUDIES[name]
        figures = [(caption, figure_to_svg(fig)) for caption, fig in spec.figures(data, table)]
        runs = [{"run": run, **metrics} for run, metrics in data.get("runs", {}).items()]
        sections.append(StudySection(
            name=name, title=spec.title, description=config.description, claims=data["claims"],
            figures=figures, run_columns=spec.run_columns, runs=runs,
            provenance=data["provenance"], analyses=_analyses(data, folder, config)))
    first = sections[0].provenance if sections else {}
    provenance = {
        "git_commit": first.get("git_commit", "unknown"),
        "genlab_version": first.get("genlab_version", "unknown"),
        "versions": first.get("versions", {}),
        "devices": sorted({s.provenance.get("device", "?") for s in sections}),
    }
    return Report(title=params.report.title,
                  params_sha256=settings_hash(params.model_dump(mode="json", exclude={"runtime"})),
                  scale=params.scale, sections=sections, provenance=provenance)
