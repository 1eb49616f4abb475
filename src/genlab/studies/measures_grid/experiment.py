"""The measures-grid study's experiment: data, and training (alone or grouped) with the measures."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import torch
from torch.nn import functional as F

from genlab.analyses.measures.registry import (
    MEASURES,
    MeasureInputs,
    MeasureSettings,
    compute_measures,
)
from genlab.data.mnist1d import mnist1d
from genlab.data.teacher_student import teacher_student
from genlab.models.registry import (
    build_seeded_model,
    count_parameters,
    model_spec,
    state_tensors,
)
from genlab.seeding import torch_generator
from genlab.settings import Conv1DSettings, MLPSettings, TrainSettings
from genlab.studies.base import (
    RunArtifacts,
    StudySpec,
    TrainingObjective,
    array_objective,
    ensemble_data,
)
from genlab.studies.measures_grid.settings import (
    STUDY,
    MeasuresBlock,
    MeasuresGridConfig,
    MeasuresGridRun,
    run_id,
)
from genlab.train.ensemble import train_classifier_ensemble
from genlab.train.loop import train_classifier

if TYPE_CHECKING:
    from genlab.data.dataset import Dataset

log = logging.getLogger(__name__)


def synthesize(config: MeasuresGridConfig) -> Dataset:
    """One draw's data: the block's task (set from the runs' task by genlab.data.draws)."""
    settings = config.data.settings()
    if config.data.task in ("mnist1d", "mnist1d_cnn"):
        return mnist1d(settings)
    return teacher_student(settings)


def model_settings(config: MeasuresGridConfig, run: MeasuresGridRun
                   ) -> tuple[str, MLPSettings | Conv1DSettings]:
    """The run's model kind (genlab.models.registry) and settings: an MLP of ``depth`` hidden
    layers of ``width`` units, or for the CNN family ``depth`` conv layers of ``width``
    channels."""
    recipe = config.recipe_of(run)
    if recipe.conv is None:
        return "mlp", MLPSettings(hidden=(run.width,) * run.depth, activation=recipe.activation)
    return "conv1d", Conv1DSettings(channels=(run.width,) * run.depth,
                                    kernel_sizes=(recipe.conv.kernel_size,) * run.depth,
                                    stride=recipe.conv.stride, padding=recipe.conv.padding,
                                    activation=recipe.activation)


def train_settings(config: MeasuresGridConfig, run: MeasuresGridRun) -> TrainSettings:
    r = config.recipe_of(run)
    return TrainSettings(lr=run.lr, momentum=r.momentum, weight_decay=run.weight_decay,
                         batch_size=run.batch_size, max_steps=r.max_steps,
                         eval_every=r.eval_every, stop_at_train_acc=r.stop_at_train_acc,
                         stop_at_train_loss=r.stop_at_train_loss)


def exclusion(config: MeasuresGridConfig, run: MeasuresGridRun, status: str,
              train_acc: float) -> str | None:
    """Why a run is left out of the ranking (None: it is ranked): it never met its recipe's
    stop (budget, diverged), or it met it below ``min_train_acc``."""
    recipe = config.recipe_of(run)
    if status != "fitted":
        return f"the run {status} (train accuracy {train_acc:.4g})"
    if recipe.min_train_acc is not None and train_acc < recipe.min_train_acc:
        return f"train accuracy {train_acc:.4g} < min_train_acc {recipe.min_train_acc:g}"
    return None


def objective(config: MeasuresGridConfig, run_name: str, dataset: Dataset,
              device: Any) -> TrainingObjective:
    """The loss the run minimised: the cross-entropy of its task's training labels, with the
    run's own step size (constant), batch size and weight decay and the recipe's momentum."""
    return array_objective(dataset.train.x, dataset.train.y,
                           train_settings(config, config.runs[run_name]), device)


def measure_settings(block: MeasuresBlock) -> MeasureSettings:
    """The measures' settings of ``block`` (:class:`genlab.analyses.measures.MeasureSettings`)."""
    return MeasureSettings(**block.model_dump())


# ---------------------------------------------------------------------------------------------
# Training and the measures of each run.
# ---------------------------------------------------------------------------------------------


def run_measures(model: Any, init_model: Any, dataset: Dataset, history: Mapping[str, list],
                 settings: MeasureSettings, device: Any) -> tuple[dict[str, float],
                                                                  dict[str, str]]:
    """Every registered measure of a trained model on the training set (the Jacobian norm on
    the test inputs): values, and the reason behind each NaN."""

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    inputs = MeasureInputs(
        model=model, X_train=tensor(dataset.train.x), y_train=tensor(dataset.train.y),
        init_model=init_model, X_test=tensor(dataset.test.x), y_test=tensor(dataset.test.y),
        loss_fn=F.cross_entropy, num_classes=dataset.n_classes, history=history,
        settings=settings)
    computed = compute_measures(inputs)
    return ({name: v.value for name, v in computed.items()},
            {name: v.reason for name, v in computed.items() if v.reason is not None})


def _artifacts(config: MeasuresGridConfig, run: MeasuresGridRun, dataset: Dataset, model: Any,
               result: Any, device: Any) -> RunArtifacts:
    final = result.final
    rows = [row.as_dict() for row in result.history]
    kind, settings = model_settings(config, run)
    input_dim = dataset.train.x.shape[1]
    excluded = exclusion(config, run, result.status, final.train_acc)
    if excluded is None:
        t0 = time.perf_counter()
        init = build_seeded_model(kind, settings, input_dim, dataset.n_classes, run.seed, device)
        history = {"step": [r["step"] for r in rows], "train_loss": [r["train_loss"] for r in rows]}
        was_training = model.training
        values, reasons = run_measures(model, init, dataset, history,
                                       measure_settings(config.measures), device)
        model.train(was_training)
        log.info("measures of %s in %.1fs", run_id(run), time.perf_counter() - t0)
    else:  # excluded from the ranking: not worth the measures' time
        values = {name: math.nan for name in MEASURES}
        reasons = {name: f"excluded: {excluded}" for name in MEASURES}
    metrics = {
        "status": result.status, "included": excluded is None, "exclusion": excluded,
        "steps": result.steps,
        "fit_step": result.fit_step, "diverged_step": result.diverged_step,
        **run.model_dump(), "n_parameters": count_parameters(model),
        "final_train_acc": final.train_acc, "final_train_loss": final.train_loss,
        "final_test_acc": final.test_acc, "final_test_loss": final.test_loss,
        "gap": final.train_acc - final.test_acc,
        "measures": values, "measure_reasons": reasons,
    }
    spec = model_spec(kind, settings, input_dim, dataset.n_classes)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec,
                        history=pa.Table.from_pylist(rows), metrics=metrics)


