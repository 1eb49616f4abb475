"""The repetition study's settings (pydantic, no torch) and its registry entry."""

from __future__ import annotations

from typing import ClassVar, Self

from pydantic import Field, model_validator

from genlab.data.settings import ModularSamplesSettings
from genlab.settings import ClaimRule, FieldValueError, FrozenModel, Seed, Slug, TransformerSettings
from genlab.studies.entry import PlotSpec, Resources, StudyEntry
from genlab.train.repetition_settings import Regime, RepetitionRecipe

NAME = "repetition"
CITATION = ("Charton & Kempe. Emergent properties with repeated examples. arXiv:2410.07041, "
            "2024.")


class RepetitionClaims(FrozenModel):
    """The rules the literature claims are judged by, over seeds (declared before the run)."""

    repetition_beats_single_use: ClaimRule = Field(description="Per seed, the final test "
                                                   "accuracy of the repeated data budget minus "
                                                   "that of single-use training, in points.")
    two_set_faster: ClaimRule = Field(description="Per seed, the steps single-use training "
                                      "takes to reach target_acc minus those two-set training "
                                      "takes (a run that never reaches it counts at the budget's "
                                      "end).")
    two_set_better: ClaimRule = Field(description="Per seed, the final test accuracy of two-set "
                                      "training minus that of single-use training, in points.")


class CompareRegimes(FrozenModel):
    """Which regimes the claims compare (keys of ``regimes``)."""

    single_use: Slug = Field(description="Every example read once (no data_budget).")
    repeated: Slug = Field(description="A smaller data budget, each example read many times.")
    two_set: Slug = Field(description="Two-set training.")


class RepetitionRun(FrozenModel):
    regime: Slug = Field(description="A key of regimes.")
    seed: Seed = Field(description="Seed of the data draw (test pairs and training stream), "
                       "the initialisation and the batches.")


class RepetitionConfig(FrozenModel):
    # read by the aggregate alone: editing them re-judges without retraining
    REPORT_ONLY: ClassVar[frozenset[str]] = frozenset({"compare", "target_acc"})

    description: str = Field("", max_length=2000)
    data: ModularSamplesSettings
    model: TransformerSettings
    recipe: RepetitionRecipe
    regimes: dict[Slug, Regime] = Field(min_length=1, description="The ways of reading the "
                                        "stream compared, by name; every one is reported.")
    compare: CompareRegimes
    target_acc: float = Field(0.9, gt=0, le=1, description="The test accuracy whose first "
                              "evaluated step measures how fast a run learns.")
    claims: RepetitionClaims
    runs: dict[Slug, RepetitionRun] = Field(min_length=1, description="One line per run; the "
                                            "key is <regime>-s<seed>.")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        for name, run in self.runs.items():
            if run.regime not in self.regimes:
                raise FieldValueError(("runs", name, "regime"), run.regime,
                                      f"not one of regimes: {sorted(self.regimes)}")
        for role in ("single_use", "repeated", "two_set"):
            name = getattr(self.compare, role)
            if name not in self.regimes:
                raise FieldValueError(("compare", role), name,
                                      f"not one of regimes: {sorted(self.regimes)}")
        kinds = {"single_use": lambda r: r.repeated_set is None and r.data_budget is None,
                 "repeated": lambda r: r.data_budget is not None,
                 "two_set": lambda r: r.repeated_set is not None}
        for role, is_kind in kinds.items():
            name = getattr(self.compare, role)
            if not is_kind(self.regimes[name]):
                raise FieldValueError(("compare", role), name, f"regime {name!r} is not a "
                                      f"{role.replace('_', '-')} regime")
        for name, regime in self.regimes.items():
            needed = regime.examples_needed(self.recipe)
            if needed > self.data.n_train:
                raise FieldValueError(("regimes", name), regime.model_dump(exclude_none=True),
                                      f"reads up to {needed} examples; data.n_train is "
                                      f"{self.data.n_train}")
            if regime.data_budget is not None and regime.data_budget < self.recipe.batch_size:
                raise FieldValueError(("regimes", name, "data_budget"), regime.data_budget,
                                      f"below one batch ({self.recipe.batch_size})")
        if self.model.vocab_size != self.data.operand_range:
            raise FieldValueError(("model", "vocab_size"), self.model.vocab_size,
                                  f"must equal data.operand_range ({self.data.operand_range}): "
                                  "each operand is one token")
        if self.model.max_len < 2:
            raise FieldValueError(("model", "max_len"), self.model.max_len,
                                  "must be at least 2 (the two operands)")
        return self


def run_id(run: RepetitionRun) -> str:
    return f"{run.regime}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Repeated examples at a fixed training budget (Charton & Kempe 2024): modular "
          "multiplication learned from a small repeated set against single-use data",
    citation=CITATION,
    config=RepetitionConfig,
    run_id=run_id,
    run_columns=("status", "regime", "repetitions", "final_seen_acc", "final_test_acc"),
    plots=(PlotSpec("test_acc", x="step", y="test_acc", title="Test accuracy per step"),),
    grouped=False,
    train_resources=Resources(mem_mb=2000, runtime=60),
)
