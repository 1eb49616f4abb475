"""The edge-of-stability study's experiment: data, and training with tracked sharpness."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import torch

from genlab.analyses.curvature.hessian import hessian_top_eigenvalues
from genlab.data.teacher_student import teacher_student
from genlab.losses import loss_value
from genlab.models.registry import build_seeded_model, model_spec, state_tensors
from genlab.settings import TrainSettings
from genlab.studies.base import RunArtifacts, StudySpec, TrainingObjective, array_objective
from genlab.studies.eos_gd.settings import STUDY, EoSConfig
from genlab.train.loop import train_classifier

if TYPE_CHECKING:
    from genlab.data.dataset import Dataset


def synthesize(config: EoSConfig) -> Dataset:
    return teacher_student(config.data)


def train_settings(config: EoSConfig, run_name: str) -> TrainSettings:
    """Full-batch GD on the MSE for the recipe's step budget: no early stop."""
    recipe = config.recipe
    return TrainSettings(optimizer="gd", loss="mse", lr=config.runs[run_name].lr,
                         max_steps=recipe.steps, eval_every=recipe.track_every,
                         stop_at_train_acc=None)


def objective(config: EoSConfig, run_name: str, dataset: Dataset,
              device: Any) -> TrainingObjective:
    return array_objective(dataset.train.x, dataset.train.y,
                           train_settings(config, run_name), device)


def train_run(config: EoSConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run = config.runs[run_name]
    input_dim = dataset.train.x.shape[1]
    model = build_seeded_model("mlp", config.model, input_dim, dataset.n_classes, run.seed,
                               device)
    x_train = torch.from_numpy(dataset.train.x).to(device)
    y_train = torch.from_numpy(dataset.train.y).to(device)
    previous: list[torch.Tensor | None] = [None]  # the last top eigenvector: the warm start

    def mse(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return loss_value("mse", output, target)

    def sharpness(net: torch.nn.Module) -> dict[str, float]:
        result = hessian_top_eigenvalues(net, mse, x_train, y_train, k=1,
                                         max_iter=config.recipe.lanczos_max_iter,
                                         v0=previous[0])
        previous[0] = result.eigenvectors[0]
        return {"lambda_max": result.eigenvalues[0],
                "lambda_residual": float(result.residual_norms[0])}

    result = train_classifier(model, x_train, y_train, torch.from_numpy(dataset.test.x).to(device),
                              torch.from_numpy(dataset.test.y).to(device),
                              train_settings(config, run_name),
                              torch.Generator(), probes=sharpness, checkpointing=checkpointing)
    rows = [row.as_dict() for row in result.history]
    metrics = {"status": result.status, "steps": result.steps,
               "diverged_step": result.diverged_step, "lr": run.lr, "seed": run.seed,
               "two_over_lr": 2.0 / run.lr, **edge_statistics(rows, run.lr)}
    spec = model_spec("mlp", config.model, input_dim, dataset.n_classes)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec,
                        history=pa.Table.from_pylist(rows), metrics=metrics)


def edge_statistics(rows: list[Mapping[str, Any]], lr: float) -> dict[str, Any]:
    """The numbers the claims are decided on, from a run's tracked λ_max and training loss."""
    edge = 2.0 / lr
    lam = np.array([r["lambda_max"] for r in rows], dtype=float)
    loss = np.array([r["train_loss"] for r in rows], dtype=float)
    out: dict[str, Any] = {"lambda_init": float(lam[0]), "lambda_final": float(lam[-1]),
                           "sharpening": float(lam.max() / lam[0]) if lam[0] > 0 else None,
                           "final_train_loss": float(loss[-1])}
    crossed = np.flatnonzero(lam >= 0.9 * edge)
    if len(crossed) == 0:
        return {**out, "crossing_step": None}
    first = int(crossed[0])
    after = lam[first:] / edge
    return {**out, "crossing_step": int(rows[first]["step"]),
            "loss_at_crossing": float(loss[first]),
            "ratio_median_after": float(np.median(after)),
            "ratio_min_after": float(after.min()), "ratio_max_after": float(after.max())}


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run, objective=objective)
