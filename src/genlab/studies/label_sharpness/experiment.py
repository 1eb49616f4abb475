"""The label_sharpness study's experiment: one dataset per run (a Fourier-labelled d-plane, or
two classes of MNIST-1D or digits), inputs scaled to a root-mean-square entry of 1, and an MLP
trained at each training set size, then measured: test loss and accuracy, accuracy under PGD,
the label sharpness K_F and the intrinsic dimension of the inputs and of the last hidden layer.
A stage's synthetic runs train as ensembles, one per training set size (seeds and datasets as a
batch dimension)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from genlab.analyses.dimension.estimators import TwoNN, label_sharpness
from genlab.analyses.dimension.representations import layer_representations
from genlab.analyses.robustness import robust_accuracy
from genlab.data.dataset import Dataset, Split
from genlab.data.digits import digits
from genlab.data.fourier_labels import fourier_labels
from genlab.data.mnist1d import mnist1d
from genlab.models.registry import build_seeded_model, count_parameters, model_spec, state_tensors
from genlab.seeding import torch_generator
from genlab.studies.base import RunArtifacts, StudySpec
from genlab.studies.label_sharpness.settings import (
    STUDY,
    LabelSharpnessConfig,
    radius_key,
    run_id,
)
from genlab.train.ensemble import train_classifier_ensemble
from genlab.train.loop import train_classifier

MODEL_KIND = "mlp"


def _pair(split: Split, classes: tuple[int, int]) -> Split:
    """The points of the two classes, relabelled 0 and 1, in their order."""
    keep = np.isin(split.y, classes)
    return Split(split.x[keep], (split.y[keep] == classes[1]).astype(np.int64))


def synthesize(config: LabelSharpnessConfig) -> Dataset:
    """One draw's dataset, its inputs divided by the training inputs' RMS entry (so that K_F,
    the attack radius and the dimensions compare across datasets; the factor is in ``info``)."""
    data = config.data
    if data.task == "waves":
        raw = fourier_labels(data.settings())
        train, test = Split(raw.train.x, raw.train.y), raw.test
    else:
        raw = _real_data(data.task, data.settings())
        train, test = _pair(raw.train, data.classes()), _pair(raw.test, data.classes())
    scale = float(np.sqrt(np.mean(train.x.astype(np.float64) ** 2)))
    info = {**raw.info, "task": data.task, "pair": data.pair, "n_classes": 2,
            "input_rms_before_scaling": scale}
    return Dataset(train=Split((train.x / scale).astype(np.float32), train.y),
                   test=Split((test.x / scale).astype(np.float32), test.y),
                   n_classes=2, info=info)


@lru_cache(maxsize=2)
def _real_data(task: str, settings: Any) -> Dataset:
    """The whole real dataset of a draw, built once for all the pairs of a seed (a synthesize
    stage builds one seed's draws; MNIST-1D's generator takes seconds); callers copy what they
    keep."""
    return (mnist1d if task == "mnist1d" else digits)(settings)


def _dimension(points: torch.Tensor) -> float:
    """TwoNN (discarding the top 10% of ratios), duplicates dropped: ReLU layers map some points
    to the same representation."""
    return float(TwoNN(0.1, duplicates="drop").fit(points).dimension_)


def _measure(config: LabelSharpnessConfig, model: Any, x: torch.Tensor, y: torch.Tensor,
             x_test: torch.Tensor, y_test: torch.Tensor, seed: int) -> dict[str, Any]:
    """What the claims need of one trained model."""
    hidden = [h for name, h in layer_representations(model, x) if name.startswith("hidden")]
    sharp = label_sharpness(x, y, config.sharpness_samples, torch_generator(seed, "sharpness"))
    robust = {radius_key(eps): robust_accuracy(
        model, x_test, y_test, eps, steps=config.attack.steps,
        generator=torch_generator(seed, "pgd", radius_key(eps))) for eps in config.attack.radii}
    return {"label_sharpness": sharp.value, "d_data": _dimension(x),
            "d_repr": _dimension(hidden[-1]), "robust_acc": robust}


def _tensors(dataset: Dataset, device: Any) -> tuple[torch.Tensor, ...]:
    """x, y, x_test, y_test on the device."""
    return tuple(torch.from_numpy(a).to(device) for a in (
        dataset.train.x, dataset.train.y, dataset.test.x, dataset.test.y))


def _sizes(config: LabelSharpnessConfig, run_name: str, n: int) -> tuple[int, ...]:
    """The training set sizes of a run: the learning curve's on synthetic data, else all."""
    return config.train_sizes if config.runs[run_name].task == "waves" else (n,)


def _model(config: LabelSharpnessConfig, run_name: str, input_dim: int, device: Any) -> Any:
    return build_seeded_model(MODEL_KIND, config.model, input_dim, 2,
                              config.runs[run_name].seed, device)


