"""The intrinsic-dimension study's experiment: data, and the training of each run kind."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import torch

from genlab.analyses.dimension.estimators import MLE, TwoNN, label_sharpness
from genlab.analyses.dimension.representations import twonn_profile
from genlab.analyses.dimension.subspace import d_int90, train_in_subspace
from genlab.data.dataset import corrupt_labels
from genlab.data.manifolds import ManifoldSettings, manifold
from genlab.data.teacher_student import teacher_student
from genlab.models.registry import build_seeded_model, count_parameters, model_spec, state_tensors
from genlab.seeding import torch_generator
from genlab.settings import MLPSettings
from genlab.studies.base import (
    RunArtifacts,
    StudySpec,
    TrainingObjective,
    array_objective,
    ensemble_data,
)
from genlab.studies.intrinsic_dim.settings import (
    STUDY,
    EstimateRun,
    IntrinsicDimConfig,
    LayersRun,
    ScalingRun,
    SubspaceRun,
)
from genlab.train.ensemble import train_classifier_ensemble
from genlab.train.loop import train_classifier

if TYPE_CHECKING:
    from genlab.data.dataset import Dataset


def synthesize(config: IntrinsicDimConfig) -> Dataset:
    """The layers part's dataset; ``info`` carries the generator's true intrinsic dimension."""
    return manifold(config.data)


# ---------------------------------------------------------------------------------------------
# Training.
# ---------------------------------------------------------------------------------------------


def _data_dimension(x: Any, true_dim: int, mle_k: int) -> dict[str, Any]:
    """d_data of the inputs ``x`` by TwoNN and MLE (k, inverse average), beside the truth."""
    twonn = TwoNN(duplicates="drop").fit(x)
    mle = MLE(k=mle_k, duplicates="drop").fit(x)
    return {"true": true_dim, "twonn": twonn.dimension_, "mle": mle.dimension_,
            "mle_k": mle_k, "n_points": int(x.shape[0]) - twonn.n_duplicates_,
            "ambient_dim": int(x.shape[1])}


def _label_sharpness(x: Any, y: Any, num_samples: int, seed: int) -> dict[str, Any]:
    """K̂_F with what it depends on: sample, resolution and input normalisation."""
    result = label_sharpness(x, y, num_samples, torch_generator(seed, "label-sharpness"))
    return {"value": result.value, "num_samples": result.num_samples,
            "num_pairs": result.num_pairs, "resolution_features": result.num_features,
            "input_min": result.input_min, "input_max": result.input_max,
            "input_rms": result.input_rms, "distance": result.distance,
            "normalisation": "raw generator inputs (no rescaling)",
            "numerator": "1{y_j != y_k} (binary: |y_j - y_k|)"}


def _train_estimate(config: IntrinsicDimConfig, run: EstimateRun, device: Any) -> RunArtifacts:
    s = config.estimators
    rows = []
    for d in s.dims:
        data = manifold(ManifoldSettings(
            task="classification", n_classes=2, teacher_hidden=(), intrinsic_dim=d,
            ambient_dim=s.ambient_dim, embedding=run.embedding,
            embedding_scale=s.embedding_scale, n_train=s.n_points, n_test=1, seed=run.seed))
        x = torch.from_numpy(data.train.x).to(device)
        estimates = {
            "twonn": TwoNN(s.twonn_discard).fit(x).dimension_,
            "mle": MLE(s.mle_k, average="inverse").fit(x).dimension_,
            "mle_mean": MLE(s.mle_k, average="mean").fit(x).dimension_,
        }
        # Pope et al.'s code divides by k - 2 inside the inverse average (notes finding 0.2):
        # derived, reported to show the bias, never claimed
        estimates["mle_pope"] = estimates["mle"] * (s.mle_k - 2) / (s.mle_k - 1)
        rows += [{"d": d, "estimator": name, "estimate": value, "ratio": value / d}
                 for name, value in estimates.items()]
    metrics = {"status": "done", "kind": "estimate", "seed": run.seed,
               "embedding": run.embedding, "n_points": s.n_points, "ambient_dim": s.ambient_dim,
               "mle_k": s.mle_k, "twonn_discard": s.twonn_discard,
               "estimates": {f"{r['estimator']}_d{r['d']}": r["estimate"] for r in rows}}
    spec = {"kind": "none", "reason": "estimator run: no model is trained"}
    return RunArtifacts(weights={}, model_spec=spec, history=pa.Table.from_pylist(rows),
                        metrics=metrics)


def _layers_labels(dataset: Dataset, run: LayersRun) -> tuple[np.ndarray, np.ndarray]:
    """The labels a layers run trains on (every one replaced by a uniform class for random
    labels) and the mask of the replaced ones."""
    return corrupt_labels(dataset.train, 1.0 if run.labels == "random" else 0.0)


def _layers_model(config: IntrinsicDimConfig, run: LayersRun, dataset: Dataset,
                  device: Any) -> torch.nn.Module:
    return build_seeded_model("mlp", config.layers.model, dataset.train.x.shape[1],
                              dataset.n_classes, run.seed, device)


def _layers_artifacts(config: IntrinsicDimConfig, run: LayersRun, dataset: Dataset,
                      drawn: tuple[np.ndarray, np.ndarray], model: torch.nn.Module,
                      at_init: list[dict], result: Any, device: Any) -> RunArtifacts:
    """A trained layers run's files: ``drawn`` the labels it trained on and the mask of the
    replaced ones (:func:`_layers_labels`), ``model`` its trained weights, ``at_init`` its TwoNN
    profile before training, ``result`` the training's :class:`TrainResult`."""
    s = config.layers
    labels, replaced = drawn

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    trained = twonn_profile(model, tensor(dataset.test.x), s.twonn_discard)
    final = result.final
    metrics = {
        "status": result.status, "kind": "layers", "seed": run.seed, "labels": run.labels,
        "steps": result.steps, "fit_step": result.fit_step,
        "fraction_wrong": float((labels != dataset.train.y).mean()),
        "fraction_replaced": float(replaced.mean()),
        "final_train_acc": final.train_acc, "final_test_acc": final.test_acc,
        "final_test_loss": final.test_loss,
        "layers": [r["layer"] for r in trained], "widths": [r["width"] for r in trained],
        "id_init": [r["id"] for r in at_init], "id_trained": [r["id"] for r in trained],
        "id_n_points": [r["n_distinct"] for r in trained],
        "last_hidden_id_init": at_init[-2]["id"], "last_hidden_id": trained[-2]["id"],
        "d_data": _data_dimension(tensor(dataset.train.x), int(dataset.info["intrinsic_dim"]),
                                  config.estimators.mle_k),
        "label_sharpness": _label_sharpness(tensor(dataset.train.x), tensor(labels),
                                            config.label_sharpness.num_samples,
                                            config.data.seed),
    }
    spec = model_spec("mlp", s.model, dataset.train.x.shape[1], dataset.n_classes)
    history = pa.Table.from_pylist([row.as_dict() for row in result.history])
    return RunArtifacts(weights=state_tensors(model), model_spec=spec, history=history,
                        metrics=metrics)


