"""The random-labels study's experiment: data and training, one run or the whole sweep at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import torch

from genlab.data.dataset import corrupt_labels
from genlab.data.gaussian_mixture import gaussian_mixture
from genlab.models.registry import build_seeded_model, count_parameters, model_spec, state_tensors
from genlab.seeding import torch_generator
from genlab.studies.base import (
    RunArtifacts,
    StudySpec,
    TrainingObjective,
    array_objective,
    ensemble_data,
)
from genlab.studies.random_labels.settings import STUDY, RandomLabelsConfig, RandomLabelsRun
from genlab.train.ensemble import train_classifier_ensemble
from genlab.train.loop import train_classifier

if TYPE_CHECKING:
    from genlab.data.dataset import Dataset


def synthesize(config: RandomLabelsConfig) -> Dataset:
    return gaussian_mixture(config.data)


def _training_labels(dataset: Dataset, run: RandomLabelsRun) -> tuple[np.ndarray, np.ndarray]:
    return corrupt_labels(dataset.train, run.label_noise)


def _artifacts(config: RandomLabelsConfig, run: RandomLabelsRun, dataset: Dataset, model: Any,
               result: Any, labels: np.ndarray, replaced: np.ndarray) -> RunArtifacts:
    final = result.final
    metrics = {
        "status": result.status, "steps": result.steps, "fit_step": result.fit_step,
        "diverged_step": result.diverged_step, "label_noise": run.label_noise, "seed": run.seed,
        "fraction_replaced": float(replaced.mean()),
        "fraction_wrong": float((labels != dataset.train.y).mean()),
        "n_parameters": count_parameters(model),
        "final_train_acc": final.train_acc, "final_train_loss": final.train_loss,
        "final_test_acc": final.test_acc, "final_test_loss": final.test_loss,
    }
    spec = model_spec("mlp", config.model, dataset.train.x.shape[1], dataset.n_classes)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec,
                        history=pa.Table.from_pylist([row.as_dict() for row in result.history]),
                        metrics=metrics)


def train_run(config: RandomLabelsConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run = config.runs[run_name]
    labels, replaced = _training_labels(dataset, run)
    model = build_seeded_model("mlp", config.model, dataset.train.x.shape[1], dataset.n_classes,
                               run.seed, device)

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    result = train_classifier(
        model, tensor(dataset.train.x), tensor(labels), tensor(dataset.test.x),
        tensor(dataset.test.y), config.train,
        torch_generator(run.seed, "batches", device=device.type), checkpointing=checkpointing)
    return _artifacts(config, run, dataset, model, result, labels, replaced)


def objective(config: RandomLabelsConfig, run_name: str, dataset: Dataset,
              device: Any) -> TrainingObjective:
    labels, _ = _training_labels(dataset, config.runs[run_name])
    return array_objective(dataset.train.x, labels, config.train, device)


def train_group(config: RandomLabelsConfig, run_names: Sequence[str],
                datasets: Mapping[str, Dataset], device: Any) -> dict[str, RunArtifacts]:
    """Every run at once with the vectorised trainer: the runs share the architecture and
    recipe and differ only in seed (their data draws) and label draw, so each row of the
    ensemble is exactly the run :func:`train_run` would train alone (bit-identical on CPU,
    tested)."""
    runs = [config.runs[name] for name in run_names]
    data = [datasets[name] for name in run_names]
    drawn = [_training_labels(dataset, run) for dataset, run in zip(data, runs, strict=True)]
    models = [build_seeded_model("mlp", config.model, dataset.train.x.shape[1],
                                 dataset.n_classes, run.seed, device)
              for dataset, run in zip(data, runs, strict=True)]
    results = train_classifier_ensemble(
        models, *ensemble_data(data, device, [labels for labels, _ in drawn]),
        [config.train] * len(runs),
        [torch_generator(run.seed, "batches", device=device.type) for run in runs])
    return {name: _artifacts(config, run, dataset, model, result, labels, replaced)
            for name, run, dataset, model, result, (labels, replaced)
            in zip(run_names, runs, data, models, results, drawn, strict=True)}


SPEC = StudySpec(entry=STUDY, synthesize=synthesize,
                 train_run=train_run, train_group=train_group, objective=objective)
