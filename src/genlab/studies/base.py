"""What every study provides to the pipeline, and the result of a claim check."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from genlab.studies.entry import PlotSpec, StudyEntry

if TYPE_CHECKING:

    from genlab.data.dataset import Dataset

ClaimKind = Literal["literature", "control"]
"""``literature``: a paper's claim, which could come out either way; ``control``: a check that
holds by construction or by the method's guarantee (a solver against its exact solution, a
random ranking at chance), reported and counted apart."""

ClaimStatus = Literal["reproduced", "not_reproduced", "inconclusive", "not_run",
                      "passed", "failed"]
"""A literature claim is reproduced, not reproduced or inconclusive (its interval straddles the
threshold); a control passed or failed; either may not have run (with a reason)."""


@dataclass(frozen=True)
class ClaimResult:
    """One claim checked on this study's summary, with the numbers that decided it. ``effect``
    is its estimate with the 95% interval, n and rule (genlab.studies.intervals) when the claim
    is judged by an interval."""

    study: str
    key: str  # the claim's name within its study (its declare() key)
    claim: str
    status: ClaimStatus
    numbers: Mapping[str, Any]
    citation: str
    criterion: str  # the pass criterion, in words, as the report shows it
    kind: ClaimKind = "literature"
    effect: Mapping[str, Any] | None = None
    condition: str | None = None
    """The study's condition this entry was checked under (``spread=1``), when the study
    declares several: each condition gets its own entry, and the report shows them all."""

    def to_json(self) -> dict[str, Any]:
        return {"study": self.study, "key": self.key, "kind": self.kind, "claim": self.claim,
                "condition": self.condition, "status": self.status,
                **(dict(self.effect) if self.effect else {}),
                "numbers": dict(self.numbers), "citation": self.citation,
                "criterion": self.criterion}


@dataclass(frozen=True)
class RunArtifacts:
    """What a training stage hands back to the CLI to write."""

    weights: dict[str, Any]  # name -> CPU tensor, saved as model.safetensors
    model_spec: dict[str, Any]  # model.json: enough to rebuild the model around the weights
    history: pa.Table
    metrics: dict[str, Any]


@dataclass(frozen=True)
class TrainingObjective:
    """The training loss a run minimised, as the post-hoc analyses need it: the training inputs,
    the targets the model was trained on (corrupted labels included), the loss as a mean over a
    batch, and the optimizer's step size, momentum and batch size (None: full batch). Weight
    decay is recorded, not folded in: the analyses study the data loss's curvature."""

    X: Any
    y: Any
    loss_fn: Callable[[Any, Any], Any]
    lr: float
    momentum: float = 0.0
    batch_size: int | None = None
    weight_decay: float = 0.0


def training_objective(X: Any, y: Any, settings: Any) -> TrainingObjective:
    """The :class:`TrainingObjective` of a run trained with ``settings`` (a TrainSettings) on
    (X, y)."""
    from genlab.losses import loss_value

    def loss_fn(output: Any, target: Any) -> Any:
        return loss_value(settings.loss, output, target)

    return TrainingObjective(X=X, y=y, loss_fn=loss_fn, lr=settings.lr,
                             momentum=settings.momentum, batch_size=settings.batch_size,
                             weight_decay=settings.weight_decay)


def array_objective(x: Any, y: Any, settings: Any, device: Any) -> TrainingObjective:
    """:func:`training_objective` of training arrays (numpy, as a Dataset holds them), on
    ``device``."""
    import torch

    return training_objective(torch.from_numpy(x).to(device), torch.from_numpy(y).to(device),
                              settings)


def ensemble_data(datasets: Sequence[Dataset], device: Any,
                  y_train: Sequence[Any] | None = None) -> tuple[Any, Any, Any, Any]:
    """``x_train, y_train, x_test, y_test`` of the runs trained on ``datasets`` (one per run,
    in order), as :func:`genlab.train.ensemble.train_classifier_ensemble` takes them: one tensor
    for all where every run trains on one draw (the same Dataset object), else one per run (each
    seed its own draw). ``y_train``: each run's own training labels (a label-noise draw, numpy),
    in place of its dataset's."""
    import torch

    cache: dict[int, Any] = {}  # a draw's arrays move to the device once

    def tensor(a: Any) -> Any:
        if id(a) not in cache:
            cache[id(a)] = torch.from_numpy(a).to(device)
        return cache[id(a)]

    shared = all(d is datasets[0] for d in datasets)

    def inputs(split: str) -> Any:
        xs = [tensor(getattr(d, split).x) for d in datasets]
        return xs[0] if shared else xs

    labels = ([tensor(d.train.y) for d in datasets] if y_train is None
              else [torch.from_numpy(y).to(device) for y in y_train])
    test_labels = [tensor(d.test.y) for d in datasets]
    return (inputs("train"), labels[0] if shared and y_train is None else torch.stack(labels),
            inputs("test"), test_labels[0] if shared else torch.stack(test_labels))


