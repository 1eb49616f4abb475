"""The edge-of-stability study's settings and registry entry (cheap: no torch, no numpy)."""

from __future__ import annotations

from pydantic import Field, field_validator

from genlab.analyses.registry import AnalysesSettings
from genlab.data.settings import TeacherStudentSettings
from genlab.settings import (
    ClaimRule,
    FrozenModel,
    MLPSettings,
    Seed,
    Slug,
    format_float_slug,
)
from genlab.studies.entry import PlotSpec, Resources, StudyEntry

NAME = "eos_gd"
CITATION = ("Cohen, Kaur, Li, Kolter, Talwalkar. Gradient descent on neural networks typically "
            "occurs at the edge of stability. ICLR 2021.")


class EoSRecipe(FrozenModel):
    """Full-batch GD on the MSE loss; how long, and how sharpness is tracked."""

    steps: int = Field(ge=1, le=100_000_000)
    track_every: int = Field(ge=1, le=100_000_000, description="Steps between λ_max estimates "
                             "(and history rows).")
    lanczos_max_iter: int = Field(20, ge=2, le=1000, description="Hessian-vector products per "
                                  "estimate (a fixed cap: unbounded Lanczos took minutes).")


class EoSRun(FrozenModel):
    lr: float = Field(gt=0, le=1e3, description="GD step size η.")
    seed: Seed = Field(description="Seed of the initialisation.")


class EoSClaims(FrozenModel):
    """The rules the literature claims are judged by at each η (declared before the run)."""

    sharpening: ClaimRule = Field(description="Per seed, max λ_max / λ_max at init.")
    edge: ClaimRule = Field(description="Per seed, median λ_max/(2/η) after the crossing.")
    edge_bounded: ClaimRule = Field(description="Per seed, max λ_max/(2/η) after the crossing.")
    loss: ClaimRule = Field(description="Per seed, log(final loss / loss at the crossing).")


class EoSConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    data: TeacherStudentSettings
    model: MLPSettings
    recipe: EoSRecipe
    analyses: AnalysesSettings
    claims: EoSClaims
    runs: dict[Slug, EoSRun] = Field(min_length=1, description="One line per run; the key is "
                                     "lr<η>-s<seed>.")

    @field_validator("data")
    @classmethod
    def _classification(cls, data: TeacherStudentSettings) -> TeacherStudentSettings:
        if data.task != "classification":
            raise ValueError("the MSE-on-one-hot recipe needs task 'classification'")
        return data


def run_id(run: EoSRun) -> str:
    return f"lr{format_float_slug(run.lr)}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Edge of stability (Cohen et al. 2021): GD sharpness rises to 2/η and stays there",
    citation=CITATION,
    config=EoSConfig,
    run_id=run_id,
    run_columns=("status", "lr", "lambda_init", "lambda_final", "two_over_lr", "crossing_step",
                 "ratio_median_after", "ratio_max_after", "final_train_loss"),
    plots=(PlotSpec("sharpness", x="step", y="lambda_max", title="GD sharpness λ_max per step"),
           PlotSpec("train_loss", x="step", y="train_loss", title="GD training loss per step")),
    grouped=False,
    train_resources=Resources(mem_mb=2000, runtime=30),
)
