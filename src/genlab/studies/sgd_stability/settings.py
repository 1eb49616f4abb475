"""The SGD-stability study's settings and registry entry (cheap: no torch, no numpy)."""

from __future__ import annotations

from typing import Literal

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

NAME = "sgd_stability"
CITATION = ("Wu & Su. The implicit regularization of dynamical stability in stochastic gradient "
            "descent. ICML 2023; Wu, Ma, E. How SGD selects the global minima in "
            "over-parameterized learning. NeurIPS 2018.")


class StabilityRecipe(FrozenModel):
    target_loss: float = Field(1e-5, gt=0, le=1, description="Train until ½·mean(f − y)² is at "
                               "or below this (checked every eval_every steps).")
    max_steps: int = Field(ge=1, le=1_000_000_000, description="Budget; a run that does not "
                           "reach target_loss is reported as not converged.")
    eval_every: int = Field(ge=1, le=1_000_000)
    trace_matvecs: int = Field(99, ge=6, le=100_000, description="Hutch++ budget (multiple of 3).")
    lanczos_max_iter: int = Field(50, ge=2, le=10_000)


class StabilityRun(FrozenModel):
    method: Literal["sgd", "gd"] = Field(description="sgd: batch size 1; gd: full batch.")
    lr: float = Field(gt=0, le=1e3)
    seed: Seed


class StabilityClaims(FrozenModel):
    """The rules the literature claims are judged by (declared before the run)."""

    sgd_trace: ClaimRule = Field(description="Per seed, max Tr H·η/2 over converged SGD runs.")
    gd_lambda: ClaimRule = Field(description="Per seed, max λ_max·η/2 over converged GD runs.")
    gd_trace: ClaimRule = Field(description="Per seed, Tr H·η/2 of GD at the largest η that "
                                "converged.")


class StabilityConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    data: TeacherStudentSettings
    model: MLPSettings
    recipe: StabilityRecipe
    analyses: AnalysesSettings
    claims: StabilityClaims
    runs: dict[Slug, StabilityRun] = Field(min_length=1, description="One line per run; the key "
                                           "is <method>-lr<η>-s<seed>.")

    @field_validator("data")
    @classmethod
    def _regression(cls, data: TeacherStudentSettings) -> TeacherStudentSettings:
        if data.task != "regression":
            raise ValueError("the bound is for a scalar output: task must be 'regression'")
        return data


def run_id(run: StabilityRun) -> str:
    return f"{run.method}-lr{format_float_slug(run.lr)}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="SGD stability (Wu & Su 2023): SGD minima have Tr H <= 2/η, GD only λ_max <= 2/η",
    citation=CITATION,
    config=StabilityConfig,
    run_id=run_id,
    run_columns=("status", "method", "lr", "steps", "trace", "trace_stderr", "lambda_max",
                 "two_over_lr", "final_train_loss"),
    plots=(PlotSpec("train_loss", x="step", y="train_loss",
                    title="Training loss per step, GD and SGD at each step size"),),
    grouped=False,
    train_resources=Resources(mem_mb=2000, runtime=30),
)
