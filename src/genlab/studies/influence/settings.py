"""The influence study's settings (pydantic, no torch) and its registry entry."""

from __future__ import annotations

from typing import ClassVar, Self

from pydantic import Field, model_validator

from genlab.analyses.attribution_settings import MethodSettings
from genlab.analyses.registry import AnalysesSettings
from genlab.data.settings import LogisticTeacherSettings
from genlab.settings import ClaimRule, FrozenModel, Seed, Slug
from genlab.studies.entry import Resources, StudyEntry
from genlab.train.binary_settings import BinaryMLPSettings, FitSettings, LogisticSettings, ModelKind

NAME = "influence"
CITATION = ("Koh & Liang. Understanding black-box predictions via influence functions. ICML "
            "2017; Bae, Ng, Lo, Ghassemi, Grosse. If influence functions are the answer, then "
            "what is the question? NeurIPS 2022; Park, Georgiev, Ilyas, Leclerc, Madry. TRAK: "
            "attributing model behavior at scale. ICML 2023; Grosse et al. Studying large "
            "language model generalization with influence functions. arXiv 2023.")


class GroundTruthSettings(FrozenModel):
    """Retraining: leave-one-out (warm and from scratch) and the LDS subsets."""

    loo_points: int = Field(ge=2, le=1_000_000, description="K: training points removed one at "
                            "a time, retrained warm-started from the trained model.")
    loo_scratch_points: int = Field(ge=0, le=1_000_000, description="K_s ≤ K: the first K_s of "
                                    "them also retrained from the initialisation.")
    lds_subsets: int = Field(ge=2, le=1_000_000, description="M: random subsets retrained from "
                             "the initialisation for the LDS.")
    lds_fraction: float = Field(0.5, gt=0, lt=1, description="α: each subset holds α·n points.")
    lds_grad_tol: float = Field(1e-6, gt=0, le=1, description="Stationarity of the subset "
                                "retrainings (their margins differ by O(1) between subsets, so "
                                "they need far less than leave-one-out's fit.grad_tol).")
    warm_max_lbfgs: int = Field(1000, ge=1, le=10_000_000, description="L-BFGS budget of one "
                                "warm-started retraining (it mostly needs a few Newton steps).")
    seed: Seed = Field(description="Seed of the removed points and the subsets.")

    @model_validator(mode="after")
    def _scratch_within(self) -> Self:
        if self.loo_scratch_points > self.loo_points:
            raise ValueError(f"loo_scratch_points ({self.loo_scratch_points}) exceeds "
                             f"loo_points ({self.loo_points})")
        return self


class InfluenceRun(FrozenModel):
    """One model kind and initialisation seed; every method and ground truth is computed on it."""

    model: ModelKind = Field(description="logistic: L2 logistic regression; mlp: the tanh MLP.")
    seed: Seed = Field(description="Seed of the initialisation (the start of every retraining "
                       "from scratch).")


class InfluenceClaims(FrozenModel):
    """The rules the literature claims are judged by, over seeds (declared before the run)."""

    logistic_lds: ClaimRule = Field(description="Per seed, LDS of exact influence (logistic).")
    mlp_warm: ClaimRule = Field(description="Per seed, Pearson of exact GGN influence with the "
                                "warm-started leave-one-out change (MLP).")
    mlp_lds: ClaimRule = Field(description="Per seed, LDS of exact GGN influence (MLP).")


class InfluenceConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    data: LogisticTeacherSettings
    logistic: LogisticSettings
    mlp: BinaryMLPSettings
    fit: FitSettings = FitSettings()
    methods: MethodSettings = MethodSettings()
    ground_truth: GroundTruthSettings
    claims: InfluenceClaims
    shown_test_points: int = Field(3, ge=0, le=100, description="Test points (the highest test "
                                   "losses) whose top proponents and opponents the report shows.")
    # read by the aggregate stage alone: the train stages do not track it (cli.stage_settings)
    REPORT_ONLY: ClassVar[frozenset[str]] = frozenset({"shown_test_points"})
    analyses: AnalysesSettings = Field(
        default_factory=AnalysesSettings, description="Post-hoc analyses of each run's trained "
        "model on its data loss (the binary cross-entropy of the labels it was fitted to, in "
        "float64; the L2 penalty left out, λ recorded as weight_decay); none unless set.")
    runs: dict[Slug, InfluenceRun] = Field(min_length=1, description="One line per run; the key "
                                           "is <model>-s<seed>.")

    @model_validator(mode="after")
    def _sizes(self) -> Self:
        n = self.data.n_train
        if self.ground_truth.loo_points > n:
            raise ValueError(f"ground_truth.loo_points ({self.ground_truth.loo_points}) exceeds "
                             f"data.n_train ({n})")
        if not 0 < round(self.ground_truth.lds_fraction * n) < n:
            raise ValueError("ground_truth.lds_fraction leaves an empty or full subset")
        return self


def run_id(run: InfluenceRun) -> str:
    return f"{run.model}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Influence functions (Koh & Liang 2017): exact, CG, LiSSA, EK-FAC and grad-dot "
          "against leave-one-out and LDS retraining",
    citation=CITATION,
    config=InfluenceConfig,
    run_id=run_id,
    run_columns=("status", "n_parameters", "test_acc", "exact_loo_warm_pearson", "exact_lds",
                 "ekfac_lds", "grad_dot_lds", "random_lds", "cg_min_cosine", "lissa_min_cosine"),
    grouped=False,
    train_resources=Resources(mem_mb=4000, runtime=60),
)
