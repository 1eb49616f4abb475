"""The double-descent study's experiment: data and the random-features sweep."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import torch

from genlab.data.teacher_student import teacher_student
from genlab.models.random_features import (
    features,
    gradient_descent_path,
    min_norm_least_squares,
    mse,
    random_feature_weights,
)
from genlab.seeding import numpy_rng
from genlab.studies.base import RunArtifacts, StudySpec
from genlab.studies.double_descent.settings import STUDY, DoubleDescentConfig, EarlyStoppingSettings

if TYPE_CHECKING:
    from genlab.data.dataset import Dataset


def synthesize(config: DoubleDescentConfig) -> Dataset:
    return teacher_student(config.data)


def sweep(x_train: np.ndarray, y_train: np.ndarray, x_val: np.ndarray, y_val: np.ndarray,
          x_test: np.ndarray, y_test: np.ndarray, weights: np.ndarray, widths: tuple[int, ...],
          activation: str, stopping: EarlyStoppingSettings) -> tuple[list[dict], dict]:
    """Fit every P in ``widths`` (nested features: the first P rows of ``weights``).

    Returns one row of errors per P and the fitted θ per P.
    """
    n = len(y_train)
    steps = np.unique(np.geomspace(1, stopping.max_steps, stopping.n_checkpoints).astype(np.int64))
    rows, thetas = [], {}
    for p in widths:
        w = weights[:p]
        phi_train = features(x_train, w, activation)
        phi_val, phi_test = features(x_val, w, activation), features(x_test, w, activation)
        theta = min_norm_least_squares(phi_train, y_train)
        s_max = np.linalg.norm(phi_train, 2)
        path = gradient_descent_path(phi_train, y_train, stopping.lr_fraction * 2 * n / s_max**2,
                                     steps)
        val = mse(phi_val, path.thetas, y_val)
        best = int(np.argmin(val))
        thetas[p] = theta
        rows.append({
            "n_features": p, "ratio": p / n,
            "train_mse": float(mse(phi_train, theta, y_train)),
            "test_mse": float(mse(phi_test, theta, y_test)),
            "theta_norm": float(np.linalg.norm(theta)),
            "gd_best_step": int(path.steps[best]), "gd_val_mse": float(val[best]),
            "gd_test_mse": float(mse(phi_test, path.thetas[best], y_test)),
        })
    return rows, thetas


def train_run(config: DoubleDescentConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run = config.runs[run_name]
    n_val = config.early_stopping.n_val
    if n_val >= len(dataset.test.y):
        raise ValueError(f"early_stopping.n_val ({n_val}) must be below n_test "
                         f"({len(dataset.test.y)})")
    x_test, y_test = dataset.test.x.astype(np.float64), dataset.test.y.astype(np.float64)
    dim = dataset.train.x.shape[1]
    weights = random_feature_weights(max(config.features.widths), dim,
                                     numpy_rng(run.seed, "feature-weights"))
    rows, thetas = sweep(dataset.train.x.astype(np.float64), dataset.train.y.astype(np.float64),
                         x_test[:n_val], y_test[:n_val], x_test[n_val:], y_test[n_val:],
                         weights, config.features.widths, config.features.activation,
                         config.early_stopping)
    table = pa.Table.from_pylist(rows)
    peak = max(rows, key=lambda r: r["test_mse"])
    metrics = {"status": "fitted", "seed": run.seed, "n_train": len(dataset.train.y),
               "peak_n_features": peak["n_features"], "peak_test_mse": peak["test_mse"],
               "test_mse_by_n_features": {str(r["n_features"]): r["test_mse"] for r in rows},
               "gd_test_mse_by_n_features": {str(r["n_features"]): r["gd_test_mse"]
                                             for r in rows}}
    tensors = {"feature_weights": torch.from_numpy(weights)}
    tensors |= {f"theta_p{p}": torch.from_numpy(np.ascontiguousarray(t)) for p, t in thetas.items()}
    spec = {"kind": "random_features", "activation": config.features.activation,
            "input_dim": dim, "widths": list(config.features.widths)}
    return RunArtifacts(weights=tensors, model_spec=spec, history=table, metrics=metrics)


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run)
