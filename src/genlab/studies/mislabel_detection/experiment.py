"""The mislabel-detection study's experiment: data, and training with every ranking."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from scipy.stats import rankdata

from genlab.analyses.influence.exact import exact_self_influence, gradient_self_dot, loss_function
from genlab.analyses.influence.kfac import kronfluence_self_influence
from genlab.data.dataset import Dataset, corrupt_labels
from genlab.data.logistic_teacher import logistic_teacher
from genlab.models.registry import count_parameters, model_spec, state_tensors
from genlab.seeding import torch_generator
from genlab.studies.base import RunArtifacts, StudySpec, TrainingObjective
from genlab.studies.binary import binary_objective
from genlab.studies.mislabel_detection.settings import (
    STUDY,
    MislabelConfig,
    SelfInfluenceSettings,
)
from genlab.train.binary import (
    Problem,
    accuracy,
    build,
    fit_settings_kwargs,
    model_settings,
    per_example_losses,
)
from genlab.train.binary_settings import LOSS
from genlab.train.full_batch import RegularisedObjective, fit, flat_parameters, load_flat

METHODS = ("exact", "ekfac", "grad_dot", "loss", "random")
CHECKED = tuple(round(0.05 * k, 2) for k in range(1, 21))  # fractions of the data inspected
SCORE_SCHEMA = pa.schema([("train_id", pa.int64()), ("method", pa.string()),
                          ("score", pa.float64()), ("flipped", pa.bool_())])


def synthesize(config: MislabelConfig) -> Dataset:
    return logistic_teacher(config.data)


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """P(score of a random positive > score of a random negative), ties counted half (the
    Mann-Whitney U statistic over n₊·n₋); NaN without both classes."""
    positive = np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    ranks = rankdata(np.asarray(scores, dtype=np.float64))
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def fraction_found(scores: np.ndarray, positive: np.ndarray,
                   checked: tuple[float, ...] = CHECKED) -> list[float]:
    """The fraction of positives among the top ⌈c·n⌉ scores, for each fraction c checked (ties
    broken by index, stably)."""
    positive = np.asarray(positive, dtype=bool)
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    found = np.cumsum(positive[order])
    n, total = len(order), max(int(positive.sum()), 1)
    return [float(found[max(math.ceil(c * n - 1e-9), 1) - 1] / total) for c in checked]


def rankings(model: Any, problem: Any, l2: float, s: SelfInfluenceSettings, run: str = "",
             ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Every method's suspicion score per training point (higher = inspect first), and its
    wall time. The random ranking is drawn per run, from the methods' seed and the run's name
    (not its seed alone: logistic-s0 and mlp-s0 would share one draw of the chance baseline)."""

    bce = loss_function(LOSS)
    X, y = problem.X, problem.y
    jobs = {
        "exact": lambda: -exact_self_influence(model, bce, X, y, l2, chunk_size=s.chunk_size,
                                               batch_size=s.chunk_size),
        "ekfac": lambda: -kronfluence_self_influence(
            model, LOSS, X, y, "ekfac", l2, fisher_samples=s.ekfac_fisher_samples, seed=s.seed,
            batch_size=s.chunk_size),
        "grad_dot": lambda: -gradient_self_dot(model, bce, X, y, chunk_size=s.chunk_size),
        "loss": lambda: per_example_losses(model, X, y),
        "random": lambda: torch.randn(len(X), generator=torch_generator(
            s.seed, "mislabel", "random", run), dtype=torch.float64),
    }
    scores, seconds = {}, {}
    for name, job in jobs.items():
        start = time.perf_counter()
        scores[name] = job().detach().to("cpu", torch.float64).numpy()
        seconds[name] = time.perf_counter() - start
    return scores, seconds


def train_run(config: MislabelConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:

    run = config.runs[run_name]
    labels, flipped = corrupt_labels(dataset.train, config.data.flip_fraction)
    problem = Problem.from_dataset(dataset, labels, device)
    kind, settings, l2 = model_settings(run.model, config.logistic, config.mlp)
    input_dim = dataset.train.x.shape[1]
    model = build(kind, settings, input_dim, run.seed, device)
    start = time.perf_counter()
    result = fit(RegularisedObjective(model, loss_function(LOSS), problem.X, problem.y, l2),
                 flat_parameters(model), **fit_settings_kwargs(config.fit))
    load_flat(model, result.theta)
    clean = problem.y.new_tensor(dataset.train.y.astype(np.float64))
    mask = torch.from_numpy(flipped).to(problem.X.device)
    metrics: dict[str, Any] = {
        "status": "converged" if result.converged else "not_converged",
        "model": run.model, "seed": run.seed, "l2": l2, "n_parameters": count_parameters(model),
        "n_train": len(labels), "n_flipped": int(flipped.sum()),
        "fit": {"grad_max": result.grad_max, "lbfgs_iterations": result.lbfgs_iterations,
                "newton_steps": result.newton_steps},
        "seconds": {"fit": time.perf_counter() - start},
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
    scores, seconds = rankings(model, problem, l2, config.methods, run_name)
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
