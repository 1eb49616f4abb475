"""Settings of training on a stream with repeated examples (:mod:`genlab.train.repetition`):
pydantic only, no torch, so the settings import path stays cheap."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from genlab.settings import FieldValueError, FrozenModel


class RepetitionRecipe(FrozenModel):
    """Adam on cross-entropy with a constant step size for a fixed number of steps."""

    lr: float = Field(gt=0, le=10, description="Adam's step size, constant.")
    betas: tuple[float, float] = Field((0.9, 0.999), description="Adam's (β1, β2).")
    weight_decay: float = Field(0.0, ge=0, le=10, description="Adam's L2 weight decay.")
    batch_size: int = Field(ge=1, le=1_000_000)
    steps: int = Field(ge=1, le=100_000_000, description="The fixed training budget, in steps: "
                       "every regime takes exactly this many.")
    eval_every: int = Field(ge=1, le=100_000_000, description="Steps between evaluations.")
    n_eval_seen: int = Field(2000, ge=1, le=1_000_000, description="How many of the examples a "
                             "run repeats (the head of its budget, or its repeated set) each "
                             "evaluation scores: its memorisation.")

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not all(0 <= b < 1 for b in self.betas):
            raise FieldValueError("betas", list(self.betas), "each must be in [0, 1)")
        if self.eval_every > self.steps:
            raise FieldValueError("eval_every", self.eval_every, f"exceeds steps ({self.steps})")
        return self

    @property
    def examples_read(self) -> int:
        """Training examples read in the whole budget: steps * batch_size."""
        return self.steps * self.batch_size


class Regime(FrozenModel):
    """Which examples a run reads: a data budget (distinct examples, each read about
    ``examples_read / data_budget`` times; null reads each once) or two-set training (a repeated
    set read with probability ``repeated_prob`` per example, fresh examples otherwise)."""

    data_budget: int | None = Field(None, ge=1, le=100_000_000, description="Distinct examples "
                                    "the run cycles through; null: every example read once "
                                    "(single-use, steps * batch_size of them).")
    repeated_set: int | None = Field(None, ge=1, le=100_000_000, description="Two-set "
                                     "training: the size of the small set read repeatedly.")
    repeated_prob: float | None = Field(None, gt=0, lt=1, description="Two-set training: the "
                                        "probability that an example of a batch comes from the "
                                        "repeated set.")

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        if (self.repeated_set is None) != (self.repeated_prob is None):
            raise ValueError("two-set training needs both repeated_set and repeated_prob")
        if self.repeated_set is not None and self.data_budget is not None:
            raise FieldValueError("data_budget", self.data_budget, "a two-set regime reads "
                                  "fresh examples beside its repeated set: omit data_budget")
        return self

    def budget(self, recipe: RepetitionRecipe) -> int:
        """Distinct examples a one-set regime reads (its data budget, or single-use's all)."""
        return recipe.examples_read if self.data_budget is None else self.data_budget

    def examples_needed(self, recipe: RepetitionRecipe) -> int:
        """The most examples of the stream this regime can read."""
        if self.repeated_set is not None:
            return self.repeated_set + recipe.examples_read
        return self.budget(recipe)

    def repetitions(self, recipe: RepetitionRecipe) -> float:
        """How many times the run reads each repeated example, on average."""
        if self.repeated_set is not None:
            return recipe.examples_read * self.repeated_prob / self.repeated_set
        return recipe.examples_read / self.budget(recipe)
