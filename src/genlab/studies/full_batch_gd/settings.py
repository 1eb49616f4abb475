"""The full_batch_gd study's settings (pydantic, no torch) and its registry entry."""

from __future__ import annotations

from typing import ClassVar, Self

from pydantic import Field, model_validator

from genlab.data.settings import MNIST1DSettings
from genlab.settings import (
    ClaimRule,
    Conv1DSettings,
    FieldValueError,
    FrozenModel,
    Seed,
    Slug,
)
from genlab.studies.entry import PlotSpec, Resources, StudyEntry
from genlab.train.penalised_gd_settings import PenalisedGDRecipe

NAME = "full_batch_gd"
CITATION = ("Geiping, Goldblum, Pope, Moeller & Goldstein. Stochastic training is not necessary "
            "for generalization. ICLR 2022, arXiv:2109.14119 (recipes from their code, "
            "github.com/JonasGeiping/fullbatchtraining); data: Greydanus, Scaling down deep "
            "learning (MNIST-1D), arXiv:2011.14439, 2020.")


class FullBatchClaims(FrozenModel):
    """The rules the literature claims are judged by, over seeds (declared before the run)."""

    plain_gd_worse: ClaimRule = Field(description="Per seed, the SGD baseline's test accuracy "
                                      "minus plain full-batch GD's, in percentage points.")
    penalty_matches_sgd: ClaimRule = Field(description="Per seed, the SGD baseline's test "
                                           "accuracy minus that of full-batch GD with clipping "
                                           "and the gradient-norm penalty, in points.")
    penalty_helps: ClaimRule = Field(description="Per seed, the test accuracy of full-batch GD "
                                     "with clipping and the penalty minus that of plain "
                                     "full-batch GD, in points.")


class ClaimRecipes(FrozenModel):
    """Which recipes the claims compare (keys of ``recipes``)."""

    sgd: Slug = Field(description="The small-batch SGD baseline (a stochastic recipe).")
    plain: Slug = Field(description="Plain full-batch GD: no clipping, no penalty.")
    penalised: Slug = Field(description="Full-batch GD with the gradient-norm penalty.")


class FullBatchRun(FrozenModel):
    recipe: Slug = Field(description="A key of recipes.")
    seed: Seed = Field(description="Seed of the data draw, the initialisation and (SGD) the "
                       "minibatch order.")


class FullBatchConfig(FrozenModel):
    # read by the aggregate alone: editing them re-judges without retraining
    REPORT_ONLY: ClassVar[frozenset[str]] = frozenset({"compare", "min_train_acc"})

    description: str = Field("", max_length=2000)
    data: MNIST1DSettings
    model: Conv1DSettings
    recipes: dict[Slug, PenalisedGDRecipe] = Field(min_length=1, description="The training "
                                                   "recipes compared, by name; every one is "
                                                   "reported.")
    compare: ClaimRecipes
    min_train_acc: float = Field(0.99, gt=0, le=1, description="A run whose final training "
                                 "accuracy is below this has not fitted its training set: it is "
                                 "named and left out of the claims (their question is how "
                                 "models that fit generalize).")
    claims: FullBatchClaims
    runs: dict[Slug, FullBatchRun] = Field(min_length=1, description="One line per run; the key "
                                           "is <recipe>-s<seed>.")

    @model_validator(mode="after")
    def _recipes_exist(self) -> Self:
        for name, run in self.runs.items():
            if run.recipe not in self.recipes:
                raise FieldValueError(("runs", name, "recipe"), run.recipe,
                                      f"not one of recipes: {sorted(self.recipes)}")
        roles = {"sgd": self.compare.sgd, "plain": self.compare.plain,
                 "penalised": self.compare.penalised}
        for role, name in roles.items():
            if name not in self.recipes:
                raise FieldValueError(("compare", role), name,
                                      f"not one of recipes: {sorted(self.recipes)}")
        sgd, plain, penalised = (self.recipes[n] for n in roles.values())
        if not sgd.stochastic:
            raise ValueError(f"compare.sgd: recipe {self.compare.sgd!r} must be stochastic")
        if plain.stochastic or plain.penalty or plain.grad_clip is not None:
            raise ValueError(f"compare.plain: recipe {self.compare.plain!r} must be full-batch "
                             "with no penalty and no grad_clip")
        if penalised.stochastic or not penalised.penalty:
            raise ValueError(f"compare.penalised: recipe {self.compare.penalised!r} must be "
                             "full-batch with penalty > 0")
        n_train = int(self.data.num_samples * self.data.train_split)
        for name, recipe in self.recipes.items():
            if recipe.penalty and n_train % recipe.block_size:
                raise ValueError(f"recipes.{name}.block_size {recipe.block_size} does not divide "
                                 f"the {n_train} training series")
            if recipe.eval_every > recipe.steps:
                raise ValueError(f"recipes.{name}.eval_every exceeds its steps")
        return self


def run_id(run: FullBatchRun) -> str:
    return f"{run.recipe}-s{run.seed}"


STUDY = StudyEntry(
    name=NAME,
    title="Full-batch gradient descent on MNIST-1D (Geiping et al. 2022): is SGD's noise "
          "necessary, or does an explicit gradient-norm penalty replace it?",
    citation=CITATION,
    config=FullBatchConfig,
    run_id=run_id,
    run_columns=("status", "recipe", "final_train_acc", "final_test_acc", "final_train_loss"),
    plots=(PlotSpec("test_acc", x="step", y="test_acc", title="Test accuracy per step"),),
    grouped=False,
    train_resources=Resources(mem_mb=2000, runtime=60),
)
