"""The layer-ID study's experiment: MNIST-1D, and one trained network per run with the TwoNN
intrinsic dimension of every layer before and after training."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import torch

from genlab.analyses.dimension.representations import twonn_profile
from genlab.data.dataset import corrupt_labels
from genlab.data.digits import digits
from genlab.data.mnist1d import mnist1d
from genlab.models.registry import build_seeded_model, count_parameters, model_spec, state_tensors
from genlab.seeding import torch_generator
from genlab.studies.base import RunArtifacts, StudySpec
from genlab.studies.layer_id.settings import STUDY, LayerIDConfig
from genlab.train.loop import train_classifier

if TYPE_CHECKING:
    from genlab.data.dataset import Dataset

# run.model -> genlab's model kind (genlab.models.registry)
MODEL_KINDS = {"mlp": "mlp", "cnn": "conv1d"}


def synthesize(config: LayerIDConfig) -> Dataset:
    """One draw's data: the block's task (set from the runs' task by genlab.data.draws)."""
    settings = config.data.settings()
    return digits(settings) if config.data.task == "digits" else mnist1d(settings)


def train_run(config: LayerIDConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run = config.runs[run_name]
    kind, settings = MODEL_KINDS[run.model], getattr(config.models, run.model)
    input_dim = dataset.train.x.shape[1]
    model = build_seeded_model(kind, settings, input_dim, dataset.n_classes, run.seed, device)
    labels, replaced = corrupt_labels(dataset.train, 1.0 if run.labels == "random" else 0.0)

    def tensor(a: Any) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    x_test = tensor(dataset.test.x)
    at_init = twonn_profile(model, x_test, config.twonn_discard)
    result = train_classifier(
        model, tensor(dataset.train.x), tensor(labels), x_test, tensor(dataset.test.y),
        config.recipe.train_settings(), torch_generator(run.seed, "batches", device=device.type),
        checkpointing=checkpointing)
    trained = twonn_profile(model, x_test, config.twonn_discard)
    final = result.final
    metrics = {
        "status": result.status, "steps": result.steps, "fit_step": result.fit_step,
        "diverged_step": result.diverged_step, "task": run.task, "model": run.model,
        "labels": run.labels,
        "seed": run.seed, "n_parameters": count_parameters(model),
        "fraction_wrong": float((labels != dataset.train.y).mean()),
        "fraction_replaced": float(replaced.mean()),
        "final_train_acc": final.train_acc, "final_test_acc": final.test_acc,
        "final_test_loss": final.test_loss,
        "layers": [r["layer"] for r in trained], "widths": [r["width"] for r in trained],
        "id_init": [r["id"] for r in at_init], "id_trained": [r["id"] for r in trained],
        "n_distinct_trained": [r["n_distinct"] for r in trained],
        "last_hidden_id": trained[-2]["id"], "last_hidden_id_init": at_init[-2]["id"],
    }
    return RunArtifacts(weights=state_tensors(model),
                        model_spec=model_spec(kind, settings, input_dim, dataset.n_classes),
                        history=pa.Table.from_pylist([row.as_dict() for row in result.history]),
                        metrics=metrics)


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run)
