"""The layer_rotation study's settings (pydantic, no torch) and its registry entry."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from genlab.data.settings import MNIST1DSettings
from genlab.settings import ClaimRule, FrozenModel, MLPSettings, Seed, Slug, format_float_slug
from genlab.studies.entry import PlotSpec, Resources, StudyEntry

NAME = "layer_rotation"
CITATION = ("Carbonnelle & De Vleeschouwer. Layer rotation: a surprisingly powerful indicator of "
            "generalization in deep networks? arXiv:1806.01603, 2019 (ICML 2019 workshop on "
            "deep learning phenomena); data: Greydanus, Scaling down deep learning (MNIST-1D), "
            "arXiv:2011.14439, 2020.")

Optimizer = Literal["sgd", "layca"]


class RotationRecipe(FrozenModel):
    """Minibatch training for a fixed number of steps, the learning rate multiplied by ``decay``
    after each fraction ``decay_at`` of the budget (the paper's C10-CNN1 schedule: ×0.2 after
    80, 90 and 97 of 100 epochs), no stop; plain SGD without momentum or weight decay, or
    Layca."""

    batch_size: int = Field(ge=1, le=10_000_000)
    steps: int = Field(ge=2, le=100_000_000, description="Steps, for every run.")
    decay_at: tuple[Annotated[float, Field(gt=0, lt=1)], ...] = Field(
        (0.8, 0.9, 0.97), min_length=1, max_length=20, description="Fractions of the steps "
        "after which the learning rate is multiplied by decay, increasing.")
    decay: float = Field(0.2, gt=0, le=1)
    eval_every: int = Field(ge=1, le=100_000_000, description="Steps between history rows "
                            "(losses, accuracies and every layer's rotation).")

    def decay_steps(self) -> tuple[int, ...]:
        return tuple(max(1, round(f * self.steps)) for f in self.decay_at)

    @model_validator(mode="after")
    def _increasing(self) -> Self:
        steps = self.decay_steps()
        if list(steps) != sorted(set(steps)):
            raise ValueError(f"decay_at {list(self.decay_at)} must give increasing steps of "
                             f"the {self.steps}")
        return self


class RotationClaims(FrozenModel):
    """The rules the literature claims are judged by, over seeds (declared before the run)."""

    rotation_rises_with_lr: ClaimRule = Field(description="Per seed, Spearman over the SGD runs "
                                              "between η and the mean final layer rotation.")
    accuracy_rises_with_rotation: ClaimRule = Field(description="Per seed, Spearman over the SGD "
                                                    "runs between the mean final layer rotation "
                                                    "and the test accuracy.")
    high_rotation_wins: ClaimRule = Field(description="Per seed, over the Layca runs: the mean "
                                          "test accuracy (points) of the runs whose every layer "
                                          "ends at cosine distance ≥ high minus that of the runs "
                                          "whose every layer stays below low.")


Init = Literal["torch", "glorot"]


class RotationRun(FrozenModel):
    optimizer: Optimizer = Field(description="sgd, or layca (the rotation rate controlled).")
    init: Init = Field("torch", description="torch: PyTorch's default Linear initialisation "
                       "(the study's first setting); glorot: Glorot-uniform kernels and zero "
                       "biases, Keras' default and so the paper's (a declared condition).")
    lr: float = Field(gt=0, le=100, description="η for SGD; ρ, the rotation per step, for Layca.")
    seed: Seed = Field(description="Seed of the data draw, the initialisation and the "
                       "minibatch order.")


class LayerRotationConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    data: MNIST1DSettings
    model: MLPSettings
    recipe: RotationRecipe
    high: float = Field(0.9, gt=0, le=2, description="Cosine distance every layer must reach for "
                        "a Layca run to count as highly rotated.")
    low: float = Field(0.3, gt=0, le=2, description="Cosine distance every layer must stay below "
                       "for a Layca run to count as little rotated.")
    claims: RotationClaims
    runs: dict[Slug, RotationRun] = Field(min_length=1, description="One line per run; the key "
                                          "is <optimizer>[-glorot]-lr<lr>-s<seed> ('_' for the "
                                          "point).")

    @model_validator(mode="after")
    def _thresholds(self) -> Self:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must lie below high ({self.high})")
        if self.recipe.eval_every > self.recipe.steps:
            raise ValueError("recipe.eval_every exceeds recipe.steps")
        return self


def run_id(run: RotationRun) -> str:
    init = "" if run.init == "torch" else f"-{run.init}"
    return f"{run.optimizer}{init}-lr{format_float_slug(run.lr)}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Layer rotation on MNIST-1D (Carbonnelle & De Vleeschouwer 2019): does the cosine "
          "distance each layer travels from its initialisation go with generalization?",
    citation=CITATION,
    config=LayerRotationConfig,
    run_id=run_id,
    run_columns=("status", "optimizer", "init", "lr", "mean_rotation", "min_rotation",
                 "final_test_acc"),
    plots=(PlotSpec("layer_rotation", x="mean_rotation", y="final_test_acc",
                    title="Test accuracy against mean layer rotation"),),
    grouped=True,
    train_resources=Resources(mem_mb=2000, runtime=30),
)
