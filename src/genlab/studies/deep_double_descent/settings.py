"""The deep-double-descent study's settings and registry entry (cheap: no torch, no numpy)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from genlab.data.settings import MNIST1DSettings
from genlab.settings import ClaimRule, Conv1DSettings, FrozenModel, MLPSettings, Seed, Slug
from genlab.studies.entry import PlotSpec, Resources, StudyEntry

NAME = "deep_double_descent"
CITATION = ("Nakkiran, Kaplun, Bansal, Yang, Barak, Sutskever. Deep double descent: where bigger "
            "models and more data hurt. ICLR 2020; protocol and data: Greydanus, Scaling down "
            "deep learning (MNIST-1D), arXiv:2011.14439, 2020, its notebook "
            "deep-double-descent.ipynb.")

ModelName = Literal["mlp", "cnn"]


class MLPFamily(FrozenModel):
    """Fully connected networks whose every hidden layer has the run's width."""

    depth: int = Field(2, ge=1, le=64, description="Hidden layers.")
    activation: Literal["relu", "tanh", "gelu"] = "relu"

    def settings(self, width: int) -> MLPSettings:
        return MLPSettings(hidden=(width,) * self.depth, activation=self.activation)


class CNNFamily(FrozenModel):
    """1-D CNNs (MNIST-1D's ConvBase) whose every layer has the run's width in channels."""

    kernel_sizes: tuple[Annotated[int, Field(ge=1, le=255)], ...] = Field(
        (5, 3, 3), min_length=1, max_length=16, description="Kernel length of each layer.")
    stride: int = Field(2, ge=1, le=64, description="Stride of every layer.")

    def settings(self, width: int) -> Conv1DSettings:
        return Conv1DSettings(channels=(width,) * len(self.kernel_sizes),
                              kernel_sizes=self.kernel_sizes, stride=self.stride)


class WidthFamilies(FrozenModel):
    mlp: MLPFamily = Field(default_factory=MLPFamily)
    cnn: CNNFamily = Field(default_factory=CNNFamily)


class DoubleDescentRecipe(FrozenModel):
    """Minibatch SGD with momentum for a fixed number of steps, no stop and no schedule (the
    notebook: 500 epochs of batches of 100 at lr 0.01, momentum 0.9)."""

    lr: float = Field(gt=0, le=1e3, description="SGD step size.")
    momentum: float = Field(0.9, ge=0, lt=1, description="Heavy-ball momentum.")
    batch_size: int = Field(ge=1, le=10_000_000)
    steps: int = Field(ge=1, le=100_000_000, description="Steps, for every width.")
    eval_every: int = Field(ge=1, le=100_000_000, description="Steps between history rows.")


class DoubleDescentClaims(FrozenModel):
    """The rules the literature claims are judged by (declared before the run)."""

    threshold_peak: ClaimRule = Field(description="Per seed, the test error (points) at the "
                                      "interpolation threshold minus the best narrower "
                                      "network's, that one chosen on the other half of the test "
                                      "set.")
    second_descent: ClaimRule = Field(description="Per seed, the test error (points) at the "
                                      "interpolation threshold minus the widest network's.")


class DoubleDescentRun(FrozenModel):
    model: ModelName = Field(description="mlp or cnn.")
    width: int = Field(ge=1, le=4096, description="Units of every hidden layer (mlp) or "
                       "channels of every layer (cnn).")
    seed: Seed = Field(description="Seed of the data draw (series and label noise), the "
                       "initialisation and the minibatch order.")


class DeepDoubleDescentConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    data: MNIST1DSettings
    label_noise: float = Field(0.15, ge=0, le=1, description="Each training label is redrawn "
                               "uniformly over the classes with this probability (so it is "
                               "wrong with probability label_noise x 9/10); test labels are "
                               "clean.")
    models: WidthFamilies = Field(default_factory=WidthFamilies)
    recipe: DoubleDescentRecipe
    fit_error: float = Field(0.01, ge=0, lt=1, description="The interpolation threshold is the "
                             "narrowest width whose final training error on its noisy labels is "
                             "at most this.")
    claims: DoubleDescentClaims
    runs: dict[Slug, DoubleDescentRun] = Field(min_length=1, description="One line per run; "
                                               "the key is <model>-w<width>-s<seed>.")


def run_id(run: DoubleDescentRun) -> str:
    return f"{run.model}-w{run.width}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Deep double descent on MNIST-1D (Nakkiran et al. 2020): with label noise, test error "
          "peaks at the width that first fits the training set, then falls again",
    citation=CITATION,
    config=DeepDoubleDescentConfig,
    run_id=run_id,
    run_columns=("status", "model", "width", "final_train_err", "final_test_err"),
    plots=(PlotSpec("deep_double_descent", x="width", y="test_err",
                    title="Test error against width"),),
    grouped=False,
    train_resources=Resources(mem_mb=2000, runtime=30),
)