def _generator(config: LabelSharpnessConfig, run_name: str, n: int, device: Any) -> Any:
    return torch_generator(config.runs[run_name].seed, "batches", n, device=device.type)


def _artifacts(config: LabelSharpnessConfig, run_name: str, dataset: Dataset,
               tensors: tuple[torch.Tensor, ...],
               trained: Sequence[tuple[int, Any, Any]]) -> RunArtifacts:
    """A run's artifacts from its trained (n, model, result) per train size, in order."""
    run = config.runs[run_name]
    x, y, x_test, y_test = tensors
    input_dim = x.shape[1]
    models, histories = [], []
    for n, model, result in trained:
        final = result.final
        models.append({"n_train": n, "status": result.status, "steps": result.steps,
                       "train_acc": final.train_acc, "test_loss": final.test_loss,
                       "test_acc": final.test_acc,
                       **_measure(config, model, x[:n], y[:n], x_test, y_test, run.seed)})
        histories.extend({"n_train": n, **row.as_dict()} for row in result.history)
    model = trained[-1][1]
    last = models[-1]
    dataset_name = run_id(run).rsplit("-s", 1)[0]
    diverged = any(m["status"] == "diverged" or not math.isfinite(m["test_loss"])
                   for m in models)
    metrics = {
        "status": "diverged" if diverged else "trained",
        "task": run.task, "dataset": dataset_name, "seed": run.seed,
        "intrinsic_dim": run.intrinsic_dim, "frequency": run.frequency, "pair": run.pair,
        "n_parameters": count_parameters(model), "n_test": len(x_test),
        "input_rms_before_scaling": dataset.info["input_rms_before_scaling"],
        "epsilon": config.attack.epsilon, "models": models,
        # the largest train size's numbers, for the run table
        "label_sharpness": last["label_sharpness"], "d_data": last["d_data"],
        "d_repr": last["d_repr"], "test_acc": last["test_acc"],
        "robust_acc": last["robust_acc"][radius_key(config.attack.epsilon)],
    }
    return RunArtifacts(
        weights=state_tensors(model),  # the largest train size's model
        model_spec=model_spec(MODEL_KIND, config.model, input_dim, 2),
        history=pa.Table.from_pylist(histories),
        metrics=metrics)


def train_run(config: LabelSharpnessConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    del checkpointing  # each model takes seconds
    settings = config.recipe.train_settings()
    tensors = _tensors(dataset, device)
    x, y, x_test, y_test = tensors
    trained = []
    for n in _sizes(config, run_name, len(x)):
        model = _model(config, run_name, x.shape[1], device)
        result = train_classifier(model, x[:n], y[:n], x_test, y_test, settings,
                                  _generator(config, run_name, n, device))
        trained.append((n, model, result))
    return _artifacts(config, run_name, dataset, tensors, trained)


def train_group(config: LabelSharpnessConfig, run_names: Sequence[str],
                datasets: Mapping[str, Dataset], device: Any) -> dict[str, RunArtifacts]:
    """A stage's runs at once: every model of one training set size and input and test shape
    (the synthetic runs' models of one N, over seeds and datasets) in one ensemble, each on its
    own data, batches and initialisation, so that each is the model :func:`train_run` trains
    (bit-identical on CPU at widths 16, 64 and 128, tested at 16; at width 8 MKL's kernels for
    tiny matrices differ by ~1e-7); a model of a shape of its own (a real pair) alone."""
    settings = config.recipe.train_settings()
    tensors = {name: _tensors(datasets[name], device) for name in run_names}
    members: dict[tuple[int, ...], list[tuple[str, int]]] = {}  # shape -> (run, n)
    for name in run_names:
        x, _, x_test, _ = tensors[name]
        for n in _sizes(config, name, len(x)):
            members.setdefault((n, *x.shape[1:], *x_test.shape), []).append((name, n))
    trained: dict[tuple[str, int], tuple[Any, Any]] = {}
    for group in members.values():
        models = [_model(config, name, tensors[name][0].shape[1], device) for name, _ in group]
        gens = [_generator(config, name, n, device) for name, n in group]
        if len(group) == 1:
            ((name, n),), (model,), (gen,) = group, models, gens
            x, y, x_test, y_test = tensors[name]
            results = [train_classifier(model, x[:n], y[:n], x_test, y_test, settings, gen)]
        else:
            results = train_classifier_ensemble(
                models, [tensors[name][0][:n] for name, n in group],
                [tensors[name][1][:n] for name, n in group],
                [tensors[name][2] for name, _ in group], [tensors[name][3] for name, _ in group],
                [settings] * len(group), gens)
        trained.update({member: (model, result) for member, model, result
                        in zip(group, models, results, strict=True)})
    return {name: _artifacts(config, name, datasets[name], tensors[name],
                             [(n, *trained[name, n])
                              for n in _sizes(config, name, len(tensors[name][0]))])
            for name in run_names}


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run,
                 train_group=train_group)