def _train_layers(config: IntrinsicDimConfig, run: LayersRun, dataset: Dataset, device: Any,
                  checkpointing: Any) -> RunArtifacts:
    s = config.layers
    drawn = _layers_labels(dataset, run)
    model = _layers_model(config, run, dataset, device)

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    x_test = tensor(dataset.test.x)
    at_init = twonn_profile(model, x_test, s.twonn_discard)
    result = train_classifier(model, tensor(dataset.train.x), tensor(drawn[0]), x_test,
                              tensor(dataset.test.y), s.train,
                              torch_generator(run.seed, "batches", device=device.type),
                              checkpointing=checkpointing)
    return _layers_artifacts(config, run, dataset, drawn, model, at_init, result, device)


def _train_layers_group(config: IntrinsicDimConfig, names: Sequence[str],
                        datasets: Mapping[str, Dataset], device: Any) -> dict[str, RunArtifacts]:
    """The layers runs ``names`` as one ensemble (genlab.train.ensemble): one architecture and
    recipe, each member on its own seed's draw, initialisation, minibatches and labels."""
    s = config.layers
    runs = [config.runs[name] for name in names]
    data = [datasets[name] for name in names]
    models = [_layers_model(config, run, dataset, device)
              for run, dataset in zip(runs, data, strict=True)]
    at_init = [twonn_profile(model, torch.from_numpy(dataset.test.x).to(device),
                             s.twonn_discard) for model, dataset in zip(models, data, strict=True)]
    drawn = [_layers_labels(dataset, run) for run, dataset in zip(runs, data, strict=True)]
    results = train_classifier_ensemble(
        models, *ensemble_data(data, device, [labels for labels, _ in drawn]),
        [s.train] * len(runs),
        [torch_generator(run.seed, "batches", device=device.type) for run in runs])
    return {name: _layers_artifacts(config, run, dataset, labels, model, init, result, device)
            for name, run, dataset, labels, model, init, result
            in zip(names, runs, data, drawn, models, at_init, results, strict=True)}


