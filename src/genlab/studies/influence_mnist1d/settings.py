"""The influence_mnist1d study's settings (pydantic, no torch) and its registry entry."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from genlab.analyses.attribution_settings import MethodSettings
from genlab.data.settings import MNIST1DSettings
from genlab.settings import ClaimRule, FrozenModel, Seed, Slug
from genlab.studies.entry import Resources, StudyEntry
from genlab.train.binary_settings import BinaryMLPSettings, FitSettings, LogisticSettings, ModelKind

NAME = "influence_mnist1d"
CITATION = ("Koh & Liang. Understanding black-box predictions via influence functions. ICML "
            "2017; Park, Georgiev, Ilyas, Leclerc, Madry. TRAK: attributing model behavior at "
            "scale. ICML 2023; Deng, Li, et al. dattri: a library for efficient data "
            "attribution. NeurIPS 2024 (datasets and benchmarks); data: Greydanus, Scaling down "
            "deep learning (MNIST-1D), arXiv:2011.14439, 2020.")


class LDSSettings(FrozenModel):
    """The linear datamodeling score's retrainings (dattri's protocol, scaled to MNIST-1D)."""

    subsets: int = Field(ge=2, le=1_000_000, description="M: random subsets of the training "
                         "set, each retrained from scratch.")
    fraction: float = Field(0.5, gt=0, lt=1, description="α: each subset holds α·n points.")
    retrain_seeds: int = Field(ge=1, le=1000, description="R: each subset is retrained from R "
                               "initialisations and its test margins averaged (the expected "
                               "margin under training noise, as dattri's LDS ground truth).")
    grad_tol: float = Field(1e-5, gt=0, le=1, description="Stationarity of the retrainings, "
                            "L-BFGS alone (the margins differ by O(0.1-1) between subsets).")
    seed: Seed = Field(description="Seed of the subsets and of the retrainings' "
                       "initialisations.")


class AttributionClaims(FrozenModel):
    """The rules the literature claims are judged by, over seeds (declared before the run)."""

    logistic_lds: ClaimRule = Field(description="Per seed, LDS of exact influence (logistic "
                                    "regression).")
    mlp_lds: ClaimRule = Field(description="Per seed, LDS of exact GGN influence (MLP).")
    curvature_helps: ClaimRule = Field(description="Per seed and model, LDS of exact influence "
                                       "minus LDS of grad-dot (TracIn at the final checkpoint).")


class AttributionRun(FrozenModel):
    model: ModelKind = Field(description="logistic: multinomial L2 logistic regression; mlp: "
                             "the tanh MLP.")
    seed: Seed = Field(description="Seed of the data draw (its own MNIST-1D series) and of the "
                       "initialisation.")


class InfluenceMNIST1DConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    data: MNIST1DSettings
    logistic: LogisticSettings
    mlp: BinaryMLPSettings
    fit: FitSettings = FitSettings()
    methods: MethodSettings = MethodSettings()
    lds: LDSSettings
    claims: AttributionClaims
    runs: dict[Slug, AttributionRun] = Field(min_length=1, description="One line per run; the "
                                             "key is <model>-s<seed>.")

    @model_validator(mode="after")
    def _sizes(self) -> Self:
        n = int(self.data.num_samples * self.data.train_split)  # as the generator splits
        if not 0 < round(self.lds.fraction * n) < n:
            raise ValueError(f"lds.fraction ({self.lds.fraction}) of the {n} training series "
                             "leaves an empty or full subset")
        return self


def run_id(run: AttributionRun) -> str:
    return f"{run.model}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Data attribution on dattri's protocol on MNIST-1D: exact, LiSSA, EK-FAC, TRAK "
          "and grad-dot influence against retraining on random halves (LDS)",
    citation=CITATION,
    config=InfluenceMNIST1DConfig,
    run_id=run_id,
    run_columns=("status", "n_parameters", "test_acc", "exact_lds", "ekfac_lds", "trak_lds",
                 "grad_dot_lds", "random_lds", "lissa_min_cosine"),
    grouped=False,
    train_resources=Resources(mem_mb=4000, runtime=60),
)
