"""The MNIST-1D baselines study's experiment: the data and one trained model per run, alone or
a stage's runs at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import torch

from genlab.data.mnist1d import mnist1d
from genlab.models.linear import LinearSettings
from genlab.models.registry import build_seeded_model, count_parameters, model_spec, state_tensors
from genlab.seeding import torch_generator
from genlab.settings import TrainSettings
from genlab.studies.base import RunArtifacts, StudySpec, ensemble_data
from genlab.studies.mnist1d_baselines.settings import STUDY, BaselineRecipe, BaselinesConfig
from genlab.train.ensemble import train_classifier_ensemble
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


def _model(config: BaselinesConfig, run_name: str, dataset: Dataset, device: Any) -> Any:
    run = config.runs[run_name]
    return build_seeded_model(MODEL_KINDS[run.model], model_settings(config, run.model),
                              dataset.train.x.shape[1], dataset.n_classes, run.seed, device)


def _artifacts(config: BaselinesConfig, run_name: str, dataset: Dataset, model: Any,
               result: Any) -> RunArtifacts:
    run = config.runs[run_name]
    kind, settings = MODEL_KINDS[run.model], model_settings(config, run.model)
    final = result.final
    metrics = {"status": result.status, "steps": result.steps,
               "diverged_step": result.diverged_step, "model": run.model,
               "shuffle_seq": run.shuffle_seq, "seed": run.seed,
               "n_parameters": count_parameters(model), "final_train_acc": final.train_acc,
               "final_train_loss": final.train_loss, "final_test_acc": final.test_acc,
               "final_test_loss": final.test_loss}
    return RunArtifacts(weights=state_tensors(model),
                        model_spec=model_spec(kind, settings, dataset.train.x.shape[1],
                                              dataset.n_classes),
                        history=pa.Table.from_pylist([row.as_dict() for row in result.history]),
                        metrics=metrics)


def train_run(config: BaselinesConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run = config.runs[run_name]
    model = _model(config, run_name, dataset, device)

    def tensor(a: Any) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    result = train_classifier(
        model, tensor(dataset.train.x), tensor(dataset.train.y), tensor(dataset.test.x),
        tensor(dataset.test.y), train_settings(config.recipe),
        torch_generator(run.seed, "batches", device=device.type), checkpointing=checkpointing)
    return _artifacts(config, run_name, dataset, model, result)


# Models the group trainer trains as one ensemble. The CNN is not among them: through vmap its
# convolutions sum in another order than the loop's, and thousands of Adam steps at step size
# 0.01 carry that rounding into visibly different models (seed 0, 1,000 steps: test accuracy
# 90.7% alone, 86.8% in an ensemble), so its runs train one after the other, exactly as alone.
ENSEMBLED = ("logistic", "mlp")


def train_group(config: BaselinesConfig, run_names: Sequence[str],
                datasets: Mapping[str, Dataset], device: Any) -> dict[str, RunArtifacts]:
    """A stage's runs in one process: the runs of logistic regression and of the MLP each as
    one ensemble over seeds and variants (each row on its own draw, bit-identical to
    :func:`train_run` on CPU, tested), the CNN's one after the other."""
    out: dict[str, RunArtifacts] = {}
    for name in ENSEMBLED:
        names = [n for n in run_names if config.runs[n].model == name]
        if not names:
            continue
        data = [datasets[n] for n in names]
        models = [_model(config, n, d, device) for n, d in zip(names, data, strict=True)]
        results = train_classifier_ensemble(
            models, *ensemble_data(data, device), [train_settings(config.recipe)] * len(names),
            [torch_generator(config.runs[n].seed, "batches", device=device.type)
             for n in names])
        out.update({n: _artifacts(config, n, d, m, r)
                    for n, d, m, r in zip(names, data, models, results, strict=True)})
    for n in run_names:
        if n not in out:
            out[n] = train_run(config, n, datasets[n], device)
    return {n: out[n] for n in run_names}


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run,
                 train_group=train_group)
