"""The mislabel-detection study's experiment: data, and training with every ranking."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import torch

from genlab.analyses.influence.detection import (
    METHODS,
    fraction_found,
    roc_auc,
    self_influence_rankings,
)
from genlab.analyses.influence.exact import loss_function
from genlab.data.dataset import Dataset, corrupt_labels
from genlab.data.logistic_teacher import logistic_teacher
from genlab.models.registry import count_parameters, model_spec, state_tensors
from genlab.studies.base import RunArtifacts, StudySpec, TrainingObjective
from genlab.studies.binary import binary_objective
from genlab.studies.mislabel_detection.settings import STUDY, MislabelConfig
from genlab.train.binary import Problem, accuracy, fit_classifier, per_example_losses
from genlab.train.binary_settings import LOSS

SCORE_SCHEMA = pa.schema([("train_id", pa.int64()), ("method", pa.string()),
                          ("score", pa.float64()), ("flipped", pa.bool_())])


def synthesize(config: MislabelConfig) -> Dataset:
    return logistic_teacher(config.data)


def train_run(config: MislabelConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:

    run = config.runs[run_name]
    labels, flipped = corrupt_labels(dataset.train, config.data.flip_fraction)
    problem = Problem.from_dataset(dataset, labels, device)
    input_dim = dataset.train.x.shape[1]
    fitted = fit_classifier(run.model, config.logistic, config.mlp, config.fit, problem,
                            loss_function(LOSS), run.seed, device)
    model, kind, settings, l2, result = (fitted.model, fitted.kind, fitted.settings, fitted.l2,
                                         fitted.result)
    clean = problem.y.new_tensor(dataset.train.y.astype(np.float64))
    mask = torch.from_numpy(flipped).to(problem.X.device)
    metrics: dict[str, Any] = {
        "status": "converged" if result.converged else "not_converged",
        "model": run.model, "seed": run.seed, "l2": l2, "n_parameters": count_parameters(model),
        "n_train": len(labels), "n_flipped": int(flipped.sum()),
        "fit": fitted.record(), "seconds": {"fit": fitted.seconds},
        "train_acc": accuracy(model, problem.X, problem.y),
        "train_acc_flipped": accuracy(model, problem.X[mask], problem.y[mask]),
        "train_acc_clean_labels": accuracy(model, problem.X, clean),
        "test_acc": accuracy(model, problem.X_test, problem.y_test),
    }
    metrics["interpolates"] = metrics["train_acc"] == 1.0
    spec = model_spec(kind, settings, input_dim, 1)
    if not result.converged:  # influence functions describe an optimum
        return RunArtifacts(weights=state_tensors(model), model_spec=spec,
                            history=SCORE_SCHEMA.empty_table(), metrics=metrics)
    scores, seconds = self_influence_rankings(model, LOSS, problem.X, problem.y, l2,
                                              config.methods, per_example_losses, run_name)
    metrics["seconds"] |= seconds
    metrics["methods"] = {name: {"auc": roc_auc(score, flipped),
                                 "found": fraction_found(score, flipped)}
                          for name, score in scores.items()}
    metrics |= {f"{name}_auc": metrics["methods"][name]["auc"] for name in METHODS}
    n = len(labels)
    history = pa.Table.from_pylist(
        [{"train_id": i, "method": name, "score": float(scores[name][i]),
          "flipped": bool(flipped[i])} for name in METHODS for i in range(n)],
        schema=SCORE_SCHEMA)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec, history=history,
                        metrics=metrics)


def objective(config: MislabelConfig, run_name: str, dataset: Dataset,
              device: Any) -> TrainingObjective:
    """The data loss the run minimised (:func:`genlab.studies.binary.binary_objective`)."""
    return binary_objective(dataset, config.data.flip_fraction, config.runs[run_name].model,
                            config.logistic, config.mlp, device)


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run, objective=objective)
