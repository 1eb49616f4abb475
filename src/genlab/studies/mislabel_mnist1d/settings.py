"""The mislabel_mnist1d study's settings (pydantic, no torch) and its registry entry."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from genlab.analyses.attribution_settings import SelfInfluenceSettings
from genlab.data.settings import MNIST1DSettings
from genlab.settings import ClaimRule, FrozenModel, Seed, Slug
from genlab.studies.entry import Resources, StudyEntry
from genlab.train.binary_settings import BinaryMLPSettings, FitSettings, LogisticSettings, ModelKind

NAME = "mislabel_mnist1d"
CITATION = ("Koh & Liang. Understanding black-box predictions via influence functions. ICML 2017 "
            "(§5.4, fixing mislabeled examples); data: Greydanus, Scaling down deep learning "
            "(MNIST-1D), arXiv:2011.14439, 2020.")


class MislabelMNIST1DRun(FrozenModel):
    model: ModelKind = Field(description="logistic: multinomial L2 logistic regression; mlp: "
                             "the tanh MLP.")
    seed: Seed = Field(description="Seed of the data draw (its own MNIST-1D series), of the "
                       "flipped labels and of the initialisation.")


class MislabelMNIST1DClaims(FrozenModel):
    """The rules the literature claims are judged by, over seeds (declared before the run)."""

    self_influence_logistic: ClaimRule = Field(description="Per seed, the AUC of exact "
                                               "self-influence for the flips (logistic).")
    self_influence_mlp: ClaimRule = Field(description="Per seed, the AUC of exact GGN "
                                          "self-influence for the flips (MLP that memorised "
                                          "them).")
    beats_loss: ClaimRule = Field(description="Per seed and model, the AUC of exact "
                                  "self-influence minus the training loss ranking's.")


class MislabelMNIST1DConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    data: MNIST1DSettings
    flip_fraction: float = Field(0.1, gt=0, lt=1, description="Exactly round(fraction·n) "
                                 "training labels, drawn at random, each changed to one of the "
                                 "other nine classes at random; test labels are clean.")
    logistic: LogisticSettings
    mlp: BinaryMLPSettings
    fit: FitSettings = FitSettings()
    methods: SelfInfluenceSettings = SelfInfluenceSettings()
    claims: MislabelMNIST1DClaims
    runs: dict[Slug, MislabelMNIST1DRun] = Field(min_length=1, description="One line per run; "
                                                 "the key is <model>-s<seed>.")

    @model_validator(mode="after")
    def _some_flips(self) -> Self:
        n = int(self.data.num_samples * self.data.train_split)  # as the generator splits
        if round(self.flip_fraction * n) < 1:
            raise ValueError(f"flip_fraction ({self.flip_fraction}) flips none of the {n} "
                             "training labels: nothing to detect")
        return self


def run_id(run: MislabelMNIST1DRun) -> str:
    return f"{run.model}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Mislabel detection on MNIST-1D (Koh & Liang 2017): self-influence finds flipped "
          "training labels among ten classes",
    citation=CITATION,
    config=MislabelMNIST1DConfig,
    run_id=run_id,
    run_columns=("status", "n_parameters", "train_acc", "test_acc", "exact_auc", "ekfac_auc",
                 "grad_dot_auc", "loss_auc", "random_auc"),
    grouped=False,
    train_resources=Resources(mem_mb=4000, runtime=60),
)
