"""The intrinsic-dimension study's settings and registry entry (no torch, numpy or pyarrow)."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, field_validator, model_validator

from genlab.analyses.registry import AnalysesSettings
from genlab.data.settings import ManifoldSettings, TeacherStudentSettings
from genlab.settings import ClaimRule, FrozenModel, MLPSettings, Seed, Slug, TrainSettings
from genlab.studies.entry import Resources, StudyEntry

NAME = "intrinsic_dim"
CITATION = ("Facco, d'Errico, Rodriguez, Laio. Estimating the intrinsic dimension of datasets by "
            "a minimal neighborhood information. Sci. Rep. 2017; Levina & Bickel. Maximum "
            "likelihood estimation of intrinsic dimension. NeurIPS 2004; Ansuini, Laio, Macke, "
            "Zoccolan. Intrinsic dimension of data representations in deep neural networks. "
            "NeurIPS 2019; Li, Farkhoor, Liu, Yosinski. Measuring the intrinsic dimension of "
            "objective landscapes. ICLR 2018; Pope, Zhu, Abdelkader, Goldblum, Goldstein. The "
            "intrinsic dimension of images and its impact on learning. ICLR 2021; Konz & "
            "Mazurowski. The effect of intrinsic dataset properties on generalization. ICLR 2024.")


def _increasing(values: tuple[int, ...]) -> tuple[int, ...]:
    if list(values) != sorted(set(values)):
        raise ValueError("must be strictly increasing")
    return values


Dim = Annotated[int, Field(ge=1, le=100_000)]


# ---------------------------------------------------------------------------------------------
# Settings.
# ---------------------------------------------------------------------------------------------


class EstimatorSettings(FrozenModel):
    """Part 1: the estimators on points of known dimension."""

    dims: tuple[Dim, ...] = Field(min_length=1, max_length=64, description="True intrinsic "
                                  "dimensions d, strictly increasing; each must be ≤ "
                                  "ambient_dim.")
    ambient_dim: int = Field(ge=1, le=100_000, description="Ambient dimension D of the "
                             "embedding.")
    n_points: int = Field(ge=25, le=1_000_000, description="Points per estimate.")
    embedding_scale: float = Field(1.0, gt=0, le=1e3, description="tanh runs: x = tanh(scale "
                                   "Q z + b) (see genlab.data.manifolds).")
    mle_k: int = Field(20, ge=3, le=1000, description="Neighbours k of the MLE.")
    twonn_discard: float = Field(0.1, ge=0, lt=1, description="Fraction of the largest "
                                 "ratios r2/r1 TwoNN discards (Facco et al.: 0.1).")

    @field_validator("dims")
    @classmethod
    def _dims_increase(cls, dims: tuple[int, ...]) -> tuple[int, ...]:
        return _increasing(dims)

    @model_validator(mode="after")
    def _fits(self) -> Self:
        if self.dims[-1] > self.ambient_dim:
            raise ValueError(f"dims up to {self.dims[-1]} exceed ambient_dim "
                             f"{self.ambient_dim}")
        if self.mle_k >= self.n_points:
            raise ValueError("mle_k must be below n_points")
        return self


class LayersSettings(FrozenModel):
    """Part 2: the network whose representations are measured, on the study's dataset."""

    model: MLPSettings
    train: TrainSettings
    twonn_discard: float = Field(0.1, ge=0, lt=1, description="TwoNN's discarded fraction.")


class SubspaceSettings(FrozenModel):
    """Part 3: d_int90 of an MLP with ``depth`` hidden layers of the run's width."""

    data: TeacherStudentSettings = Field(description="The task, the same for every width.")
    depth: int = Field(2, ge=1, le=64, description="Hidden layers, each of the run's width.")
    activation: Literal["relu", "tanh", "gelu"] = "relu"
    dims: tuple[Dim, ...] = Field(min_length=1, max_length=64, description="Subspace "
                                  "dimensions d to train, strictly increasing (a doubling grid "
                                  "resolves d_int90 to a factor 2).")
    full_train: TrainSettings = Field(description="Recipe of the full model (all D "
                                      "parameters).")
    train: TrainSettings = Field(description="Recipe of z in θ = θ₀ + P z.")
    threshold: float = Field(0.9, gt=0, le=1, description="d_int is the smallest d reaching "
                             "threshold × the full model's test accuracy (Li et al.: 0.9).")
    stop_at_target: bool = Field(False, description="End a run's sweep at the first d that "
                                 "reaches the target: d_int90 needs no larger d, and the "
                                 "largest d cost the most.")

    @field_validator("dims")
    @classmethod
    def _dims_increase(cls, dims: tuple[int, ...]) -> tuple[int, ...]:
        return _increasing(dims)

    @field_validator("data")
    @classmethod
    def _classification(cls, data: TeacherStudentSettings) -> TeacherStudentSettings:
        if data.task != "classification":
            raise ValueError("d_int90 is defined on accuracy: task must be 'classification'")
        return data


class ScalingSettings(FrozenModel):
    """Part 4: learning curves on manifolds of dimension d_data (the runs' d_data)."""

    ambient_dim: int = Field(ge=1, le=100_000, description="Ambient dimension D (≥ every "
                             "run's d_data).")
    embedding: Literal["linear", "tanh"] = "tanh"
    embedding_scale: float = Field(1.0, gt=0, le=1e3)
    n_classes: int = Field(2, ge=2, le=1000, description="Teacher classes (2: K̂_F is exactly "
                           "Konz & Mazurowski's binary definition).")
    teacher_hidden: tuple[Annotated[int, Field(ge=1, le=65_536)], ...] = Field(
        max_length=64, description="Hidden widths of the random tanh teacher on the latent.")
    sizes: tuple[Annotated[int, Field(ge=2, le=10_000_000)], ...] = Field(
        min_length=1, max_length=64, description="Training-set sizes N, strictly increasing; "
        "each N trains on the first N points of one draw of max(sizes).")
    n_test: int = Field(ge=1, le=10_000_000)
    model: MLPSettings
    train: TrainSettings

    @field_validator("sizes")
    @classmethod
    def _sizes_increase(cls, sizes: tuple[int, ...]) -> tuple[int, ...]:
        return _increasing(sizes)


