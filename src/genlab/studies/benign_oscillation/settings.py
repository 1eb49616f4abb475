"""The benign-oscillation study's settings and registry entry (cheap: no torch, no numpy)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from genlab.analyses.registry import AnalysesSettings
from genlab.data.settings import FeatureNoiseSettings
from genlab.settings import (
    ClaimRule,
    FrozenModel,
    PatchNetSettings,
    Seed,
    Slug,
    format_float_slug,
)
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
    noise_std: float = Field(gt=0, le=100, description="The condition: the noise patches' σ_p "
                             "(the data block's noise_std for this run's draw).")
    seed: Seed = Field(description="Seed of the data draw, the initialisation and the sampling "
                       "order.")


class BenignOscillationClaims(FrozenModel):
    """The rules the literature claims are judged by at each σ_p (declared before the run)."""

    alpha_v_factor: float = Field(gt=0, le=1e6, description="How many times the small step's "
                                  "α_v growth the large step's must exceed.")
    alpha_v: ClaimRule = Field(description="Per seed, α_v growth at the largest η minus "
                               "alpha_v_factor × α_v growth at the smallest η.")
    weak_acc: ClaimRule = Field(description="Per seed, weak-only test accuracy at the largest η "
                                "minus at the smallest.")
    strong_acc: ClaimRule = Field(description="Per seed, the smaller strong-point test accuracy "
                                  "of the two step sizes.")
    oscillation: ClaimRule = Field(description="Per seed, the late-phase mean |y·f − 1| on "
                                   "strong training points at the largest η.")


class BenignOscillationConfig(FrozenModel):
    # σ_p is a condition: each run's data draw sets data.noise_std to its own (genlab.data.draws)
    DATA_FIELDS: ClassVar[tuple[str, ...]] = ("noise_std",)

    description: str = Field("", max_length=2000)
    data: FeatureNoiseSettings
    model: PatchNetSettings
    recipe: RecipeSettings
    analyses: AnalysesSettings
    claims: BenignOscillationClaims
    runs: dict[Slug, BenignOscillationRun] = Field(min_length=1, description="One line per run; "
                                                   "the key is lr<η>-n<σ_p>-s<seed>.")


def run_id(run: BenignOscillationRun) -> str:
    return f"lr{format_float_slug(run.lr)}-n{format_float_slug(run.noise_std)}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Benign oscillation (Lu et al. 2024): large-step SGD learns the weak feature",
    citation=CITATION,
    config=BenignOscillationConfig,
    run_id=run_id,
    run_columns=("status", "lr", "noise_std", "seed", "alpha_v", "alpha_v_growth",
                 "test_acc_strong", "test_acc_weak_only",
                 "late_oscillation_strong"),
    plots=(PlotSpec("alpha_v_growth", x="step", y="alpha_v_growth",
                    title="Growth of the weak-feature alignment α_v from init per SGD step"),
           PlotSpec("test_acc_weak_only", x="step", y="test_acc_weak_only",
                    title="Weak-only test accuracy per SGD step")),
    grouped=False,
    train_resources=Resources(mem_mb=2000, runtime=30),
)