def train_run(config: MeasuresGridConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run = config.runs[run_name]
    model = build_seeded_model(*model_settings(config, run), dataset.train.x.shape[1],
                               dataset.n_classes, run.seed, device)
    result = train_classifier(model, *ensemble_data([dataset], device), train_settings(config, run),
                              torch_generator(run.seed, "batches", device=device.type),
                              checkpointing=checkpointing)
    return _artifacts(config, run, dataset, model, result, device)


def ensemble_groups(runs: Mapping[str, MeasuresGridRun]
                    ) -> dict[tuple[str, int, int, int], list[str]]:
    """Run names by (task, depth, width, batch size): the models the ensemble can train together
    (one architecture on one task's inputs, one minibatch size; any seeds), in run order."""
    groups: dict[tuple[str, int, int, int], list[str]] = {}
    for name, run in runs.items():
        groups.setdefault((run.task, run.depth, run.width, run.batch_size), []).append(name)
    return groups


def train_group(config: MeasuresGridConfig, run_names: Sequence[str],
                datasets: Mapping[str, Dataset], device: Any) -> dict[str, RunArtifacts]:
    """Every run with the vectorised trainer, one ensemble per (depth, width, batch size) across
    seeds (each on its own draw); each model is the one :func:`train_run` trains alone
    (bit-identical on CPU, tested), so its measures are too."""
    artifacts: dict[str, RunArtifacts] = {}
    for (task, depth, width, batch), names in ensemble_groups(
            {name: config.runs[name] for name in run_names}).items():
        t0 = time.perf_counter()
        runs = [config.runs[name] for name in names]
        data = [datasets[name] for name in names]
        models = [build_seeded_model(*model_settings(config, run), dataset.train.x.shape[1],
                                     dataset.n_classes, run.seed, device)
                  for dataset, run in zip(data, runs, strict=True)]
        results = train_classifier_ensemble(
            models, *ensemble_data(data, device), [train_settings(config, run) for run in runs],
            [torch_generator(run.seed, "batches", device=device.type) for run in runs])
        log.info("trained %d models (%s, depth %d, width %d, batch %d) in %.1fs", len(runs),
                 task, depth, width, batch, time.perf_counter() - t0)
        for name, run, dataset, model, result in zip(names, runs, data, models, results,
                                                     strict=True):
            artifacts[name] = _artifacts(config, run, dataset, model, result, device)
    return {name: artifacts[name] for name in run_names}


SPEC = StudySpec(entry=STUDY, synthesize=synthesize,
                 train_run=train_run, train_group=train_group, objective=objective)
