"""The neural-collapse study's settings and registry entry (cheap: no torch, no numpy)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from genlab.analyses.registry import AnalysesSettings
from genlab.settings import (
    ClaimRule,
    FrozenModel,
    GaussianMixtureSettings,
    MLPSettings,
    Seed,
    Slug,
    format_float_slug,
)
from genlab.studies.entry import PlotSpec, Resources, StudyEntry

NAME = "neural_collapse"
CITATION = ("Papyan, Han, Donoho. Prevalence of neural collapse during the terminal phase of "
            "deep learning training. PNAS 117(40), 2020.")


class CollapseRecipe(FrozenModel):
    """Minibatch SGD on the cross-entropy for a fixed budget (no stop at 100% accuracy)."""

    lr: float = Field(gt=0, le=1e3, description="Initial SGD step size.")
    momentum: float = Field(0.9, ge=0, lt=1, description="Heavy-ball momentum.")
    weight_decay: float = Field(ge=0, le=1e3, description="L2 weight decay (torch.optim.SGD's).")
    batch_size: int = Field(ge=1, le=10_000_000)
    lr_drops: int = Field(2, ge=0, le=10, description="Divide the step size by 10 this many "
                          "times, evenly over the budget (Papyan et al.: 2, at 1/3 and 2/3).")
    steps: int = Field(ge=1, le=100_000_000, description="SGD steps, all of them taken.")
    track_every: int = Field(ge=1, le=100_000_000, description="Steps between NC measurements "
                             "(and history rows).")

    @model_validator(mode="after")
    def _tracks_within_budget(self) -> CollapseRecipe:
        if self.track_every > self.steps:
            raise ValueError(f"track_every ({self.track_every}) exceeds steps ({self.steps})")
        return self


class CollapseRun(FrozenModel):
    mean_scale: float = Field(gt=0, le=1e3, description="The condition: the class means' "
                              "spread (the data block's mean_scale for this run's draw).")
    seed: Seed = Field(description="Seed of the data draw, the initialisation and the minibatch "
                       "order.")


class CollapseClaims(FrozenModel):
    """The rules the literature claims are judged by at each spread (declared before the run)."""

    nc1: ClaimRule = Field(description="Per seed, log10 of NC1 at the start of the terminal "
                           "phase over NC1 at the end.")
    nc3: ClaimRule = Field(description="Per seed, Spearman(step, NC3) over the terminal phase.")
    nc2: ClaimRule = Field(description="Per seed, log10 of the class-mean cosines' spread at the "
                           "start of the terminal phase over at the end.")


class CollapseConfig(FrozenModel):
    # the class means' spread is a condition: each run's draw sets data.mean_scale to its own
    DATA_FIELDS: ClassVar[tuple[str, ...]] = ("mean_scale",)

    description: str = Field("", max_length=2000)
    data: GaussianMixtureSettings
    model: MLPSettings
    recipe: CollapseRecipe
    claims: CollapseClaims
    analyses: AnalysesSettings = Field(
        default_factory=AnalysesSettings, description="Post-hoc analyses of each run's trained "
        "model on the loss it minimised (the cross-entropy of its training labels); none unless "
        "set.")
    runs: dict[Slug, CollapseRun] = Field(min_length=1, description="One line per run; the key "
                                          "is m<mean_scale>-s<seed>.")


def run_id(run: CollapseRun) -> str:
    return f"m{format_float_slug(run.mean_scale)}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Neural collapse (Papyan et al. 2020): last-layer features collapse to a simplex ETF",
    citation=CITATION,
    config=CollapseConfig,
    run_id=run_id,
    run_columns=("status", "steps", "tpt_step", "final_train_acc", "final_test_acc",
                 "spearman_nc1", "spearman_nc3", "final_nc1", "final_nc3", "final_nc4",
                 "final_mean_cosine"),
    plots=(PlotSpec("nc1", x="step", y="nc1", title="NC1: within-class variability per step"),
           PlotSpec("nc3", x="step", y="nc3", title="NC3: classifier-to-means distance per step")),
    grouped=False,
    train_resources=Resources(mem_mb=2000, runtime=30),
)