def subspace_model_settings(config: IntrinsicDimConfig, width: int) -> MLPSettings:
    s = config.subspace
    return MLPSettings(hidden=(width,) * s.depth, activation=s.activation)


def _train_subspace(config: IntrinsicDimConfig, run: SubspaceRun, device: Any) -> RunArtifacts:
    s = config.subspace
    data = teacher_student(s.data)
    tensors = [torch.from_numpy(a).to(device)
               for a in (data.train.x, data.train.y, data.test.x, data.test.y)]
    settings = subspace_model_settings(config, run.width)
    input_dim, n_classes = data.train.x.shape[1], data.n_classes

    def fresh() -> torch.nn.Module:  # θ₀: the same initialisation for the full model and every d
        return build_seeded_model("mlp", settings, input_dim, n_classes, run.seed, device)

    full_model = fresh()
    full = train_classifier(full_model, *tensors, s.full_train,
                            torch_generator(run.seed, "batches", device=device.type))
    num_params = count_parameters(full_model)
    rows, weights = [], {f"full.{k}": v for k, v in state_tensors(full_model).items()}
    for d in s.dims:
        if d > num_params:
            break  # beyond D the subspace is the whole space
        result = train_in_subspace(fresh(), d, *tensors, s.train, seed=run.seed)
        rows.append({"d": d, "train_acc": result.train_acc, "test_acc": result.test_acc,
                     "test_loss": result.test_loss, "steps": result.steps,
                     "status": result.status})
        weights[f"z.d{d}"] = result.z.detach().to("cpu").contiguous()
        if s.stop_at_target and result.test_acc >= s.threshold * full.final.test_acc:
            break
    accuracy = {r["d"]: r["test_acc"] for r in rows}
    statuses = [full.status] + [r["status"] for r in rows]
    metrics = {
        "status": "diverged" if "diverged" in statuses else "done", "kind": "subspace",
        "seed": run.seed, "width": run.width, "n_parameters": num_params,
        "full_status": full.status, "full_steps": full.steps,
        "full_train_acc": full.final.train_acc, "full_test_acc": full.final.test_acc,
        "test_acc_by_d": {str(d): a for d, a in accuracy.items()},
        "threshold": s.threshold,
        "d_int90": d_int90(accuracy, full.final.test_acc, s.threshold),
        "d_data": _data_dimension(tensors[0].double(), s.data.input_dim,
                                  config.estimators.mle_k),
        "label_sharpness": _label_sharpness(tensors[0], tensors[1],
                                            config.label_sharpness.num_samples, s.data.seed),
    }
    spec = {"kind": "mlp_subspace", "model": {"kind": "mlp",
                                              "settings": settings.model_dump(mode="json"),
                                              "input_dim": input_dim, "output_dim": n_classes},
            "theta0": f"build_seeded_model(seed={run.seed})",
            "projection": "genlab.analyses.dimension.subspace.RandomProjection(D, d, seed)",
            "tensors": "full.<name>: the fully trained model; z.d<d>: θ = θ₀ + P z"}
    return RunArtifacts(weights=weights, model_spec=spec, history=pa.Table.from_pylist(rows),
                        metrics=metrics)


def scaling_data_settings(config: IntrinsicDimConfig, run: ScalingRun) -> ManifoldSettings:
    s = config.scaling
    return ManifoldSettings(task="classification", n_classes=s.n_classes,
                            teacher_hidden=s.teacher_hidden, intrinsic_dim=run.d_data,
                            ambient_dim=s.ambient_dim, embedding=s.embedding,
                            embedding_scale=s.embedding_scale, n_train=s.sizes[-1],
                            n_test=s.n_test, seed=run.seed)


