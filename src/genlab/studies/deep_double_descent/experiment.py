"""The deep-double-descent study's experiment: MNIST-1D with noisy training labels, and one
network of the run's width trained by SGD for a fixed number of steps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import torch

from genlab.data.dataset import corrupt_labels
from genlab.data.mnist1d import mnist1d
from genlab.models.registry import build_seeded_model, count_parameters, model_spec, state_tensors
from genlab.seeding import torch_generator
from genlab.settings import TrainSettings
from genlab.studies.base import RunArtifacts, StudySpec
from genlab.studies.deep_double_descent.settings import (
    STUDY,
    DeepDoubleDescentConfig,
    DoubleDescentRecipe,
)
from genlab.train.loop import train_classifier

if TYPE_CHECKING:
    from genlab.data.dataset import Dataset

# run.model -> genlab's model kind (genlab.models.registry)
MODEL_KINDS = {"mlp": "mlp", "cnn": "conv1d"}


def synthesize(config: DeepDoubleDescentConfig) -> Dataset:
    return mnist1d(config.data)


def train_settings(recipe: DoubleDescentRecipe) -> TrainSettings:
    """The recipe's fixed step budget, with no stop: the notebook trains every width for the
    same epochs, and the widths past the threshold must keep training after they interpolate
    (TrainSettings' default stop at 100% training accuracy would end them there)."""
    return TrainSettings(optimizer="sgd", loss="cross_entropy", lr=recipe.lr,
                         momentum=recipe.momentum, batch_size=recipe.batch_size,
                         max_steps=recipe.steps, eval_every=recipe.eval_every,
                         stop_at_train_acc=None)


@torch.no_grad()
def test_errors(model: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """1 where the model's prediction of a test point is wrong, else 0."""
    model.eval()
    return (model(x).argmax(dim=1) != y).double()


def train_run(config: DeepDoubleDescentConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run = config.runs[run_name]
    kind, settings = MODEL_KINDS[run.model], getattr(config.models, run.model).settings(run.width)
    input_dim = dataset.train.x.shape[1]
    model = build_seeded_model(kind, settings, input_dim, dataset.n_classes, run.seed, device)
    labels, replaced = corrupt_labels(dataset.train, config.label_noise)

    def tensor(a: Any) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    x_train, x_test = tensor(dataset.train.x), tensor(dataset.test.x)
    y_test = tensor(dataset.test.y)
    result = train_classifier(
        model, x_train, tensor(labels), x_test, y_test, train_settings(config.recipe),
        torch_generator(run.seed, "batches", device=device.type), checkpointing=checkpointing)
    final = result.final
    wrong = test_errors(model, x_test, y_test)
    # two fixed halves of the test set (alternate points of a randomly ordered set): the claims
    # pick a width on one half and measure it on the other, so the pick's luck does not count
    halves = [float(wrong[0::2].mean()), float(wrong[1::2].mean())]
    clean_wrong = test_errors(model, x_train, tensor(dataset.train.y))
    metrics = {
        "status": result.status, "steps": result.steps, "diverged_step": result.diverged_step,
        "model": run.model, "width": run.width, "seed": run.seed,
        "n_parameters": count_parameters(model),
        "fraction_wrong": float((labels != dataset.train.y).mean()),
        "fraction_replaced": float(replaced.mean()),
        "final_train_err": 1.0 - final.train_acc, "final_test_err": float(wrong.mean()),
        "test_err_halves": halves, "final_train_err_true_labels": float(clean_wrong.mean()),
        "final_train_loss": final.train_loss, "final_test_loss": final.test_loss,
    }
    return RunArtifacts(weights=state_tensors(model),
                        model_spec=model_spec(kind, settings, input_dim, dataset.n_classes),
                        history=pa.Table.from_pylist([row.as_dict() for row in result.history]),
                        metrics=metrics)


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run)
