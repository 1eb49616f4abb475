"""The toy study's settings and entry."""

from __future__ import annotations

from pydantic import Field

from genlab.analyses.registry import AnalysesSettings
from genlab.settings import (
    FrozenModel,
    GaussianMixtureSettings,
    MLPSettings,
    Seed,
    Slug,
    TrainSettings,
)
from genlab.studies.entry import PlotSpec, StudyEntry


class ToyRun(FrozenModel):
    seed: Seed


class ToyConfig(FrozenModel):
    description: str = ""
    data: GaussianMixtureSettings
    model: MLPSettings
    train: TrainSettings
    analyses: AnalysesSettings
    runs: dict[Slug, ToyRun] = Field(min_length=1)


def run_id(run: ToyRun) -> str:
    return f"s{run.seed}"


STUDY = StudyEntry(name="toy", title="A toy study", citation="none", config=ToyConfig,
                   run_id=run_id, run_columns=("status", "test_acc"),
                   plots=(PlotSpec("test_acc", x="step", y="test_acc", title="Test accuracy"),))
