"""The mislabel_mnist1d study's settings (pydantic, no torch) and its registry entry."""

from __future__ import annotations

from typing import ClassVar, Self

from pydantic import Field, model_validator

from genlab.analyses.attribution_settings import SelfInfluenceSettings
from genlab.data.settings import DigitsSettings, MNIST1DSettings, RealTask, RealTaskData
from genlab.settings import ClaimRule, FrozenModel, Seed, Slug
from genlab.studies.entry import Resources, StudyEntry
from genlab.train.binary_settings import BinaryMLPSettings, FitSettings, LogisticSettings, ModelKind

NAME = "mislabel_mnist1d"
CITATION = ("Koh & Liang. Understanding black-box predictions via influence functions. ICML 2017 "
            "(§5.4, fixing mislabeled examples); data: Greydanus, Scaling down deep learning "
            "(MNIST-1D), arXiv:2011.14439, 2020; digits: Alpaydin & Kaynak, UCI, 1998 "
            "(scikit-learn's copy).")

Task = RealTask


class MislabelMNIST1DRun(FrozenModel):
    task: Task = Field(description="The dataset: 'mnist1d' or 'digits' (a declared condition).")
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
    DATA_FIELDS: ClassVar[tuple[str, ...]] = ("task",)  # a run's dataset picks its draw

    data: RealTaskData = Field(description="The datasets: each seed draws its own from each "
                               "(genlab.data.draws).")
    flip_fraction: float = Field(0.1, gt=0, lt=1, description="Exactly round(fraction·n) "
                                 "training labels, drawn at random, each changed to one of the "
                                 "other nine classes at random; test labels are clean.")
    logistic: LogisticSettings
    mlp: BinaryMLPSettings
    fit: FitSettings = FitSettings()
    methods: SelfInfluenceSettings = SelfInfluenceSettings()
    claims: MislabelMNIST1DClaims
    runs: dict[Slug, MislabelMNIST1DRun] = Field(min_length=1, description="One line per run; "
                                                 "the key is <task>-<model>-s<seed>.")

    @model_validator(mode="after")
    def _tasks_and_flips(self) -> Self:
        missing = self.data.missing(run.task for run in self.runs.values())
        if missing:
            raise ValueError(f"runs name the dataset(s) {missing} but data has no block for them")
        for task in sorted({run.task for run in self.runs.values()}):
            n = training_size(self.data.settings(task))
            if round(self.flip_fraction * n) < 1:
                raise ValueError(f"flip_fraction ({self.flip_fraction}) flips none of the {n} "
                                 f"{task} training labels: nothing to detect")
        return self


DIGITS_IMAGES = 1797  # scikit-learn's copy


def training_size(settings: MNIST1DSettings | DigitsSettings) -> int:
    """The number of training points the dataset's generator keeps, as it splits."""
    if isinstance(settings, DigitsSettings):
        return DIGITS_IMAGES - round(settings.test_fraction * DIGITS_IMAGES)
    return int(settings.num_samples * settings.train_split)


def run_id(run: MislabelMNIST1DRun) -> str:
    return f"{run.task}-{run.model}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Mislabel detection on real data (Koh & Liang 2017): self-influence finds flipped "
          "training labels among ten classes, on MNIST-1D and digits",
    citation=CITATION,
    config=MislabelMNIST1DConfig,
    run_id=run_id,
    run_columns=("status", "task", "n_parameters", "train_acc", "train_acc_unflipped",
                 "test_acc", "exact_auc", "ekfac_auc", "grad_dot_auc", "loss_auc", "random_auc"),
    grouped=False,
    train_resources=Resources(mem_mb=4000, runtime=60),
)