class LabelSharpnessSettings(FrozenModel):
    num_samples: int = Field(1000, ge=2, le=1_000_000, description="M, training points "
                             "sampled (Konz & Mazurowski: 1000); K̂_F is the max over their "
                             "pairs.")


class EstimateRun(FrozenModel):
    kind: Literal["estimate"]
    embedding: Literal["linear", "tanh"] = Field(description="How the latents are embedded.")
    seed: Seed = Field(description="Seed of the points (embedding and latents).")


class LayersRun(FrozenModel):
    kind: Literal["layers"]
    labels: Literal["clean", "random"] = Field(description="clean: the teacher's (true) "
                                               "labels; random: every training label replaced "
                                               "by a uniform class.")
    seed: Seed = Field(description="Seed of the initialisation and the minibatch order.")


class SubspaceRun(FrozenModel):
    kind: Literal["subspace"]
    width: int = Field(ge=1, le=65_536, description="Units per hidden layer.")
    seed: Seed = Field(description="Seed of θ₀ (the initialisation), P and the minibatches.")


class ScalingRun(FrozenModel):
    kind: Literal["scaling"]
    d_data: int = Field(ge=1, le=100_000, description="Intrinsic dimension of the latent.")
    seed: Seed = Field(description="Seed of the data (embedding, teacher, latents), the "
                       "initialisation and the minibatches.")


IntrinsicDimRun = Annotated[EstimateRun | LayersRun | SubspaceRun | ScalingRun,
                            Field(discriminator="kind")]


class IntrinsicDimClaims(FrozenModel):
    """The rules the literature claims are judged by, over seeds (declared before the run)."""

    twonn: ClaimRule = Field(description="Per seed, TwoNN's largest window miss / d.")
    mle: ClaimRule = Field(description="Per seed, the MLE's largest window miss / d.")
    layers: ClaimRule = Field(description="Per seed, min(ID init − ID true, ID random − ID "
                              "true) of the last hidden layer.")
    hunchback: ClaimRule = Field(description="Per seed, the largest early hidden-layer ID minus "
                                 "max(input ID, last hidden ID).")
    subspace: ClaimRule = Field(description="Per seed, max/min d_int90 of the narrowest and the "
                                "widest net.")
    scaling: ClaimRule = Field(description="Per seed, the smallest rise of test error between "
                               "adjacent d_data.")


class IntrinsicDimConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    data: ManifoldSettings = Field(description="The study's dataset (the layers part): a "
                                   "teacher-labelled manifold, classification.")
    estimators: EstimatorSettings
    layers: LayersSettings
    subspace: SubspaceSettings
    scaling: ScalingSettings
    label_sharpness: LabelSharpnessSettings = LabelSharpnessSettings()
    claims: IntrinsicDimClaims
    analyses: AnalysesSettings = Field(
        default_factory=AnalysesSettings, description="Post-hoc analyses of the layers runs' "
        "trained MLPs on the loss each minimised (layers.train's, on the labels it was trained "
        "on); the other kinds of run save no model the analyses can load and are skipped with "
        "that reason. None unless set.")
    runs: dict[Slug, IntrinsicDimRun] = Field(
        min_length=1, description="One line per run; the key is derived from the settings: "
        "estimate-<embedding>-s<seed>, layers-<clean|random>-s<seed>, subspace-w<width>-s<seed>, "
        "scaling-d<d_data>-s<seed>.")

    @field_validator("data")
    @classmethod
    def _classification(cls, data: ManifoldSettings) -> ManifoldSettings:
        if data.task != "classification":
            raise ValueError("the layers part trains classifiers: task must be "
                             "'classification'")
        return data

    @model_validator(mode="after")
    def _runs(self) -> Self:
        for key, run in self.runs.items():
            expected = run_id(run)
            if key != expected:
                raise ValueError(f"runs.{key}: a run's name is derived from its settings; "
                                 f"expected {expected!r}")
            if isinstance(run, ScalingRun) and run.d_data > self.scaling.ambient_dim:
                raise ValueError(f"runs.{key}: d_data {run.d_data} exceeds "
                                 f"scaling.ambient_dim {self.scaling.ambient_dim}")
        return self


def run_id(run: EstimateRun | LayersRun | SubspaceRun | ScalingRun) -> str:
    if isinstance(run, EstimateRun):
        return f"estimate-{run.embedding}-s{run.seed}"
    if isinstance(run, LayersRun):
        return f"layers-{run.labels}-s{run.seed}"
    if isinstance(run, SubspaceRun):
        return f"subspace-w{run.width}-s{run.seed}"
    return f"scaling-d{run.d_data}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Intrinsic dimension: estimators, representations across depth (Ansuini 2019), "
          "d_int90 (Li 2018) and learning curves vs d_data (Pope 2021, Konz 2024)",
    citation=CITATION,
    config=IntrinsicDimConfig,
    run_id=run_id,
    run_columns=("status", "kind", "seed", "final_test_acc", "last_hidden_id", "d_int90",
                 "n_parameters", "test_err_by_n"),
    grouped=True,
    # two seeds a stage: their four layers runs train as one ensemble (2.8x a loop of four on
    # one thread, where sixteen gave 1.8x), and the five stages keep both cores busy
    seed_block=2,
    train_resources=Resources(mem_mb=2000, runtime=30),
)
