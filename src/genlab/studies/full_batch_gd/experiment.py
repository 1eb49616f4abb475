"""The full_batch_gd study's experiment: an MNIST-1D draw, and MNIST-1D's CNN trained by one
of Geiping et al.'s recipes (:mod:`genlab.train.penalised_gd`)."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import torch

from genlab.data.dataset import Dataset
from genlab.data.mnist1d import mnist1d
from genlab.models.registry import build_seeded_model, count_parameters, model_spec, state_tensors
from genlab.seeding import torch_generator
from genlab.studies.base import RunArtifacts, StudySpec
from genlab.studies.full_batch_gd.settings import STUDY, FullBatchConfig
from genlab.train.penalised_gd import train

MODEL_KIND = "conv1d"


def synthesize(config: FullBatchConfig) -> Dataset:
    return mnist1d(config.data)


def train_run(config: FullBatchConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    del checkpointing  # runs take minutes; a killed one starts over
    run = config.runs[run_name]
    recipe = config.recipes[run.recipe]
    input_dim = dataset.train.x.shape[1]
    model = build_seeded_model(MODEL_KIND, config.model, input_dim, dataset.n_classes, run.seed,
                               device)

    def tensor(a: Any) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    result = train(model, tensor(dataset.train.x), tensor(dataset.train.y),
                   tensor(dataset.test.x), tensor(dataset.test.y), recipe,
                   torch_generator(run.seed, "batches", device=device.type))
    final = result.final
    clipped = [row.probes["grad_norm"] > recipe.grad_clip for row in result.history[1:]
               if recipe.grad_clip is not None and math.isfinite(row.probes["grad_norm"])]
    metrics = {
        "status": result.status, "steps": result.steps, "diverged_step": result.diverged_step,
        "recipe": run.recipe, "stochastic": recipe.stochastic, "seed": run.seed,
        "n_parameters": count_parameters(model),
        "final_train_acc": final.train_acc, "final_test_acc": final.test_acc,
        "final_train_loss": final.train_loss, "final_test_loss": final.test_loss,
        # a network whose ReLUs all died has a zero gradient and chance accuracy: say so
        "final_grad_norm": final.probes["grad_norm"],
        "clipped_fraction_of_evaluated_steps": (sum(clipped) / len(clipped)) if clipped else None,
    }
    return RunArtifacts(
        weights=state_tensors(model),
        model_spec=model_spec(MODEL_KIND, config.model, input_dim, dataset.n_classes),
        history=pa.Table.from_pylist([row.as_dict() for row in result.history]),
        metrics=metrics)


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run)
