"""The measures-grid study's settings and registry entry (no torch, numpy or pyarrow)."""

from __future__ import annotations

import itertools
from typing import Annotated, ClassVar, Literal, Self

from pydantic import Field, model_validator

from genlab.analyses.registry import AnalysesSettings
from genlab.data.settings import (
    MNIST1DSettings,
    MNIST1DTask,
    TaskData,
    TeacherStudentSettings,
    seedless,
)
from genlab.settings import ClaimRule, FrozenModel, Seed, Slug, format_float_slug
from genlab.studies.entry import Resources, StudyEntry

NAME = "measures_grid"
CITATION = ("Jiang, Neyshabur, Mobahi, Krishnan, Bengio. Fantastic generalization measures and "
            "where to find them. ICLR 2020.")


Task = Literal["teacher", "mnist1d", "mnist1d_cnn"]
TASKS: tuple[Task, ...] = ("teacher", "mnist1d", "mnist1d_cnn")
"""The grid's conditions, each its own data, model family and recipe: MLPs on a random
teacher's labels (the small synthetic task) and on MNIST-1D (real benchmark data, Greydanus
2020), and 1-D CNNs on MNIST-1D (Jiang et al.'s second kind of family: convolutions)."""
TASK_SETTINGS: dict[str, type[FrozenModel]] = {"teacher": TeacherStudentSettings,
                                                "mnist1d": MNIST1DSettings,
                                                "mnist1d_cnn": MNIST1DSettings}
CNN_TASKS = frozenset({"mnist1d_cnn"})
"""The tasks whose models are CNNs (depth conv layers of width channels; the rest are MLPs)."""


TeacherTask = seedless(TeacherStudentSettings)


class GridData(TaskData):
    """The data of each task the runs name; a run trains on its task's draw of its seed."""

    TASK_SETTINGS: ClassVar[dict[str, type[FrozenModel]]] = TASK_SETTINGS
    task: Task | None = Field(None, description="The task of one draw, set from the run's "
                              "task (genlab.data.draws); leave unset in params.yaml.")
    teacher: TeacherTask | None = Field(  # type: ignore[valid-type]
        None, description="A random tanh teacher's labels of Gaussian inputs "
        "(TeacherStudentSettings without seed); classification with the teacher's inputs.")
    mnist1d: MNIST1DTask | None = Field(  # type: ignore[valid-type]
        None, description="MNIST-1D (MNIST1DSettings without seed).")
    mnist1d_cnn: MNIST1DTask | None = Field(  # type: ignore[valid-type]
        None, description="MNIST-1D for the CNN family (MNIST1DSettings without seed); with the "
        "same settings as mnist1d a seed's draw holds the same series (a draw's seed depends on "
        "the run's seed alone).")

    @model_validator(mode="after")
    def _classifier_teacher(self) -> Self:
        if self.teacher is not None:
            settings = self.settings("teacher")
            if settings.task != "classification" or settings.random_inputs:
                raise ValueError("teacher: the measures rank classifiers: task "
                                 "'classification' with the teacher's inputs (random_inputs "
                                 "false)")
        return self


Depth = Annotated[int, Field(ge=1, le=64)]
Width = Annotated[int, Field(ge=1, le=65_536)]
LearningRate = Annotated[float, Field(gt=0, le=1e3)]
BatchSize = Annotated[int, Field(ge=1, le=10_000_000)]
WeightDecay = Annotated[float, Field(ge=0, le=1e3)]


class MeasuresGridRun(FrozenModel):
    """One point of the grid, its task and a seed."""

    task: Task = Field(description="The condition: 'teacher', 'mnist1d' (MLPs) or "
                       "'mnist1d_cnn' (CNNs).")
    depth: Depth = Field(description="Hidden layers (CNN: convolution layers).")
    width: Width = Field(description="Units per hidden layer (CNN: channels per layer).")
    lr: LearningRate = Field(description="SGD step size.")
    batch_size: BatchSize
    weight_decay: WeightDecay = Field(description="L2 coefficient in SGD's update.")
    seed: Seed = Field(description="Seed of the initialisation and the minibatch order.")


class GridAxes(FrozenModel):
    """One task's grid: every combination of these levels, with each seed, is a run."""

    depth: tuple[Depth, ...] = Field(min_length=1, description="Hidden layers.")
    width: tuple[Width, ...] = Field(min_length=1, description="Units per hidden layer.")
    lr: tuple[LearningRate, ...] = Field(min_length=1, description="SGD step sizes.")
    batch_size: tuple[BatchSize, ...] = Field(min_length=1)
    weight_decay: tuple[WeightDecay, ...] = Field(min_length=1, description="L2 coefficients.")
    seed: tuple[Seed, ...] = Field(min_length=1, description="Seeds: each its own draw of the "
                                   "task's data, initialisations and minibatch orders.")

    @model_validator(mode="after")
    def _distinct_levels(self) -> Self:
        for axis, levels in self:
            if len(set(levels)) != len(levels):
                raise ValueError(f"{axis}: a level is listed twice in {list(levels)}")
        return self

    def runs(self, task: Task) -> dict[str, MeasuresGridRun]:
        """Every combination, keyed by run id, depth varying slowest and the seed fastest."""
        product = itertools.product(self.depth, self.width, self.lr, self.batch_size,
                                    self.weight_decay, self.seed)
        runs = (MeasuresGridRun(task=task, depth=d, width=w, lr=lr, batch_size=b,
                                weight_decay=wd, seed=s) for d, w, lr, b, wd, s in product)
        return {run_id(run): run for run in runs}


