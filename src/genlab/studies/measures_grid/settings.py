"""The measures-grid study's settings and registry entry (no torch, numpy or pyarrow)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from genlab.analyses.registry import AnalysesSettings
from genlab.data.settings import TeacherStudentSettings
from genlab.settings import ClaimRule, FrozenModel, Seed, Slug, format_float_slug
from genlab.studies.entry import Resources, StudyEntry

NAME = "measures_grid"
CITATION = ("Jiang, Neyshabur, Mobahi, Krishnan, Bengio. Fantastic generalization measures and "
            "where to find them. ICLR 2020.")


class MeasuresGridRun(FrozenModel):
    """One point of the grid and a seed."""

    depth: int = Field(ge=1, le=64, description="Hidden layers.")
    width: int = Field(ge=1, le=65_536, description="Units per hidden layer.")
    lr: float = Field(gt=0, le=1e3, description="SGD step size.")
    batch_size: int = Field(ge=1, le=10_000_000)
    weight_decay: float = Field(ge=0, le=1e3, description="L2 coefficient in SGD's update.")
    seed: Seed = Field(description="Seed of the initialisation and the minibatch order.")


class GridRecipe(FrozenModel):
    """What every run shares: the activation, the optimizer's momentum, the budget and the stop."""

    activation: Literal["relu", "tanh", "gelu"] = "relu"
    momentum: float = Field(ge=0, lt=1, description="SGD heavy-ball momentum.")
    max_steps: int = Field(ge=1, le=100_000_000, description="Step budget; a run that has not "
                           "reached stop_at_train_acc by then is excluded from the ranking.")
    eval_every: int = Field(ge=1, le=100_000_000, description="Steps between evaluations (the "
                            "stop check and history rows).")
    stop_at_train_acc: float = Field(gt=0, le=1, description="Stop once the training accuracy "
                                     "reaches this; runs that never do are excluded (Jiang et "
                                     "al. drop models below 0.99).")


class MeasuresBlock(FrozenModel):
    """The measures' knobs (:class:`genlab.analyses.measures.MeasureSettings`); small sample
    counts keep the costly ones (σ′, α′, λ_max, Tr H) cheap."""

    margin_quantile: float = Field(0.1, ge=0, le=1, description="γ = this quantile of the "
                                   "training margins.")
    flatness_target: float = Field(0.1, gt=0, le=10, description="Δ, the tolerated increase "
                                   "for σ′ and α′.")
    sigma_loss: Literal["error", "loss"] = Field("error", description="σ′ on the 0-1 training "
                                                 "error (Jiang et al.) or the loss.")
    sigma_samples: int = Field(10, ge=1, le=10_000, description="Monte Carlo directions for σ′.")
    sigma_depth: int = Field(15, ge=1, le=60, description="Bisection steps for σ′.")
    magnitude_eps: float = Field(1e-3, gt=0, le=1, description="ε of the magnitude-aware σ′, α′.")
    alpha_steps: int = Field(10, ge=1, le=10_000, description="Ascent steps per worst case.")
    alpha_depth: int = Field(12, ge=1, le=60, description="Bisection steps for α′.")
    loss_threshold: float = Field(0.1, gt=0, le=100, description="steps_to_loss: the first "
                                  "evaluated step with training loss at or below this.")
    lanczos_max_iter: int = Field(20, ge=2, le=10_000, description="Lanczos steps for λ_max.")
    trace_num_matvecs: int = Field(30, ge=3, le=100_000, description="Hutch++ products for Tr H.")
    id_max_examples: int = Field(1000, ge=3, le=10_000_000, description="Training examples for "
                                 "the last-layer intrinsic dimension.")
    jacobian_max_points: int = Field(256, ge=1, le=10_000_000, description="Test points for "
                                     "the input-Jacobian norm.")
    seed: Seed = Field(0, description="Seed of the measures' random directions, the same for "
                       "every model (common random numbers).")


class MeasuresGridClaims(FrozenModel):
    """The rules the literature claims are judged by, over seeds (declared before the run)."""

    flatness_top: ClaimRule = Field(description="Per seed, the better PAC-Bayes flatness "
                                    "measure's Ψ-rank over the top-third cutoff ⌈n/3⌉.")
    spectral_negative: ClaimRule = Field(description="Per seed, Kendall τ of the product of "
                                         "spectral norms with the gap.")


class MeasuresGridConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    data: TeacherStudentSettings = Field(description="The task: each seed draws its own "
                                         "teacher and data from it (genlab.data.draws), the "
                                         "same for every model of that seed.")
    recipe: GridRecipe
    measures: MeasuresBlock
    claims: MeasuresGridClaims
    analyses: AnalysesSettings = Field(
        default_factory=AnalysesSettings, description="Post-hoc analyses of each run's trained "
        "model on the loss it minimised (the cross-entropy of the teacher's labels); none unless "
        "set.")
    runs: dict[Slug, MeasuresGridRun] = Field(
        min_length=1, description="One line per run (a grid point and a seed); the key is "
        "d<depth>-w<width>-lr<lr>-b<batch_size>-wd<weight_decay>-s<seed>, '_' for the point "
        "(grid_runs writes a full grid).")

    @field_validator("data")
    @classmethod
    def _classification(cls, data: TeacherStudentSettings) -> TeacherStudentSettings:
        if data.task != "classification" or data.random_inputs:
            raise ValueError("the measures rank classifiers: task 'classification' with the "
                             "teacher's inputs (random_inputs false)")
        return data


def run_id(run: MeasuresGridRun) -> str:
    return (f"d{run.depth}-w{run.width}-lr{format_float_slug(run.lr)}-b{run.batch_size}"
            f"-wd{format_float_slug(run.weight_decay)}-s{run.seed}")




STUDY = StudyEntry(
    name=NAME,
    title="Generalization measures on a grid (Jiang et al. 2020): which measures rank models "
          "by their gap",
    citation=CITATION,
    config=MeasuresGridConfig,
    run_id=run_id,
    run_columns=("status", "depth", "width", "lr", "batch_size", "weight_decay", "steps",
                 "final_train_acc", "final_test_acc", "gap"),
    grouped=True,
    train_resources=Resources(mem_mb=4000, runtime=60),
)
