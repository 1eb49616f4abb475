"""The analysis registry: the post-hoc analyses any study with trained models can switch on.

An analysis runs on every run of a study (``genlab analyze <name>``), on the run's training
objective (:class:`genlab.studies.base.TrainingObjective`), and writes ``<run>.json`` (its record)
and one ``<run>_<table>.parquet`` per declared table; the study's aggregate stacks the tables into
``<name>_<table>.parquet`` and the report shows them through the analysis' view. A study switches
an analysis on by setting its block in ``studies.<study>.analyses`` (:class:`AnalysesSettings`,
built from this registry: one optional block per analysis).

Adding an analysis = its module (a ``record(model, objective, settings, untrained) -> (record,
tables)`` function, a report view ``view(records, study folder, settings) -> AnalysisView``, a
pydantic settings class), its entry here, and its tests; dvc.yaml follows from ``genlab dag
--write``. The entry names its functions as ``module:function`` and the stages import them by
name, so that an analysis' stage depends on that module's code alone
(:mod:`genlab.workflow.code_deps`), not on every analysis. This module stays cheap: settings
classes only.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field, create_model

from genlab.analyses.settings import RepresentationSettings, SharpnessSettings
from genlab.settings import FrozenModel, Resources


@dataclass(frozen=True)
class AnalysisSpec:
    name: str  # the block in studies.<study>.analyses, the stage's name suffix, the folder
    settings: type[BaseModel]
    description: str  # of its settings block, in the schema
    record: str  # "module:function", see the module docstring
    view: str  # "module:function": its section in each study of the report
    tables: tuple[str, ...] = ()  # the per-run tables it writes
    resources: Resources = Resources(mem_mb=2000, runtime=30)

    @property
    def module(self) -> str:
        return self.record.partition(":")[0]

    @property
    def view_module(self) -> str:
        return self.view.partition(":")[0]


ANALYSES: dict[str, AnalysisSpec] = {spec.name: spec for spec in (
    AnalysisSpec(
        "sharpness", SharpnessSettings,
        "Top eigenvalues, trace and spectral density of the training-loss curvature; null = skip.",
        record="genlab.analyses.curvature.analysis:sharpness_record",
        view="genlab.report.analyses:sharpness_view",
        tables=("density",), resources=Resources(mem_mb=4000, runtime=60)),
    AnalysisSpec(
        "intrinsic_dim", RepresentationSettings,
        "Intrinsic dimension of every layer's representations (MLPs), trained and at "
        "initialisation, and the label sharpness of the training data; null = skip.",
        record="genlab.analyses.dimension.representations:layer_id_record",
        view="genlab.report.analyses:intrinsic_dim_view",
        tables=("layers",)),
)}

AnalysesSettings = create_model(
    "AnalysesSettings", __base__=FrozenModel,
    __doc__="The post-hoc analyses of every trained model of a study, one block each (null or "
            "absent: not run); editing one block reruns that analysis (and the summary and "
            "report after it), nothing else.",
    **{name: (spec.settings | None, Field(None, description=spec.description))
       for name, spec in ANALYSES.items()})
