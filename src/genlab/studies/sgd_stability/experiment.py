"""The SGD-stability study's experiment: data, training to a target loss, the final Hessian."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import torch

from genlab.analyses.curvature.hessian import hessian_top_eigenvalues, hessian_trace
from genlab.data.teacher_student import teacher_student
from genlab.losses import loss_value
from genlab.models.registry import build_seeded_model, model_spec, state_tensors
from genlab.seeding import torch_generator
from genlab.settings import TrainSettings
from genlab.studies.base import RunArtifacts, StudySpec, TrainingObjective, array_objective
from genlab.studies.sgd_stability.settings import STUDY, StabilityConfig
from genlab.train.loop import train_classifier

if TYPE_CHECKING:
    from genlab.data.dataset import Dataset


def synthesize(config: StabilityConfig) -> Dataset:
    return teacher_student(config.data)


def train_settings(config: StabilityConfig, run_name: str) -> TrainSettings:
    """SGD with batch size 1, or GD, until the training loss reaches the recipe's target."""
    run, recipe = config.runs[run_name], config.recipe
    return TrainSettings(optimizer=run.method, loss="mse", lr=run.lr,
                         batch_size=1 if run.method == "sgd" else None,
                         max_steps=recipe.max_steps, eval_every=recipe.eval_every,
                         stop_at_train_acc=None, stop_at_train_loss=recipe.target_loss)


def objective(config: StabilityConfig, run_name: str, dataset: Dataset,
              device: Any) -> TrainingObjective:
    return array_objective(dataset.train.x, dataset.train.y.astype("float32"),
                           train_settings(config, run_name), device)


def train_run(config: StabilityConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run, recipe = config.runs[run_name], config.recipe
    input_dim = dataset.train.x.shape[1]
    model = build_seeded_model("mlp", config.model, input_dim, 1, run.seed, device)
    x_train = torch.from_numpy(dataset.train.x).to(device)
    y_train = torch.from_numpy(dataset.train.y.astype("float32")).to(device)
    x_test = torch.from_numpy(dataset.test.x).to(device)
    y_test = torch.from_numpy(dataset.test.y.astype("float32")).to(device)
    result = train_classifier(model, x_train, y_train, x_test, y_test,
                              train_settings(config, run_name),
                              torch_generator(run.seed, "batches", device=device.type),
                              checkpointing=checkpointing)

    def mse(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return loss_value("mse", output, target)

    metrics: dict[str, Any] = {
        "status": result.status, "converged": result.status == "fitted", "steps": result.steps,
        "method": run.method, "lr": run.lr, "seed": run.seed, "two_over_lr": 2.0 / run.lr,
        "final_train_loss": result.final.train_loss, "final_test_loss": result.final.test_loss,
    }
    if result.status != "diverged":
        trace = hessian_trace(model, mse, x_train, y_train, num_matvecs=recipe.trace_matvecs,
                              method="hutchpp", seed=run.seed)
        top = hessian_top_eigenvalues(model, mse, x_train, y_train, k=1,
                                      max_iter=recipe.lanczos_max_iter)
        metrics |= {"trace": trace.estimate, "trace_stderr": trace.standard_error,
                    "lambda_max": top.eigenvalues[0],
                    "trace_over_edge": trace.estimate / (2.0 / run.lr),
                    "lambda_over_edge": top.eigenvalues[0] / (2.0 / run.lr)}
    history = pa.Table.from_pylist([r.as_dict() for r in result.history])
    spec = model_spec("mlp", config.model, input_dim, 1)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec, history=history,
                        metrics=metrics)


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run, objective=objective)