class ConvShape(FrozenModel):
    """Every convolution layer of the CNN family: Conv1d(kernel_size, stride, zero padding) ->
    activation, the last flattened into a Linear head (:class:`genlab.models.conv1d.Conv1DNet`,
    MNIST-1D's ConvBase with width 25, depth 3 and kernel 5 in the first layer)."""

    kernel_size: int = Field(3, ge=1, le=255)
    stride: int = Field(2, ge=1, le=64)
    padding: int = Field(1, ge=0, le=255)

    def output_length(self, length: int, depth: int) -> int:
        """Positions left of a series of ``length`` after ``depth`` layers (torch's formula)."""
        for _ in range(depth):
            length = (length + 2 * self.padding - self.kernel_size) // self.stride + 1
        return length


class GridRecipe(FrozenModel):
    """What every run shares: the activation, the optimizer's momentum, the budget and the stop,
    and for the CNN family the convolutions' shape."""

    activation: Literal["relu", "tanh", "gelu"] = "relu"
    conv: ConvShape | None = Field(None, description="The CNN family's layer shape: required "
                                   "for the CNN tasks (mnist1d_cnn), not allowed for the MLP "
                                   "ones.")
    momentum: float = Field(ge=0, lt=1, description="SGD heavy-ball momentum.")
    max_steps: int = Field(ge=1, le=100_000_000, description="Step budget; a run that has not "
                           "reached stop_at_train_acc by then is excluded from the ranking.")
    eval_every: int = Field(ge=1, le=100_000_000, description="Steps between evaluations (the "
                            "stop check and history rows).")
    stop_at_train_acc: float | None = Field(None, gt=0, le=1, description="Stop once the "
                                            "training accuracy reaches this.")
    stop_at_train_loss: float | None = Field(None, gt=0, le=100, description="Stop once the "
                                             "training cross-entropy falls to this (Jiang et "
                                             "al.: 0.01).")
    min_train_acc: float | None = Field(None, gt=0, le=1, description="A run that met its "
                                        "stop but ends below this training accuracy is "
                                        "excluded (Jiang et al. drop models below 0.99); runs "
                                        "that never meet the stop are excluded too.")

    @model_validator(mode="after")
    def _stops(self) -> Self:
        if self.stop_at_train_acc is None and self.stop_at_train_loss is None:
            raise ValueError("set stop_at_train_acc or stop_at_train_loss (or both): the run "
                             "stops at the first evaluation that meets either")
        return self


class GridRecipes(FrozenModel):
    """Each task's recipe (a task the runs name needs one)."""

    teacher: GridRecipe | None = None
    mnist1d: GridRecipe | None = None
    mnist1d_cnn: GridRecipe | None = None


class MeasuresBlock(FrozenModel):
    """The measures' knobs (:class:`genlab.analyses.measures.MeasureSettings`); small sample
    counts keep the costly ones (σ′, α′, λ_max, Tr H) cheap."""

    margin_quantile: float = Field(0.1, ge=0, le=1, description="γ = this quantile of the "
                                   "training margins.")
    flatness_target: float = Field(0.1, gt=0, le=10, description="Δ, the tolerated increase "
                                   "for σ′ and α′.")
    sigma_loss: Literal["error", "loss"] = Field("error", description="σ′ on the 0-1 training "
                                                 "error (Jiang et al.) or the loss.")
    sigma_samples: int = Field(10, ge=1, le=10_000, description="Monte Carlo directions for σ′.")
    sigma_depth: int = Field(15, ge=1, le=60, description="Bisection steps for σ′.")
    magnitude_eps: float = Field(1e-3, gt=0, le=1, description="ε of the magnitude-aware σ′, α′.")
    alpha_steps: int = Field(10, ge=1, le=10_000, description="Ascent steps per worst case.")
    alpha_depth: int = Field(12, ge=1, le=60, description="Bisection steps for α′.")
    loss_threshold: float = Field(0.1, gt=0, le=100, description="steps_to_loss: the first "
                                  "evaluated step with training loss at or below this.")
    lanczos_max_iter: int = Field(20, ge=2, le=10_000, description="Lanczos steps for λ_max.")
    trace_num_matvecs: int = Field(30, ge=3, le=100_000, description="Hutch++ products for Tr H.")
    id_max_examples: int = Field(1000, ge=3, le=10_000_000, description="Training examples for "
                                 "the last-layer intrinsic dimension.")
    jacobian_max_points: int = Field(256, ge=1, le=10_000_000, description="Test points for "
                                     "the input-Jacobian norm.")
    seed: Seed = Field(0, description="Seed of the measures' random directions, the same for "
                       "every model (common random numbers).")


