"""The mislabel-detection study's settings (pydantic, no torch) and its registry entry."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from genlab.analyses.attribution_settings import SelfInfluenceSettings
from genlab.analyses.registry import AnalysesSettings
from genlab.data.settings import LogisticTeacherSettings
from genlab.settings import ClaimRule, FrozenModel, Seed, Slug
from genlab.studies.entry import Resources, StudyEntry
from genlab.train.binary_settings import BinaryMLPSettings, FitSettings, LogisticSettings, ModelKind

NAME = "mislabel_detection"
CITATION = ("Koh & Liang. Understanding black-box predictions via influence functions. ICML 2017 "
            "(§5.4, fixing mislabeled examples).")


class MislabelRun(FrozenModel):
    model: ModelKind = Field(description="logistic: L2 logistic regression; mlp: the tanh MLP.")
    seed: Seed = Field(description="Seed of the initialisation.")


class MislabelClaims(FrozenModel):
    """The rules the literature claims are judged by, over seeds (declared before the run)."""

    self_influence_logistic: ClaimRule = Field(description="Per seed, the AUC of exact "
                                               "self-influence for the flips (logistic).")
    self_influence_mlp: ClaimRule = Field(description="Per seed, the AUC of exact GGN "
                                          "self-influence for the flips (interpolating MLP).")


class MislabelConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    data: LogisticTeacherSettings
    logistic: LogisticSettings
    mlp: BinaryMLPSettings
    fit: FitSettings = FitSettings()
    methods: SelfInfluenceSettings = SelfInfluenceSettings()
    claims: MislabelClaims
    analyses: AnalysesSettings = Field(
        default_factory=AnalysesSettings, description="Post-hoc analyses of each run's trained "
        "model on its data loss (the binary cross-entropy of the labels it was fitted to, flips "
        "included, in float64; the L2 penalty left out, λ recorded as weight_decay); none "
        "unless set.")
    runs: dict[Slug, MislabelRun] = Field(min_length=1, description="One line per run; the key "
                                          "is <model>-s<seed>.")

    @model_validator(mode="after")
    def _some_flips(self) -> Self:
        if round(self.data.flip_fraction * self.data.n_train) < 1:
            raise ValueError("data.flip_fraction flips no training label: nothing to detect")
        return self


def run_id(run: MislabelRun) -> str:
    return f"{run.model}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Mislabel detection (Koh & Liang 2017): self-influence finds flipped training labels",
    citation=CITATION,
    config=MislabelConfig,
    run_id=run_id,
    run_columns=("status", "n_parameters", "train_acc", "test_acc", "exact_auc", "ekfac_auc",
                 "grad_dot_auc", "loss_auc", "random_auc"),
    grouped=False,
    train_resources=Resources(mem_mb=4000, runtime=60),
)
