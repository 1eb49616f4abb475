"""The toy study's data and training."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import torch

from genlab.data.gaussian_mixture import gaussian_mixture
from genlab.models.registry import build_seeded_model, model_spec, state_tensors
from genlab.studies.base import RunArtifacts, StudySpec, training_objective
from genlab.studies.toy.settings import STUDY
from genlab.train.loop import train_classifier


def synthesize(config):
    return gaussian_mixture(config.data)


def train_run(config, run_name: str, dataset, device: Any, checkpointing=None) -> RunArtifacts:
    run = config.runs[run_name]
    dim = dataset.train.x.shape[1]
    model = build_seeded_model("mlp", config.model, dim, dataset.n_classes, run.seed, device)
    result = train_classifier(
        model, torch.from_numpy(dataset.train.x), torch.from_numpy(dataset.train.y),
        torch.from_numpy(dataset.test.x), torch.from_numpy(dataset.test.y), config.train,
        torch.Generator().manual_seed(run.seed), checkpointing=checkpointing)
    rows = [row.as_dict() for row in result.history]
    return RunArtifacts(weights=state_tensors(model),
                        model_spec=model_spec("mlp", config.model, dim, dataset.n_classes),
                        history=pa.Table.from_pylist(rows),
                        metrics={"status": result.status, "test_acc": rows[-1]["test_acc"]})


def objective(config, run_name: str, dataset, device: Any):
    return training_objective(torch.from_numpy(dataset.train.x),
                              torch.from_numpy(dataset.train.y), config.train)


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run, objective=objective)
