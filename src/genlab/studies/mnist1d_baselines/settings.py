"""The MNIST-1D baselines study's settings and registry entry (cheap: no torch, no numpy)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from genlab.data.settings import MNIST1DSettings
from genlab.settings import (
    ClaimRule,
    Conv1DSettings,
    FrozenModel,
    ResidualMLPSettings,
    Seed,
    Slug,
)
from genlab.studies.entry import PlotSpec, Resources, StudyEntry

NAME = "mnist1d_baselines"
CITATION = ("Greydanus. Scaling down deep learning. arXiv:2011.14439, 2020 (MNIST-1D; the "
            "baselines table of its README and paper).")

ModelName = Literal["logistic", "mlp", "cnn"]


class BaselineModels(FrozenModel):
    """The two networks (logistic regression is one Linear layer with a bias: no settings)."""

    mlp: ResidualMLPSettings = Field(description="The paper's MLPBase: 100 hidden units, one "
                                     "residual block.")
    cnn: Conv1DSettings = Field(description="The paper's ConvBase: 25 channels, kernels 5, 3, "
                                "3, stride 2, padding 1.")


class BaselineRecipe(FrozenModel):
    """Adam on the cross-entropy for a fixed number of steps (no early stop)."""

    lr: float = Field(gt=0, le=1e3, description="Adam's step size.")
    weight_decay: float = Field(0.0, ge=0, le=1e3, description="L2 weight decay (Adam's).")
    batch_size: int = Field(ge=1, le=10_000_000)
    steps: int = Field(ge=1, le=100_000_000, description="Adam steps, all of them taken; the "
                       "final model is the one scored.")
    eval_every: int = Field(ge=1, le=100_000_000, description="Steps between history rows.")


class BaselineRun(FrozenModel):
    model: ModelName = Field(description="logistic, mlp or cnn.")
    shuffle_seq: bool = Field(description="The condition: the spatially shuffled variant (the "
                              "data block's shuffle_seq for this run's draw).")
    seed: Seed = Field(description="Seed of the data draw, the initialisation and the minibatch "
                       "order.")


class BaselineClaims(FrozenModel):
    """The rules the literature claims are judged by (declared before the run)."""

    table: ClaimRule = Field(description="Per seed, the model's test accuracy minus the paper's "
                             "number, in percentage points; one entry per model and variant.")
    cnn_over_mlp: ClaimRule = Field(description="Per seed, CNN minus MLP test accuracy on the "
                                    "plain data, in percentage points.")
    cnn_over_mlp_shuffled: ClaimRule = Field(description="Per seed, CNN minus MLP test accuracy "
                                             "on the shuffled data, in percentage points.")


class BaselinesConfig(FrozenModel):
    # the spatial shuffle is a condition: each run's draw sets data.shuffle_seq to its own
    DATA_FIELDS: ClassVar[tuple[str, ...]] = ("shuffle_seq",)

    description: str = Field("", max_length=2000)
    data: MNIST1DSettings
    models: BaselineModels
    recipe: BaselineRecipe
    claims: BaselineClaims
    runs: dict[Slug, BaselineRun] = Field(min_length=1, description="One line per run; the key "
                                          "is <model>-<plain|shuffled>-s<seed>.")


def variant(shuffle_seq: bool) -> str:
    return "shuffled" if shuffle_seq else "plain"


def run_id(run: BaselineRun) -> str:
    return f"{run.model}-{variant(run.shuffle_seq)}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="MNIST-1D baselines (Greydanus 2020): logistic, MLP and CNN against the paper's table",
    citation=CITATION,
    config=BaselinesConfig,
    run_id=run_id,
    run_columns=("status", "steps", "final_train_acc", "final_test_acc", "n_parameters"),
    plots=(PlotSpec("test_acc", x="step", y="test_acc", title="Test accuracy per step"),),
    grouped=True,
    seed_block=10,  # ten seeds' runs train in one stage (logistic and MLP as ensembles)
    train_resources=Resources(mem_mb=2000, runtime=30),
)
