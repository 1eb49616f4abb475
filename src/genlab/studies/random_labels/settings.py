"""The random-labels study's settings and registry entry (cheap: no torch, no numpy)."""

from __future__ import annotations

from pydantic import Field

from genlab.analyses.registry import AnalysesSettings
from genlab.settings import (
    ClaimRule,
    FrozenModel,
    GaussianMixtureSettings,
    MLPSettings,
    Seed,
    Slug,
    TrainSettings,
    format_float_slug,
)
from genlab.studies.entry import PlotSpec, Resources, StudyEntry

NAME = "random_labels"
CITATION = ("Zhang, Bengio, Hardt, Recht, Vinyals. Understanding deep learning requires "
            "rethinking generalization. ICLR 2017.")


class RandomLabelsRun(FrozenModel):
    """One point of the grid: a corruption level and a training seed."""

    label_noise: float = Field(ge=0, le=1, description="Probability p that a training label is "
                               "replaced by a uniformly drawn class.")
    seed: Seed = Field(description="Seed of the initialisation and the minibatch order.")


class RandomLabelsClaims(FrozenModel):
    """The rules the literature claims are judged by (declared before the run)."""

    test_acc_decreases: ClaimRule = Field(description="Per seed, the smallest drop of test "
                                          "accuracy between adjacent levels of p.")
    fit_slowdown: ClaimRule = Field(description="Per seed, fit_step(p = 1) / fit_step(p = 0).")


class RandomLabelsConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    data: GaussianMixtureSettings
    model: MLPSettings
    train: TrainSettings
    analyses: AnalysesSettings
    claims: RandomLabelsClaims
    runs: dict[Slug, RandomLabelsRun] = Field(min_length=1, description="One line per run; the "
                                              "key is derived from the settings: p<p>-s<seed>.")


def run_id(run: RandomLabelsRun) -> str:
    return f"p{format_float_slug(run.label_noise)}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Random labels (Zhang et al. 2017): networks fit noise; test accuracy falls to chance",
    citation=CITATION,
    config=RandomLabelsConfig,
    run_id=run_id,
    run_columns=("status", "steps", "fit_step", "final_train_acc", "final_test_acc",
                 "final_test_loss"),
    plots=(PlotSpec("train_acc", x="step", y="train_acc",
                    title="Train accuracy per SGD step, every label-noise level"),
           PlotSpec("test_acc", x="step", y="test_acc",
                    title="Test accuracy per SGD step, every label-noise level")),
    grouped=True,
    seed_block=10,  # ten seeds' runs (each seed its own draw) train as one ensemble
    train_resources=Resources(mem_mb=4000, runtime=60),
)
