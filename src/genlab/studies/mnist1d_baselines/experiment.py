"""The MNIST-1D baselines study's experiment: the data and one trained model per run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import torch

from genlab.data.mnist1d import mnist1d
from genlab.models.linear import LinearSettings
from genlab.models.registry import build_seeded_model, count_parameters, model_spec, state_tensors
from genlab.seeding import torch_generator
from genlab.settings import TrainSettings
from genlab.studies.base import RunArtifacts, StudySpec
from genlab.studies.mnist1d_baselines.settings import STUDY, BaselineRecipe, BaselinesConfig
from genlab.train.loop import train_classifier

if TYPE_CHECKING:
    from pydantic import BaseModel

    from genlab.data.dataset import Dataset

# run.model -> genlab's model kind (genlab.models.registry)
MODEL_KINDS = {"logistic": "linear", "mlp": "residual_mlp", "cnn": "conv1d"}


def synthesize(config: BaselinesConfig) -> Dataset:
    return mnist1d(config.data)


def train_settings(recipe: BaselineRecipe) -> TrainSettings:
    """The recipe as the training loop takes it: Adam on the cross-entropy for every step."""
    return TrainSettings(optimizer="adam", loss="cross_entropy", lr=recipe.lr,
                         weight_decay=recipe.weight_decay, batch_size=recipe.batch_size,
                         max_steps=recipe.steps, eval_every=recipe.eval_every,
                         stop_at_train_acc=None)


def model_settings(config: BaselinesConfig, model: str) -> BaseModel:
    if model == "logistic":
        return LinearSettings(bias=True)
    return getattr(config.models, model)


def train_run(config: BaselinesConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run = config.runs[run_name]
    kind, settings = MODEL_KINDS[run.model], model_settings(config, run.model)
    input_dim = dataset.train.x.shape[1]
    model = build_seeded_model(kind, settings, input_dim, dataset.n_classes, run.seed, device)

    def tensor(a: Any) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    result = train_classifier(
        model, tensor(dataset.train.x), tensor(dataset.train.y), tensor(dataset.test.x),
        tensor(dataset.test.y), train_settings(config.recipe),
        torch_generator(run.seed, "batches", device=device.type), checkpointing=checkpointing)
    final = result.final
    metrics = {"status": result.status, "steps": result.steps,
               "diverged_step": result.diverged_step, "model": run.model,
               "shuffle_seq": run.shuffle_seq, "seed": run.seed,
               "n_parameters": count_parameters(model), "final_train_acc": final.train_acc,
               "final_train_loss": final.train_loss, "final_test_acc": final.test_acc,
               "final_test_loss": final.test_loss}
    return RunArtifacts(weights=state_tensors(model),
                        model_spec=model_spec(kind, settings, input_dim, dataset.n_classes),
                        history=pa.Table.from_pylist([row.as_dict() for row in result.history]),
                        metrics=metrics)


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run)
