"""The mislabel_mnist1d study's experiment: an MNIST-1D or digits draw with flipped training
labels, a multiclass model fitted to them in float64, and every ranking."""

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
from genlab.data.dataset import Dataset
from genlab.data.digits import digits
from genlab.data.mnist1d import mnist1d
from genlab.models.registry import count_parameters, model_spec, state_tensors
from genlab.seeding import derive_seed
from genlab.studies.base import RunArtifacts, StudySpec
from genlab.studies.mislabel_mnist1d.settings import STUDY, MislabelMNIST1DConfig
from genlab.train.binary import Problem, accuracy, fit_classifier, per_example_losses

LOSS = "cross_entropy"
FLIPS = "mislabel_mnist1d-flips"  # the purpose of the flips' seed, under the run's seed
SCORE_SCHEMA = pa.schema([("train_id", pa.int64()), ("method", pa.string()),
                          ("score", pa.float64()), ("flipped", pa.bool_())])


def synthesize(config: MislabelMNIST1DConfig) -> Dataset:
    """One draw's data: the block's task (set from the runs' task by genlab.data.draws)."""
    settings = config.data.settings()
    return digits(settings) if config.data.task == "digits" else mnist1d(settings)


def flip_labels(y: np.ndarray, fraction: float, n_classes: int,
                seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels with exactly round(fraction·n) of them, drawn at random, changed to a different
    class (uniform over the other n_classes − 1), and the mask of those flipped."""
    rng = np.random.default_rng(seed)
    n = len(y)
    chosen = rng.choice(n, size=round(fraction * n), replace=False)
    labels = np.array(y, dtype=np.int64, copy=True)
    labels[chosen] = (labels[chosen] + rng.integers(1, n_classes, size=len(chosen))) % n_classes
    flipped = np.zeros(n, dtype=bool)
    flipped[chosen] = True
    return labels, flipped


def train_run(config: MislabelMNIST1DConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run = config.runs[run_name]
    labels, flipped = flip_labels(dataset.train.y, config.flip_fraction, dataset.n_classes,
                                  derive_seed(run.seed, FLIPS) % 2**32)
    problem = Problem.from_dataset(dataset, labels, device, multiclass=True)
    X, y, X_test, y_test = problem.X, problem.y, problem.X_test, problem.y_test
    clean = y.new_tensor(dataset.train.y)
    input_dim = X.shape[1]
    fitted = fit_classifier(run.model, config.logistic, config.mlp, config.fit, problem,
                            loss_function(LOSS), run.seed, device, outputs=dataset.n_classes)
    model, kind, settings, l2, result = (fitted.model, fitted.kind, fitted.settings, fitted.l2,
                                         fitted.result)
    mask = torch.from_numpy(flipped).to(X.device)
    metrics: dict[str, Any] = {
        "status": "converged" if result.converged else "not_converged",
        "task": run.task, "model": run.model, "seed": run.seed, "l2": l2,
        "n_parameters": count_parameters(model), "n_train": len(labels),
        "n_flipped": int(flipped.sum()),
        "fit": fitted.record(), "seconds": {"fit": fitted.seconds},
        "train_acc": accuracy(model, X, y),
        "train_acc_flipped": accuracy(model, X[mask], y[mask]),
        "train_acc_unflipped": accuracy(model, X[~mask], y[~mask]),
        "train_acc_clean_labels": accuracy(model, X, clean),
        "test_acc": accuracy(model, X_test, y_test),
    }
    metrics["interpolates"] = metrics["train_acc"] == 1.0
    spec = model_spec(kind, settings, input_dim, dataset.n_classes)
    if not result.converged:  # influence functions describe an optimum
        return RunArtifacts(weights=state_tensors(model), model_spec=spec,
                            history=SCORE_SCHEMA.empty_table(), metrics=metrics)
    scores, seconds = self_influence_rankings(model, LOSS, X, y, l2, config.methods,
                                              per_example_losses, run_name)
    metrics["seconds"] |= seconds
    metrics["methods"] = {name: {"auc": roc_auc(score, flipped),
                                 "found": fraction_found(score, flipped)}
                          for name, score in scores.items()}
    metrics |= {f"{name}_auc": metrics["methods"][name]["auc"] for name in METHODS}
    history = pa.Table.from_pylist(
        [{"train_id": i, "method": name, "score": float(scores[name][i]),
          "flipped": bool(flipped[i])} for name in METHODS for i in range(len(labels))],
        schema=SCORE_SCHEMA)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec, history=history,
                        metrics=metrics)


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run)
