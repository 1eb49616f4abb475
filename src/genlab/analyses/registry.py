"""The analysis registry: the post-hoc analyses any study with trained models can switch on.

An analysis runs on every run of a study (``genlab analyze <name>``), on the run's training
objective (:class:`genlab.studies.base.Objective`), and writes ``<run>.json`` (its record) and one
``<run>_<table>.parquet`` per declared table; the study's aggregate stacks the tables into
``<name>_<table>.parquet``. A study switches an analysis on by setting its block in
``studies.<study>.analyses`` (:class:`genlab.analyses.settings.AnalysesSettings`).

Adding an analysis = its module (a ``record(model, objective, settings, untrained) -> (record,
tables)`` function), its entry here and its settings field, and its tests; dvc.yaml follows from
``genlab dag --write``. The entry names its function as ``module:function`` and the stage imports
it by name, so that an analysis' stage depends on that module's code alone
(:mod:`genlab.workflow.code_deps`), not on every analysis.
"""

from __future__ import annotations

from dataclasses import dataclass

from genlab.settings import Resources


@dataclass(frozen=True)
class AnalysisSpec:
    name: str  # also the settings field in AnalysesSettings and the stage's name suffix
    record: str  # "module:function", see the module docstring
    tables: tuple[str, ...] = ()  # the per-run tables it writes
    resources: Resources = Resources(mem_mb=2000, runtime=30)

    @property
    def module(self) -> str:
        return self.record.partition(":")[0]


ANALYSES: dict[str, AnalysisSpec] = {spec.name: spec for spec in (
    AnalysisSpec("sharpness", "genlab.analyses.sharpness_analysis:sharpness_record",
                 tables=("density",), resources=Resources(mem_mb=4000, runtime=60)),
    AnalysisSpec("intrinsic_dim", "genlab.analyses.representations:layer_id_record",
                 tables=("layers",)),
)}
