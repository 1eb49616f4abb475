"""The layer-ID study's settings and registry entry (cheap: no torch, no numpy)."""

from __future__ import annotations

from typing import ClassVar, Literal, Self

from pydantic import Field, model_validator

from genlab.data.settings import RealTask, RealTaskData
from genlab.settings import (
    AdamFitRecipe,
    ClaimRule,
    Conv1DSettings,
    FrozenModel,
    MLPSettings,
    Seed,
    Slug,
)
from genlab.studies.entry import PlotSpec, Resources, StudyEntry

NAME = "layer_id"
CITATION = ("Ansuini, Laio, Macke, Zoccolan. Intrinsic dimension of data representations in "
            "deep neural networks. NeurIPS 2019; data: Greydanus, Scaling down deep learning "
            "(MNIST-1D), arXiv:2011.14439, 2020; digits: Alpaydin & Kaynak, UCI, 1998 "
            "(scikit-learn's copy).")

ModelName = Literal["mlp", "cnn"]
Labels = Literal["clean", "random"]
Task = RealTask


class LayerIDModels(FrozenModel):
    mlp: MLPSettings = Field(description="The fully connected network.")
    cnn: Conv1DSettings = Field(description="The 1-D CNN.")


class LayerIDRun(FrozenModel):
    task: Task = Field(description="The dataset: 'mnist1d' or 'digits'.")
    model: ModelName = Field(description="mlp or cnn.")
    labels: Labels = Field(description="'clean': the true labels; 'random': every training "
                           "label redrawn uniformly (the draw's corruption labels).")
    seed: Seed = Field(description="Seed of the data draw, the initialisation and the minibatch "
                       "order (a seed's clean and random runs share all three).")


class LayerIDClaims(FrozenModel):
    """The rules the literature claims are judged by (declared before the run)."""

    hunchback: ClaimRule = Field(description="Per seed, the clean network's largest hidden-layer "
                                 "ID minus the larger of the input's and the last hidden "
                                 "layer's.")
    random_last_higher: ClaimRule = Field(description="Per seed, the last hidden layer's ID "
                                          "after random labels minus after clean ones.")


class LayerIDConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    DATA_FIELDS: ClassVar[tuple[str, ...]] = ("task",)  # a run's dataset picks its draw

    data: RealTaskData = Field(description="The datasets: each seed draws its own from each "
                              "(genlab.data.draws).")
    models: LayerIDModels
    recipe: AdamFitRecipe = Field(description="A run that never reaches stop_at_train_acc "
                                  "leaves its seed's claims undefined.")
    twonn_discard: float = Field(0.1, ge=0, lt=1, description="Fraction of the largest "
                                 "neighbour-distance ratios TwoNN discards (Facco et al.: 0.1).")
    claims: LayerIDClaims
    runs: dict[Slug, LayerIDRun] = Field(min_length=1, description="One line per run; the key "
                                         "is <task>-<model>-<labels>-s<seed>.")

    @model_validator(mode="after")
    def _tasks_declared(self) -> Self:
        for task in self.data.missing({run.task for run in self.runs.values()}):
            raise ValueError(f"runs of task {task!r} need data.{task}")
        return self


def run_id(run: LayerIDRun) -> str:
    return f"{run.task}-{run.model}-{run.labels}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Layer-wise intrinsic dimension on MNIST-1D and digits (Ansuini et al. 2019): a "
          "hunchback profile, and a last layer lower on true than on random labels",
    citation=CITATION,
    config=LayerIDConfig,
    run_id=run_id,
    run_columns=("status", "steps", "final_train_acc", "final_test_acc", "last_hidden_id"),
    plots=(PlotSpec("layer_id", x="depth", y="id_trained",
                    title="TwoNN intrinsic dimension per layer, trained"),),
    grouped=False,
    train_resources=Resources(mem_mb=2000, runtime=30),
)