class MeasuresGridClaims(FrozenModel):
    """The rules the literature claims are judged by, over seeds (declared before the run)."""

    flatness_top: ClaimRule = Field(description="Per seed, the better PAC-Bayes flatness "
                                    "measure's Ψ-rank over the top-third cutoff ⌈n/3⌉.")
    flatness_top_cmi: ClaimRule = Field(description="Per seed, the better PAC-Bayes flatness "
                                        "measure's rank by the conditional-MI score over the "
                                        "top-third cutoff ⌈n/3⌉.")
    spectral_negative: ClaimRule = Field(description="Per seed, Kendall τ of the product of "
                                         "spectral norms with the gap.")
    norm_below_flatness: ClaimRule = Field(description="Per seed, the smaller sign·Ψ of the two "
                                           "PAC-Bayes flatness measures minus the median "
                                           "sign·Ψ of Jiang et al.'s norm-based measures.")


class MeasuresGridConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    DATA_FIELDS: ClassVar[tuple[str, ...]] = ("task",)  # a run's task picks its draw's data
    REPORT_ONLY: ClassVar[frozenset[str]] = frozenset({"ranking_resamples"})

    data: GridData = Field(description="The tasks: each seed draws its own data from each "
                           "(genlab.data.draws), the same for every model of that task and "
                           "seed.")
    recipe: GridRecipes
    measures: MeasuresBlock
    claims: MeasuresGridClaims
    ranking_resamples: int = Field(
        200, ge=0, le=100_000, description="Bootstrap resamples of the models behind each "
        "measure's interval on τ, Ψ and the CMI score in the ranking table (0: no intervals).")
    analyses: AnalysesSettings = Field(
        default_factory=AnalysesSettings, description="Post-hoc analyses of each run's trained "
        "model on the loss it minimised (the cross-entropy of the teacher's labels); none unless "
        "set.")
    grid: dict[Task, GridAxes] = Field(
        description="Per task, the levels of each axis and the seeds: every combination is a "
        "run, keyed <task>-d<depth>-w<width>-lr<lr>-b<batch_size>-wd<weight_decay>-s<seed> "
        "('_' for the point). {} for none.")
    runs: dict[Slug, MeasuresGridRun] = Field(
        description="Runs beyond the grid, one mapping each, keyed like the grid's; {} for "
        "none. After validation this holds every run, the grid's first.")

    @model_validator(mode="after")
    def _expand_grid(self) -> Self:
        # the one place the grid becomes runs: everything downstream (stages, draws, stamps)
        # reads ``runs``; the same model re-validated from its own dump gets the same runs
        runs = {key: run for task, axes in self.grid.items()
                for key, run in axes.runs(task).items()}
        for key, run in self.runs.items():
            if runs.setdefault(key, run) != run:
                raise ValueError(f"runs.{key}: the grid has a different run of that name")
        if not runs:
            raise ValueError("no runs: give grid levels for a task, or list runs")
        object.__setattr__(self, "runs", runs)
        return self

    @model_validator(mode="after")
    def _tasks_declared(self) -> Self:
        for task in sorted({run.task for run in self.runs.values()}):
            for block in ("data", "recipe"):
                if getattr(getattr(self, block), task) is None:
                    raise ValueError(f"runs of task {task!r} need {block}.{task}")
        for task in TASKS:
            recipe = getattr(self.recipe, task)
            if recipe is None:
                continue
            if (task in CNN_TASKS) != (recipe.conv is not None):
                raise ValueError(f"recipe.{task}.conv: " + (
                    "the CNN family needs the convolutions' shape" if task in CNN_TASKS
                    else "only the CNN tasks (mnist1d_cnn) take a conv block"))
        for key, run in self.runs.items():
            conv = self.recipe_of(run).conv
            if conv is None:
                continue
            length = self.data.settings(run.task).final_seq_length
            if conv.output_length(length, run.depth) < 1:
                raise ValueError(f"runs.{key}: {run.depth} conv layers (kernel "
                                 f"{conv.kernel_size}, stride {conv.stride}, padding "
                                 f"{conv.padding}) shrink a series of {length} points to "
                                 "nothing: fewer layers, or a smaller stride")
        return self

    def recipe_of(self, run: MeasuresGridRun) -> GridRecipe:
        recipe = getattr(self.recipe, run.task)
        assert recipe is not None  # by _tasks_declared
        return recipe


def run_id(run: MeasuresGridRun) -> str:
    return (f"{run.task}-d{run.depth}-w{run.width}-lr{format_float_slug(run.lr)}"
            f"-b{run.batch_size}-wd{format_float_slug(run.weight_decay)}-s{run.seed}")


STUDY = StudyEntry(
    name=NAME,
    title="Generalization measures on a grid (Jiang et al. 2020): which measures rank models "
          "by their gap",
    citation=CITATION,
    config=MeasuresGridConfig,
    run_id=run_id,
    run_columns=("status", "task", "depth", "width", "lr", "batch_size", "weight_decay",
                 "steps", "final_train_acc", "final_test_acc", "gap"),
    grouped=True,
    train_resources=Resources(mem_mb=4000, runtime=60),
)