def _train_scaling(config: IntrinsicDimConfig, run: ScalingRun, device: Any) -> RunArtifacts:
    s = config.scaling
    data = manifold(scaling_data_settings(config, run))
    x_all = torch.from_numpy(data.train.x).to(device)
    y_all = torch.from_numpy(data.train.y).to(device)
    x_test = torch.from_numpy(data.test.x).to(device)
    y_test = torch.from_numpy(data.test.y).to(device)
    input_dim = data.train.x.shape[1]
    rows, weights = [], {}
    for n in s.sizes:
        model = build_seeded_model("mlp", s.model, input_dim, data.n_classes, run.seed, device)
        result = train_classifier(model, x_all[:n], y_all[:n], x_test, y_test, s.train,
                                  torch_generator(run.seed, "batches", n, device=device.type))
        final = result.final
        rows.append({"n_train": n, "train_acc": final.train_acc, "test_acc": final.test_acc,
                     "test_err": 1.0 - final.test_acc, "test_loss": final.test_loss,
                     "steps": result.steps, "status": result.status})
        weights |= {f"n{n}.{k}": v for k, v in state_tensors(model).items()}
    statuses = [r["status"] for r in rows]
    metrics = {
        "status": "diverged" if "diverged" in statuses else "done", "kind": "scaling",
        "seed": run.seed, "d_data_true": run.d_data,
        "n_fitted": statuses.count("fitted"), "n_sizes": len(rows),
        "test_err_by_n": {str(r["n_train"]): r["test_err"] for r in rows},
        "d_data": _data_dimension(x_all.double(), run.d_data, config.estimators.mle_k),
        "label_sharpness": _label_sharpness(x_all, y_all, config.label_sharpness.num_samples,
                                            run.seed),
    }
    spec = {"kind": "mlp_per_size", "model": {"kind": "mlp",
                                              "settings": s.model.model_dump(mode="json"),
                                              "input_dim": input_dim,
                                              "output_dim": data.n_classes},
            "tensors": "n<N>.<name>: the model trained on the first N points"}
    return RunArtifacts(weights=weights, model_spec=spec, history=pa.Table.from_pylist(rows),
                        metrics=metrics)


def train_run(config: IntrinsicDimConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run = config.runs[run_name]
    if isinstance(run, EstimateRun):
        return _train_estimate(config, run, device)
    if isinstance(run, LayersRun):
        return _train_layers(config, run, dataset, device, checkpointing)
    if isinstance(run, SubspaceRun):
        return _train_subspace(config, run, device)
    return _train_scaling(config, run, device)


def train_group(config: IntrinsicDimConfig, run_names: Sequence[str],
                datasets: Mapping[str, Dataset], device: Any) -> dict[str, RunArtifacts]:
    """A block of seeds' runs: its layers runs (true and random labels, the costly part: 5,000-
    8,000 Adam steps each) train as one ensemble, each exactly the run :func:`train_run` trains
    alone (tested); the other kinds, which train several models of different sizes a run (one
    per subspace dimension d or training-set size N), one by one as :func:`train_run` does."""
    layers = [name for name in run_names if isinstance(config.runs[name], LayersRun)]
    results = _train_layers_group(config, layers, datasets, device) if layers else {}
    for name in run_names:
        if name not in results:
            results[name] = train_run(config, name, datasets[name], device)
    return {name: results[name] for name in run_names}


def objective(config: IntrinsicDimConfig, run_name: str, dataset: Dataset,
              device: Any) -> TrainingObjective | None:
    """A layers run's training loss: ``layers.train``'s loss on the labels it was trained on,
    with its step size, momentum and batch size (an Adam run: its step size, which the
    stability threshold of the sharpness analysis, a (heavy-ball) SGD formula, does not
    describe). None for the other kinds, which the analyze stage skips with the reason: an
    estimate run trains no model, and a subspace or scaling run saves several (the full model
    and θ₀ + P z per d; one model per N) under a model.json that load_model does not rebuild."""
    run = config.runs[run_name]
    if not isinstance(run, LayersRun):
        return None
    labels, _ = _layers_labels(dataset, run)
    return array_objective(dataset.train.x, labels, config.layers.train, device)


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run, train_group=train_group,
                 objective=objective)
