"""The label_sharpness study's settings (pydantic, no torch) and its registry entry."""

from __future__ import annotations

from typing import ClassVar, Literal, Self

from pydantic import Field, model_validator

from genlab.data.settings import (
    DigitsSettings,
    DigitsTask,
    FourierLabelSettings,
    MNIST1DSettings,
    MNIST1DTask,
)
from genlab.settings import (
    AdamFitRecipe,
    ClaimRule,
    FieldValueError,
    FrozenModel,
    MLPSettings,
    Seed,
    Slug,
)
from genlab.studies.entry import Resources, StudyEntry

NAME = "label_sharpness"
CITATION = ("Konz & Mazurowski. The effect of intrinsic dataset properties on generalization: "
            "unraveling learning differences between natural and medical images. ICLR 2024, "
            "arXiv:2401.08865; data: Greydanus, Scaling down deep learning (MNIST-1D), "
            "arXiv:2011.14439, 2020; digits: Alpaydin & Kaynak, UCI, 1998 (scikit-learn's "
            "copy).")

Task = Literal["waves", "mnist1d", "digits"]
REAL_TASKS = ("mnist1d", "digits")


class WavesBlock(FrozenModel):
    """The synthetic datasets' shared settings (FourierLabelSettings without the seed, the
    dimension and the frequency, which each run sets)."""

    ambient_dim: int = Field(ge=1, le=100_000, description="Input dimension D.")
    n_waves: int = Field(32, ge=1, le=10_000, description="Cosines summed by the labelling.")
    n_train: int = Field(ge=2, le=10_000_000, description="Training points drawn (the largest "
                         "train size; smaller sizes take the first n).")
    n_test: int = Field(ge=2, le=10_000_000)


class SharpnessData(FrozenModel):
    """The datasets the runs name; ``task``, ``intrinsic_dim``, ``frequency`` and ``pair`` are
    set per draw from the run (genlab.data.draws): leave them unset in params.yaml."""

    seed: Seed = Field(description="Base of every draw's seed.")
    task: Task | None = Field(None, description="The draw's dataset (set from the run).")
    intrinsic_dim: int | None = Field(None, ge=1, le=1000, description="waves: the draw's d.")
    frequency: float | None = Field(None, gt=0, le=1e3, description="waves: the draw's omega.")
    pair: str | None = Field(None, pattern=r"^[0-9]v[0-9]$", description="mnist1d/digits: the "
                             "two classes of the draw, '<a>v<b>' (a is relabelled 0, b 1).")
    waves: WavesBlock | None = Field(None, description="Fourier-labelled d-planes "
                                     "(genlab.data.fourier_labels).")
    mnist1d: MNIST1DTask | None = Field(  # type: ignore[valid-type]
        None, description="MNIST-1D (MNIST1DSettings without seed); a run keeps two classes.")
    digits: DigitsTask | None = Field(  # type: ignore[valid-type]
        None, description="scikit-learn's 8x8 digits (DigitsSettings without seed); a run "
        "keeps two classes.")

    def settings(self) -> FourierLabelSettings | MNIST1DSettings | DigitsSettings:
        """The generator's settings of this draw."""
        if self.task is None:
            raise ValueError("no task: read a draw's data block")
        block = getattr(self, self.task)
        if block is None:
            raise ValueError(f"data.{self.task} is not set")
        if self.task == "waves":
            return FourierLabelSettings(**block.model_dump(), seed=self.seed,
                                        intrinsic_dim=self.intrinsic_dim,
                                        frequency=self.frequency)
        kind = MNIST1DSettings if self.task == "mnist1d" else DigitsSettings
        return kind(**block.model_dump(), seed=self.seed)

    def classes(self) -> tuple[int, int]:
        """The draw's two classes (real data)."""
        a, b = self.pair.split("v")
        return int(a), int(b)


class AttackSettings(FrozenModel):
    """PGD in the L-inf ball (genlab.analyses.robustness) on the test set, inputs scaled to a
    root-mean-square entry of 1."""

    epsilon: float = Field(gt=0, le=100, description="The radius the claims use.")
    also: tuple[float, ...] = Field((), description="Further radii measured and reported.")
    steps: int = Field(20, ge=1, le=10_000, description="PGD steps (step size 2.5 eps/steps).")

    @property
    def radii(self) -> tuple[float, ...]:
        return tuple(sorted({self.epsilon, *self.also}))


def radius_key(eps: float) -> str:
    """How a radius names its entry of a model's ``robust_acc`` (``0.05``)."""
    return f"{eps:g}"


