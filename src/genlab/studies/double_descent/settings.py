"""The double-descent study's settings and registry entry (cheap: no torch, no numpy)."""

from __future__ import annotations

from pydantic import Field, field_validator

from genlab.data.settings import TeacherStudentSettings
from genlab.settings import ClaimRule, FrozenModel, Seed, Slug
from genlab.studies.entry import PlotSpec, Resources, StudyEntry

NAME = "double_descent"
CITATION = ("Advani & Saxe. High-dimensional dynamics of generalization error in neural "
            "networks. 2017 (arXiv:1710.03667); Belkin, Hsu, Ma, Mandal. Reconciling modern "
            "machine learning practice and the bias-variance trade-off. PNAS 2019.")


class FeatureSettings(FrozenModel):
    widths: tuple[int, ...] = Field(min_length=2, max_length=200, description="Numbers of random "
                                    "features P to fit, increasing.")
    activation: str = Field("relu", pattern="^(relu|tanh)$")

    @field_validator("widths")
    @classmethod
    def _increasing(cls, widths: tuple[int, ...]) -> tuple[int, ...]:
        if any(w < 1 for w in widths) or list(widths) != sorted(set(widths)):
            raise ValueError("must be strictly increasing positive integers")
        return widths


class EarlyStoppingSettings(FrozenModel):
    """Gradient descent from zero on the same features, stopped at its best validation step."""

    n_val: int = Field(ge=1, le=1_000_000, description="Test points held out for choosing the "
                       "step (the first n_val of the test split); test error uses the rest.")
    lr_fraction: float = Field(0.5, gt=0, lt=1, description="Step size as a fraction of the "
                               "stability limit 2N / s_max(Φ)².")
    max_steps: int = Field(ge=1, le=10**12)
    n_checkpoints: int = Field(60, ge=2, le=10_000, description="Log-spaced steps evaluated.")


class DoubleDescentRun(FrozenModel):
    seed: Seed = Field(description="Seed of the random feature weights W.")


class DoubleDescentClaims(FrozenModel):
    """The rules the literature claims are judged by (declared before the run)."""

    peak_location: ClaimRule = Field(description="Per seed, the P of the largest test MSE / N.")
    peak_height: ClaimRule = Field(description="Per seed, log10 of the smaller of peak / MSE at "
                                   "P = N/4 and peak / MSE at P = 8N.")


class DoubleDescentConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    data: TeacherStudentSettings
    features: FeatureSettings
    early_stopping: EarlyStoppingSettings
    claims: DoubleDescentClaims
    runs: dict[Slug, DoubleDescentRun] = Field(min_length=1, description="One line per feature "
                                               "draw; the key is s<seed>.")

    @field_validator("data")
    @classmethod
    def _regression(cls, data: TeacherStudentSettings) -> TeacherStudentSettings:
        if data.task != "regression":
            raise ValueError("double descent here is a regression study: task must be "
                             "'regression'")
        return data


def run_id(run: DoubleDescentRun) -> str:
    return f"s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Double descent (Advani & Saxe 2017): test error peaks at the interpolation threshold",
    citation=CITATION,
    config=DoubleDescentConfig,
    run_id=run_id,
    run_columns=("status", "peak_n_features", "peak_test_mse"),
    plots=(PlotSpec("test_mse", x="ratio", y="test_mse",
                    title="Test MSE vs P/N, minimum-norm fit, each feature draw"),),
    grouped=False,
    train_resources=Resources(mem_mb=2000, runtime=30),
)
