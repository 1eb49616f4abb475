"""The layer_rotation study's experiment: an MNIST-1D draw, and an MLP trained by SGD or Layca
with every layer's rotation from its initialisation recorded over training."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import torch
from torch import nn

from genlab.analyses.measures.norms import layer_rotations
from genlab.data.dataset import Dataset
from genlab.data.mnist1d import mnist1d
from genlab.models.registry import (
    build_seeded_model,
    count_parameters,
    glorot_uniform_,
    model_spec,
    state_tensors,
)
from genlab.seeding import torch_generator
from genlab.settings import TrainSettings
from genlab.studies.base import RunArtifacts, StudySpec
from genlab.studies.layer_rotation.settings import STUDY, LayerRotationConfig, RotationRecipe
from genlab.train.loop import train_classifier


def synthesize(config: LayerRotationConfig) -> Dataset:
    return mnist1d(config.data)


def train_settings(optimizer: str, lr: float, recipe: RotationRecipe) -> TrainSettings:
    """No momentum, no weight decay; the step decays at ``decay_at`` of the budget; no stop
    (the paper trains each configuration for the same number of epochs)."""
    return TrainSettings(optimizer=optimizer, loss="cross_entropy", lr=lr,
                         batch_size=recipe.batch_size, max_steps=recipe.steps,
                         schedule="multistep", step_at=recipe.decay_steps(),
                         step_gamma=recipe.decay, eval_every=recipe.eval_every,
                         stop_at_train_acc=None)


def train_run(config: LayerRotationConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run = config.runs[run_name]
    input_dim = dataset.train.x.shape[1]
    model = build_seeded_model("mlp", config.model, input_dim, dataset.n_classes, run.seed,
                               device)
    if run.init == "glorot":
        glorot_uniform_(model, run.seed)
    initial = copy.deepcopy(model)

    def rotations(net: nn.Module) -> dict[str, float]:
        """Each layer's rotation, 1 − cos(w_l, w_l⁰) of its flattened kernel (the paper's: 0
        unmoved, 1 orthogonal to the initialisation, 2 reversed)."""
        return {f"rotation_{k}": float(d) for k, d in
                enumerate(layer_rotations(net, initial))}

    def tensor(a: Any) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    result = train_classifier(
        model, tensor(dataset.train.x), tensor(dataset.train.y), tensor(dataset.test.x),
        tensor(dataset.test.y), train_settings(run.optimizer, run.lr, config.recipe),
        torch_generator(run.seed, "batches", device=device.type), probes=rotations,
        checkpointing=checkpointing)
    final = result.final
    layers = list(rotations(model).values())
    diverged = result.status == "diverged"
    metrics = {
        "status": result.status, "steps": result.steps, "diverged_step": result.diverged_step,
        "optimizer": run.optimizer, "init": run.init, "lr": run.lr, "seed": run.seed,
        "n_parameters": count_parameters(model), "layers": len(layers),
        "rotation_by_layer": layers,
        "mean_rotation": None if diverged else sum(layers) / len(layers),
        "min_rotation": None if diverged else min(layers),
        "max_rotation": None if diverged else max(layers),
        "final_train_acc": final.train_acc, "final_test_acc": final.test_acc,
        "final_train_loss": final.train_loss, "final_test_loss": final.test_loss,
    }
    return RunArtifacts(
        weights=state_tensors(model),
        model_spec=model_spec("mlp", config.model, input_dim, dataset.n_classes),
        history=pa.Table.from_pylist([row.as_dict() for row in result.history]),
        metrics=metrics)


def train_group(config: LayerRotationConfig, run_names: Sequence[str],
                datasets: Mapping[str, Dataset], device: Any) -> dict[str, RunArtifacts]:
    """One seed's runs one after the other in one process (each a small MLP: a process each
    would spend more time starting than training)."""
    return {name: train_run(config, name, datasets[name], device) for name in run_names}


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run,
                 train_group=train_group)