class SharpnessClaims(FrozenModel):
    """The rules the literature claims and the control are judged by, over seeds."""

    loss_exponent_falls_with_dim: ClaimRule = Field(description="Per seed, Spearman(d, alpha) "
                                                   "over the synthetic datasets, alpha the "
                                                   "exponent of test loss ~ N^-alpha.")
    robustness_falls_with_sharpness: ClaimRule = Field(description="Per seed, Spearman(K_F, "
                                                       "robust accuracy) over every dataset at "
                                                       "its largest train size.")
    robustness_falls_with_sharpness_at_fixed_dim: ClaimRule = Field(
        description="Per seed, the mean over d of Spearman(K_F, robust accuracy) over the "
        "synthetic datasets of that d.")
    repr_dim_within_data_dim: ClaimRule = Field(description="Per seed, the largest d_repr - "
                                                "d_data - tolerance over the real-data models.")
    repr_dim_within_latent_dim: ClaimRule = Field(description="Control: per seed, the largest "
                                                  "d_repr - d - tolerance over the synthetic "
                                                  "models (a Lipschitz map cannot raise a "
                                                  "set's dimension).")


class SharpnessRun(FrozenModel):
    task: Task = Field(description="waves, mnist1d or digits.")
    intrinsic_dim: int | None = Field(None, ge=1, le=1000, description="waves: d.")
    frequency: float | None = Field(None, gt=0, le=1e3, description="waves: omega.")
    pair: str | None = Field(None, pattern=r"^[0-9]v[0-9]$", description="mnist1d/digits: the "
                             "two classes, '<a>v<b>'.")
    seed: Seed = Field(description="Seed of the data draw, the initialisation and the batches.")

    @model_validator(mode="after")
    def _task_fields(self) -> Self:
        if self.task == "waves":
            if self.intrinsic_dim is None or self.frequency is None or self.pair is not None:
                raise ValueError("a waves run needs intrinsic_dim and frequency, and no pair")
        elif self.pair is None or self.intrinsic_dim is not None or self.frequency is not None:
            raise ValueError(f"a {self.task} run needs pair, and no intrinsic_dim or frequency")
        elif len(set(self.pair.split("v"))) != 2:
            raise FieldValueError("pair", self.pair, "needs two different classes")
        return self


class LabelSharpnessConfig(FrozenModel):
    # a run's dataset: its task, and its dimension and frequency or class pair
    DATA_FIELDS: ClassVar[tuple[str, ...]] = ("task", "intrinsic_dim", "frequency", "pair")

    description: str = Field("", max_length=2000)
    data: SharpnessData
    model: MLPSettings
    recipe: AdamFitRecipe
    train_sizes: tuple[int, ...] = Field(min_length=2, description="waves: the training set "
                                         "sizes of each run's learning curve (the first n "
                                         "points), increasing; real data trains on all of its "
                                         "pair's training split.")
    attack: AttackSettings
    sharpness_samples: int = Field(1000, ge=2, le=100_000, description="M: training points "
                                   "K_F compares (every pair of them).")
    claims: SharpnessClaims
    runs: dict[Slug, SharpnessRun] = Field(min_length=1, description="One line per run; the key "
                                          "is waves-d<d>-w<omega>-s<seed> or "
                                          "<task>-<a>v<b>-s<seed>.")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        sizes = list(self.train_sizes)
        if sizes != sorted(set(sizes)):
            raise FieldValueError("train_sizes", sizes, "must be increasing")
        for name, run in self.runs.items():
            if getattr(self.data, run.task) is None:
                raise FieldValueError(("runs", name, "task"), run.task,
                                      f"data.{run.task} is not set")
            if run.task == "waves":
                if run.intrinsic_dim > self.data.waves.ambient_dim:
                    raise FieldValueError(("runs", name, "intrinsic_dim"), run.intrinsic_dim,
                                          f"exceeds data.waves.ambient_dim "
                                          f"({self.data.waves.ambient_dim})")
                if sizes[-1] > self.data.waves.n_train:
                    raise FieldValueError("train_sizes", sizes, f"the largest exceeds "
                                          f"data.waves.n_train ({self.data.waves.n_train})")
        return self


def _number(value: float) -> str:
    return f"{value:g}".replace(".", "_")


def run_id(run: SharpnessRun) -> str:
    if run.task == "waves":
        return f"waves-d{run.intrinsic_dim}-w{_number(run.frequency)}-s{run.seed}"
    return f"{run.task}-{run.pair}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Label sharpness, intrinsic dimension and adversarial robustness (Konz & Mazurowski "
          "2024) on synthetic manifolds, MNIST-1D and digits",
    citation=CITATION,
    config=LabelSharpnessConfig,
    run_id=run_id,
    run_columns=("dataset", "label_sharpness", "d_data", "d_repr", "test_acc", "robust_acc"),
    plots=(),
    grouped=True,
    seed_block=10,  # ten seeds' runs in one stage: the synthetic models of one N as one ensemble
    train_resources=Resources(mem_mb=2000, runtime=60),
)
