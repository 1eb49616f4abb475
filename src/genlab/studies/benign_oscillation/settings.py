"""The benign-oscillation study's settings and registry entry (cheap: no torch, no numpy)."""

from __future__ import annotations

from pydantic import Field

from genlab.analyses.registry import AnalysesSettings
from genlab.data.settings import FeatureNoiseSettings
from genlab.settings import FrozenModel, PatchNetSettings, Seed, Slug, format_float_slug
from genlab.studies.entry import PlotSpec, Resources, StudyEntry

NAME = "benign_oscillation"
CITATION = ("Lu, Wu, Yang, Zou. Benign oscillation of stochastic gradient descent with large "
            "learning rates. ICLR 2024 (arXiv:2310.17074).")


class RecipeSettings(FrozenModel):
    """The paper's recipe (SGD, batch 1, loss (1 − y f)²); only its lengths are settings."""

    steps: int = Field(ge=1, le=100_000_000, description="SGD steps (batch size 1).")
    eval_every: int = Field(ge=1, le=100_000_000, description="Steps between history rows.")
    late_fraction: float = Field(0.2, gt=0, le=1, description="The last fraction of the history "
                                 "that counts as 'late' for the oscillation measure.")


class BenignOscillationRun(FrozenModel):
    lr: float = Field(gt=0, le=1e3, description="SGD step size η.")
    seed: Seed = Field(description="Seed of the initialisation and the sampling order.")


class BenignOscillationConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    data: FeatureNoiseSettings
    model: PatchNetSettings
    recipe: RecipeSettings
    analyses: AnalysesSettings
    runs: dict[Slug, BenignOscillationRun] = Field(min_length=1, description="One line per run; "
                                                   "the key is lr<η>-s<seed>.")


def run_id(run: BenignOscillationRun) -> str:
    return f"lr{format_float_slug(run.lr)}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Benign oscillation (Lu et al. 2024): large-step SGD learns the weak feature",
    citation=CITATION,
    config=BenignOscillationConfig,
    run_id=run_id,
    run_columns=("status", "lr", "seed", "alpha_v", "test_acc_strong", "test_acc_weak_only",
                 "late_oscillation_strong"),
    plots=(PlotSpec("alpha_v", x="step", y="alpha_v",
                    title="Weak-feature alignment α_v per SGD step"),
           PlotSpec("test_acc_weak_only", x="step", y="test_acc_weak_only",
                    title="Weak-only test accuracy per SGD step")),
    grouped=False,
    train_resources=Resources(mem_mb=2000, runtime=30),
)
