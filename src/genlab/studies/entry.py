"""What the pipeline knows of a study without importing its code: the cheap half of the registry.

Each study package's ``settings.py`` defines ``STUDY = StudyEntry(...)`` beside its pydantic
settings. Validating ``params.yaml``, generating ``dvc.yaml`` and planning the workflow need only
these entries, so they import no torch, numpy or pyarrow and no study's experiment code; the
heavy half (:class:`genlab.studies.base.StudySpec`: synthesize, train, summarize, figures) is in
the package's ``experiment.py`` and loaded by :func:`genlab.studies.load_study` when a stage runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from genlab.settings import Resources


@dataclass(frozen=True)
class PlotSpec:
    """One key curve of a study, exported from its summary table as a small CSV for DVC's
    ``plots:`` (DVC cannot read Parquet): columns ``run``, ``x``, ``y``, one series per run.

    The template defaults to ``scatter``: DVC's built-in templates colour by revision only, so a
    ``linear`` line would join the points of different runs into one zig-zag; as points, each
    run's curve stays readable and its name shows in the tooltip. A stage-level plot takes a
    single ``y`` in dvc.yaml, hence one column per spec."""

    name: str  # slug: the file is plots/<name>.csv in the study folder
    x: str
    y: str
    title: str
    template: str = "scatter"

    @property
    def file(self) -> str:
        """The CSV's path relative to the study folder (``data/<study>``)."""
        return f"plots/{self.name}.csv"


@dataclass(frozen=True)
class StudyEntry:
    """A study as the pipeline plans it.

    ``grouped``: the runs of each block of ``seed_block`` seeds train in one stage
    (``<study>_train_s<seed>`` for blocks of one seed, ``<study>_train_s0-9`` for seeds 0 to 9;
    :func:`genlab.data.draws.seed_blocks`), its outputs those runs' folders, through the study's
    vectorised group trainer: seeds are a batch dimension there. Otherwise one train stage per
    run.
    ``report_only``: settings fields read by the aggregate/report only, so that editing them
    retrains nothing. A study whose settings have an ``analyses`` block gets the post-hoc
    analyses of every run that it switches on there.
    """

    name: str
    title: str
    citation: str
    config: type[BaseModel]
    run_id: Callable[[Any], str]
    """Canonical, readable id of a run from its settings (``p0_5-s0``); params.yaml keys must
    match it."""
    run_columns: tuple[str, ...] = ("status",)
    """Per-run metrics the report's run table shows, in order."""
    plots: tuple[PlotSpec, ...] = ()
    """Key curves from the summary table, written by the aggregate stage as
    ``data/<study>/plots/<name>.csv`` and declared as that stage's DVC ``plots:``."""
    grouped: bool = False
    seed_block: int = 1
    """Seeds per training stage of a grouped study (their runs train at once); adding a seed
    retrains the runs of its block."""
    train_resources: Resources = Resources(mem_mb=4000, runtime=60)

    def __post_init__(self) -> None:
        if self.seed_block < 1 or (self.seed_block > 1 and not self.grouped):
            raise ValueError(f"study {self.name}: seed_block {self.seed_block} needs a grouped "
                             "study, and a block holds at least one seed")

    @property
    def has_analyses(self) -> bool:
        return "analyses" in self.config.model_fields

    @property
    def report_only(self) -> tuple[str, ...]:
        return tuple(getattr(self.config, "REPORT_ONLY", ()))


__all__ = ["PlotSpec", "Resources", "StudyEntry"]