@dataclass(frozen=True)
class Summary:
    """A study's aggregate: JSON-able numbers and claim results, plus a long table for figures."""

    data: dict[str, Any]
    claims: tuple[ClaimResult, ...]
    table: pa.Table


def plot_table(plot: PlotSpec, table: pa.Table) -> pa.Table:
    """The rows of ``table`` that ``plot`` draws, in table order: ``run``, x and y, without the
    rows where x or y is null or NaN (a history logs some columns only every few steps, and
    DVC's renderer drops or mis-draws the empty cells)."""
    import pyarrow.compute as pc

    columns = ("run", plot.x, plot.y)
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise KeyError(f"plot {plot.name!r}: the summary table has no column {missing}")
    keep = pa.array([True] * table.num_rows, pa.bool_())
    for name in (plot.x, plot.y):
        column = table.column(name)
        keep = pc.and_(keep, pc.is_valid(column))
        if pa.types.is_floating(column.type):
            keep = pc.and_(keep, pc.invert(pc.is_nan(column)))
    return table.select(list(columns)).filter(pc.fill_null(keep, False))


@dataclass(frozen=True)
class StudySpec:
    """A study's experiment: the code that makes its data and trained runs (``experiment.SPEC``).

    Its summary and claims are ``claims.summarize`` and its report figures ``figures.figures``,
    in modules of their own (:func:`genlab.studies.load_claims`, :func:`load_figures`), so that
    a stage imports only what it runs: editing a figure retrains nothing."""

    entry: StudyEntry
    synthesize: Callable[[Any], Dataset]
    train_run: Callable[[Any, str, Dataset, Any, Any], RunArtifacts]
    """(study settings, run id, dataset, torch device, Checkpointing or None) -> artifacts."""
    train_group: Callable[[Any, Sequence[str], Mapping[str, Dataset], Any],
                          dict[str, RunArtifacts]] | None = None
    """(study settings, run ids, each run's dataset (its seed's draw; runs of one draw share the
    object), torch device) -> artifacts by run id, every run trained at once (the vectorised
    engine, seeds and grid points as its batch dimension); each run's artifacts equal what
    ``train_run`` makes of it.
    Present exactly when the entry is ``grouped``; a killed group restarts from scratch: the
    engine has no checkpoints."""
    objective: Callable[[Any, str, Dataset, Any], TrainingObjective | None] | None = None
    """(study settings, run id, dataset, torch device) -> the run's training loss, which the
    post-hoc analyses need, or None for a run with no trained network to analyse (the analyses
    skip it, with the reason its model.json gives); present exactly when the settings have an
    ``analyses`` block."""

    def __post_init__(self) -> None:
        if self.entry.grouped != (self.train_group is not None):
            raise ValueError(f"study {self.entry.name}: StudyEntry.grouped is "
                             f"{self.entry.grouped} but train_group is {self.train_group}")
        if self.entry.has_analyses != (self.objective is not None):
            raise ValueError(f"study {self.entry.name}: an analyses block needs an objective, "
                             "and an objective an analyses block")

    # the entry's fields, read through the spec where code holds a spec
    name = property(lambda self: self.entry.name)
    title = property(lambda self: self.entry.title)
    citation = property(lambda self: self.entry.citation)
    config = property(lambda self: self.entry.config)
    run_id = property(lambda self: self.entry.run_id)
    run_columns = property(lambda self: self.entry.run_columns)
    plots = property(lambda self: self.entry.plots)


def stack_histories(histories: Mapping[str, pa.Table], metrics: Mapping[str, Mapping[str, Any]],
                    columns: Sequence[str] = ()) -> pa.Table:
    """Every run's history in one long table (a summary's table): the rows of each run, in run
    order, with a ``run`` column and the named per-run metrics repeated on each row."""
    tables = []
    for run, history in sorted(histories.items()):
        table = history.append_column("run", pa.array([run] * history.num_rows))
        for column in columns:
            table = table.append_column(column, pa.array([metrics[run][column]] * history.num_rows))
        tables.append(table)
    return pa.concat_tables(tables, promote_options="default")
