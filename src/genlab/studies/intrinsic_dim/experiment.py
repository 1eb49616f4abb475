"""The intrinsic-dimension study's experiment: data, training of each run kind, summary,
claims and figures (the science is in the package docstring, the settings in ``settings``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from genlab.data.manifolds import ManifoldSettings
from genlab.settings import MLPSettings
from genlab.studies.base import ClaimResult, RunArtifacts, StudySpec, Summary, stack_histories
from genlab.studies.intrinsic_dim.settings import (
    NAME,
    STUDY,
    EstimateRun,
    IntrinsicDimConfig,
    LayersRun,
    ScalingRun,
    SubspaceRun,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from genlab.data.dataset import Dataset

CITATIONS = {
    "twonn": "Facco, d'Errico, Rodriguez, Laio. Sci. Rep. 7, 12140 (2017).",
    "mle": "Levina & Bickel. NeurIPS 2004; MacKay & Ghahramani. Comments on Levina & Bickel "
           "(2005).",
    "layers": "Ansuini, Laio, Macke, Zoccolan. Intrinsic dimension of data representations in "
              "deep neural networks. NeurIPS 2019.",
    "subspace": "Li, Farkhoor, Liu, Yosinski. Measuring the intrinsic dimension of objective "
                "landscapes. ICLR 2018.",
    "scaling": "Pope et al. The intrinsic dimension of images and its impact on learning. ICLR "
               "2021; Konz & Mazurowski. The effect of intrinsic dataset properties on "
               "generalization. ICLR 2024.",
}


def synthesize(config: IntrinsicDimConfig) -> Dataset:
    """The layers part's dataset; ``info`` carries the generator's true intrinsic dimension."""
    from genlab.data.manifolds import manifold

    return manifold(config.data)


# ---------------------------------------------------------------------------------------------
# Training.
# ---------------------------------------------------------------------------------------------


def _data_dimension(x: Any, true_dim: int, mle_k: int) -> dict[str, Any]:
    """d_data of the inputs ``x`` by TwoNN and MLE (k, inverse average), beside the truth."""
    from genlab.analyses.intrinsic_dim import MLE, TwoNN

    twonn = TwoNN(duplicates="drop").fit(x)
    mle = MLE(k=mle_k, duplicates="drop").fit(x)
    return {"true": true_dim, "twonn": twonn.dimension_, "mle": mle.dimension_,
            "mle_k": mle_k, "n_points": int(x.shape[0]) - twonn.n_duplicates_,
            "ambient_dim": int(x.shape[1])}


def _label_sharpness(x: Any, y: Any, num_samples: int, seed: int) -> dict[str, Any]:
    """K̂_F with what it depends on: sample, resolution and input normalisation."""
    from genlab.analyses.intrinsic_dim import label_sharpness
    from genlab.seeding import torch_generator

    result = label_sharpness(x, y, num_samples, torch_generator(seed, "label-sharpness"))
    return {"value": result.value, "num_samples": result.num_samples,
            "num_pairs": result.num_pairs, "resolution_features": result.num_features,
            "input_min": result.input_min, "input_max": result.input_max,
            "input_rms": result.input_rms, "distance": result.distance,
            "normalisation": "raw generator inputs (no rescaling)",
            "numerator": "1{y_j != y_k} (binary: |y_j - y_k|)"}


def _train_estimate(config: IntrinsicDimConfig, run: EstimateRun, device: Any) -> RunArtifacts:
    import torch

    from genlab.analyses.intrinsic_dim import MLE, TwoNN
    from genlab.data.manifolds import manifold

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


def representations(model: Any, x: Any) -> list[tuple[str, Any]]:
    """(name, activations) of ``x`` through a :class:`genlab.models.mlp.MLP`: the input, each
    hidden layer after its nonlinearity (``hidden1`` …), and the logits (``output``)."""
    import torch

    out = [("input", x)]
    layers = list(model.net)
    h = x
    with torch.no_grad():
        hidden = 0
        for index, layer in enumerate(layers):
            h = layer(h)
            if index == len(layers) - 1:
                out.append(("output", h))
            elif not isinstance(layer, torch.nn.Linear):
                hidden += 1
                out.append((f"hidden{hidden}", h))
    return out


def layer_dimensions(model: Any, x: Any, discard: float) -> list[dict[str, Any]]:
    """TwoNN of each representation of ``x`` (model in eval mode, flags restored)."""
    from genlab.analyses.intrinsic_dim import TwoNN

    was_training = model.training
    model.eval()
    try:
        rows = []
        for depth, (name, h) in enumerate(representations(model, x)):
            fit = TwoNN(discard, duplicates="drop").fit(h)
            rows.append({"depth": depth, "layer": name, "width": int(h.shape[1]),
                         "twonn": fit.dimension_, "n_points": int(h.shape[0]) - fit.n_duplicates_})
        return rows
    finally:
        model.train(was_training)


def _train_layers(config: IntrinsicDimConfig, run: LayersRun, dataset: Dataset, device: Any,
                  checkpointing: Any) -> RunArtifacts:
    import torch

    from genlab.data.dataset import corrupt_labels
    from genlab.models.registry import build_seeded_model, model_spec, state_tensors
    from genlab.seeding import torch_generator
    from genlab.train.loop import train_classifier

    s = config.layers
    labels, replaced = corrupt_labels(dataset.train, 1.0 if run.labels == "random" else 0.0)
    input_dim = dataset.train.x.shape[1]
    model = build_seeded_model("mlp", s.model, input_dim, dataset.n_classes, run.seed, device)

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    x_test = tensor(dataset.test.x)
    at_init = layer_dimensions(model, x_test, s.twonn_discard)
    result = train_classifier(model, tensor(dataset.train.x), tensor(labels), x_test,
                              tensor(dataset.test.y), s.train,
                              torch_generator(run.seed, "batches", device=device.type),
                              checkpointing=checkpointing)
    trained = layer_dimensions(model, x_test, s.twonn_discard)
    final = result.final
    metrics = {
        "status": result.status, "kind": "layers", "seed": run.seed, "labels": run.labels,
        "steps": result.steps, "fit_step": result.fit_step,
        "fraction_wrong": float((labels != dataset.train.y).mean()),
        "fraction_replaced": float(replaced.mean()),
        "final_train_acc": final.train_acc, "final_test_acc": final.test_acc,
        "final_test_loss": final.test_loss,
        "layers": [r["layer"] for r in trained], "widths": [r["width"] for r in trained],
        "id_init": [r["twonn"] for r in at_init], "id_trained": [r["twonn"] for r in trained],
        "id_n_points": [r["n_points"] for r in trained],
        "last_hidden_id_init": at_init[-2]["twonn"], "last_hidden_id": trained[-2]["twonn"],
        "d_data": _data_dimension(tensor(dataset.train.x), int(dataset.info["intrinsic_dim"]),
                                  config.estimators.mle_k),
        "label_sharpness": _label_sharpness(tensor(dataset.train.x), tensor(labels),
                                            config.label_sharpness.num_samples,
                                            config.data.seed),
    }
    spec = model_spec("mlp", s.model, input_dim, dataset.n_classes)
    history = pa.Table.from_pylist([row.as_dict() for row in result.history])
    return RunArtifacts(weights=state_tensors(model), model_spec=spec, history=history,
                        metrics=metrics)


def subspace_model_settings(config: IntrinsicDimConfig, width: int) -> MLPSettings:
    s = config.subspace
    return MLPSettings(hidden=(width,) * s.depth, activation=s.activation)


def _train_subspace(config: IntrinsicDimConfig, run: SubspaceRun, device: Any) -> RunArtifacts:
    import torch

    from genlab.analyses.subspace import d_int90, train_in_subspace
    from genlab.data.teacher_student import teacher_student
    from genlab.models.registry import build_seeded_model, count_parameters, state_tensors
    from genlab.seeding import torch_generator
    from genlab.train.loop import train_classifier

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
            "projection": "genlab.analyses.subspace.RandomProjection(D, d, seed)",
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
    import torch

    from genlab.data.manifolds import manifold
    from genlab.models.registry import build_seeded_model, state_tensors
    from genlab.seeding import torch_generator
    from genlab.train.loop import train_classifier

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
    # torch is imported in the helpers, never at module level: params validation imports every
    # study module and must stay torch-free.
    run = config.runs[run_name]
    if isinstance(run, EstimateRun):
        return _train_estimate(config, run, device)
    if isinstance(run, LayersRun):
        return _train_layers(config, run, dataset, device, checkpointing)
    if isinstance(run, SubspaceRun):
        return _train_subspace(config, run, device)
    return _train_scaling(config, run, device)


# ---------------------------------------------------------------------------------------------
# Aggregation and claim checks.
# ---------------------------------------------------------------------------------------------

CLAIMS = {
    "twonn": "TwoNN recovers the intrinsic dimension of synthetic manifolds",
    "mle": "The MLE (MacKay-Ghahramani average) recovers the intrinsic dimension of synthetic "
           "manifolds",
    "layers": "A network trained on true labels compresses its last hidden layer: its ID falls "
              "below the ID at initialisation and below that of a random-label network",
    "subspace": "d_int90 is roughly width-invariant",
    "scaling": "Test error at a fixed training-set size rises with the data's intrinsic "
               "dimension",
}
CRITERIA = {
    "twonn": "seed-mean TwoNN estimate within ±10% of d for every d ≤ 10, and within "
             "[0.7d, 1.05d] for d = 20, on every embedding",
    "mle": "seed-mean MLE (k neighbours, divisor k - 1, inverse average) within ±10% of d for "
           "every d ≤ 10, and within [0.7d, 1.05d] for d = 20, on every embedding",
    "layers": "seed-mean TwoNN ID of the last hidden layer (test inputs): trained on true labels "
              "< the same model at init, and < trained on random labels",
    "subspace": "d_int90(widest) / d_int90(narrowest) ≤ 2.5 (each the median over seeds) "
                "while their parameter counts differ by ≥ 5x",
    "scaling": "at every training-set size N, seed-mean test error strictly increases with "
               "d_data",
}


def _claim(key: str, status: str, numbers: Mapping[str, Any]) -> ClaimResult:
    return ClaimResult(study=NAME, claim=CLAIMS[key], status=status,  # type: ignore[arg-type]
                       numbers=numbers, citation=CITATIONS[key], criterion=CRITERIA[key])


def estimate_window(d: int) -> tuple[float, float] | None:
    """The accepted range of an estimate of d: ±10% for d ≤ 10, [0.7d, 1.05d] for d = 20,
    nothing claimed at other d."""
    if d <= 10:
        return 0.9 * d, 1.1 * d
    if d == 20:
        return 0.7 * d, 1.05 * d
    return None


def check_estimator(key: str, estimates: Mapping[str, Mapping[int, float]]) -> ClaimResult:
    """``estimates``: embedding -> true d -> seed-mean estimate of this estimator."""
    checked: dict[str, Any] = {}
    for embedding, by_d in sorted(estimates.items()):
        for d, value in sorted(by_d.items()):
            window = estimate_window(int(d))
            if window is not None:
                checked[f"{embedding}_d{d}"] = {"estimate": value, "low": window[0],
                                                "high": window[1],
                                                "ok": window[0] <= value <= window[1]}
    if not checked:
        return _claim(key, "not_run", {"reason": "no estimate at a claimed d (≤ 10 or 20)"})
    passed = all(c["ok"] for c in checked.values())
    return _claim(key, "reproduced" if passed else "not_reproduced",
                  {"checked": checked,
                   "failed": sorted(name for name, c in checked.items() if not c["ok"])})


def check_layers(init: float | None, true: float | None, random: float | None) -> ClaimResult:
    """Seed-mean last-hidden-layer IDs: at init, trained on true labels, on random labels."""
    numbers = {"last_hidden_id_init": init, "last_hidden_id_true": true,
               "last_hidden_id_random": random}
    if init is None or true is None or random is None:
        return _claim("layers", "not_run",
                      {**numbers, "reason": "needs layers runs with true and random labels"})
    passed = true < init and true < random
    return _claim("layers", "reproduced" if passed else "not_reproduced",
                  {**numbers, "true_over_init": true / init, "true_over_random": true / random})


def check_subspace(per_width: Mapping[int, Mapping[str, Any]]) -> ClaimResult:
    """``per_width``: width -> {"n_parameters", "d_int90" (None: not reached), "max_d"}."""
    widths = sorted(per_width)
    numbers: dict[str, Any] = {"d_int90_by_width": {w: per_width[w]["d_int90"] for w in widths},
                               "n_parameters_by_width": {w: per_width[w]["n_parameters"]
                                                         for w in widths}}
    if len(widths) < 2:
        return _claim("subspace", "not_run", {**numbers, "reason": "needs two widths"})
    narrow, wide = per_width[widths[0]], per_width[widths[-1]]
    param_ratio = wide["n_parameters"] / narrow["n_parameters"]
    numbers["param_ratio"] = param_ratio
    if param_ratio < 5:
        return _claim("subspace", "not_run",
                      {**numbers, "reason": "the widths' parameter counts differ by < 5x"})
    missing = [w for w in (widths[0], widths[-1]) if per_width[w]["d_int90"] is None]
    if missing:
        top = max(per_width[w]["max_d"] or 0 for w in missing)
        numbers["reason"] = (f"no d in the sweep (up to {top}) reached the target at width "
                             f"{missing}")
        return _claim("subspace", "not_reproduced", numbers)
    ratio = max(wide["d_int90"], narrow["d_int90"]) / min(wide["d_int90"], narrow["d_int90"])
    numbers["d_int90_ratio"] = ratio
    return _claim("subspace", "reproduced" if ratio <= 2.5 else "not_reproduced", numbers)


def check_scaling(mean_err: Mapping[int, Mapping[int, float]]) -> ClaimResult:
    """``mean_err``: d_data -> N -> seed-mean test error."""
    dims = sorted(mean_err)
    sizes = sorted(set.intersection(*(set(mean_err[d]) for d in dims))) if dims else []
    numbers: dict[str, Any] = {"test_err": {d: {n: mean_err[d][n] for n in sizes} for d in dims}}
    if len(dims) < 2 or not sizes:
        return _claim("scaling", "not_run",
                      {**numbers, "reason": "needs ≥ 2 values of d_data at a common N"})
    failing = [n for n in sizes
               if not all(mean_err[a][n] < mean_err[b][n]
                          for a, b in zip(dims[:-1], dims[1:], strict=True))]
    numbers["sizes_not_increasing"] = failing
    return _claim("scaling", "not_reproduced" if failing else "reproduced", numbers)


def power_law_exponent(sizes: Sequence[int], errors: Sequence[float],
                       floor: float) -> float | None:
    """Least-squares slope of log(max(error, floor)) on log N (None with < 2 sizes)."""
    if len(sizes) < 2:
        return None
    x = np.log(np.asarray(sizes, dtype=np.float64))
    y = np.log(np.maximum(np.asarray(errors, dtype=np.float64), floor))
    return float(np.polyfit(x, y, 1)[0])


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _by_kind(metrics: Mapping[str, Mapping[str, Any]], kind: str) -> dict[str, Mapping[str, Any]]:
    return {name: m for name, m in sorted(metrics.items()) if m["kind"] == kind}


def _summarize_estimates(metrics: Mapping[str, Mapping[str, Any]],
                         histories: Mapping[str, pa.Table]) -> dict[str, Any]:
    values: dict[str, dict[str, dict[int, list[float]]]] = {}
    for name, m in _by_kind(metrics, "estimate").items():
        for row in histories[name].to_pylist():
            values.setdefault(row["estimator"], {}).setdefault(m["embedding"], {}).setdefault(
                int(row["d"]), []).append(row["estimate"])
    return {est: {emb: {d: float(np.mean(v)) for d, v in sorted(by_d.items())}
                  for emb, by_d in sorted(by_emb.items())}
            for est, by_emb in sorted(values.items())}


def _summarize_layers(metrics: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    runs = _by_kind(metrics, "layers")
    out: dict[str, Any] = {}
    for labels in ("clean", "random"):
        mine = [m for m in runs.values() if m["labels"] == labels]
        if not mine:
            continue
        out[labels] = {
            "layers": mine[0]["layers"], "widths": mine[0]["widths"],
            "id_init": np.mean([m["id_init"] for m in mine], axis=0).tolist(),
            "id_trained": np.mean([m["id_trained"] for m in mine], axis=0).tolist(),
            "last_hidden_id_init": _mean([m["last_hidden_id_init"] for m in mine]),
            "last_hidden_id": _mean([m["last_hidden_id"] for m in mine]),
            "final_train_acc": _mean([m["final_train_acc"] for m in mine]),
            "final_test_acc": _mean([m["final_test_acc"] for m in mine]),
            "label_sharpness": mine[0]["label_sharpness"],
            "n_seeds": len(mine),
        }
    if runs:
        out["d_data"] = next(iter(runs.values()))["d_data"]
    return out


def median_d_int90(values: Sequence[int | None]) -> float | int | None:
    """The median over seeds of d_int90, a seed that never reached the target counting as
    +inf (None when the median is)."""
    if not values:
        return None
    median = float(np.median([math.inf if v is None else v for v in values]))
    if math.isinf(median):
        return None
    return int(median) if median.is_integer() else median


def _summarize_subspace(metrics: Mapping[str, Mapping[str, Any]],
                        threshold: float) -> dict[int, dict[str, Any]]:
    groups: dict[int, list[Mapping[str, Any]]] = {}
    for m in _by_kind(metrics, "subspace").values():
        groups.setdefault(int(m["width"]), []).append(m)
    out = {}
    for width, runs in sorted(groups.items()):
        dims = sorted(set.intersection(*(set(map(int, m["test_acc_by_d"])) for m in runs)))
        accuracy = {d: float(np.mean([m["test_acc_by_d"][str(d)] for m in runs])) for d in dims}
        full = float(np.mean([m["full_test_acc"] for m in runs]))
        # d_int90 per seed (its own curve against its own full model), then the median: with
        # stop_at_target the seeds' sweeps end at different d, so a mean curve could be short
        by_seed = [m["d_int90"] for m in runs]
        out[width] = {"n_parameters": runs[0]["n_parameters"], "full_test_acc": full,
                      "target": threshold * full, "test_acc_by_d": accuracy,
                      "d_int90": median_d_int90(by_seed), "d_int90_by_seed": by_seed,
                      "max_d": max((max(map(int, m["test_acc_by_d"]), default=0) for m in runs),
                                   default=None),
                      "n_seeds": len(runs)}
    return out


def _summarize_scaling(metrics: Mapping[str, Mapping[str, Any]],
                       n_test: int) -> dict[str, Any]:
    groups: dict[int, list[Mapping[str, Any]]] = {}
    for m in _by_kind(metrics, "scaling").values():
        groups.setdefault(int(m["d_data_true"]), []).append(m)
    mean_err, exponents, estimates, sharpness = {}, {}, {}, {}
    floor = 0.5 / n_test
    for d, runs in sorted(groups.items()):
        sizes = sorted(set.intersection(*(set(map(int, m["test_err_by_n"])) for m in runs)))
        mean_err[d] = {n: float(np.mean([m["test_err_by_n"][str(n)] for m in runs]))
                       for n in sizes}
        exponents[d] = {"fitted": power_law_exponent(sizes, list(mean_err[d].values()), floor),
                        "law": -1.0 / d}
        estimates[d] = {"twonn": _mean([m["d_data"]["twonn"] for m in runs]),
                        "mle": _mean([m["d_data"]["mle"] for m in runs])}
        sharpness[d] = _mean([m["label_sharpness"]["value"] for m in runs])
    return {"mean_test_err": mean_err, "exponents": exponents, "error_floor": floor,
            "d_data_estimates": estimates, "label_sharpness": sharpness,
            "n_seeds": {d: len(runs) for d, runs in sorted(groups.items())}}


def summary_table(metrics: Mapping[str, Mapping[str, Any]],
                  histories: Mapping[str, pa.Table]) -> pa.Table:
    """Every run's history in one long table, with ``run``, ``kind``, ``seed`` and the run's
    own setting (``embedding``, ``labels``, ``width`` or ``d_data_true``) on each row."""
    own = {"estimate": "embedding", "layers": "labels", "subspace": "width",
           "scaling": "d_data_true"}
    tables = []
    for kind, column in own.items():
        runs = [name for name, m in metrics.items() if m["kind"] == kind and name in histories]
        if runs:
            tables.append(stack_histories({r: histories[r] for r in runs}, metrics,
                                          ("kind", "seed", column)))
    if not tables:
        return pa.table({"run": pa.array([], pa.string())})
    return pa.concat_tables(tables, promote_options="default")


def summarize(config: IntrinsicDimConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    estimates = _summarize_estimates(metrics, histories)
    layers = _summarize_layers(metrics)
    subspace = _summarize_subspace(metrics, config.subspace.threshold)
    scaling = _summarize_scaling(metrics, config.scaling.n_test)
    claims = [
        check_estimator("twonn", estimates.get("twonn", {})),
        check_estimator("mle", estimates.get("mle", {})),
        check_layers(layers.get("clean", {}).get("last_hidden_id_init"),
                     layers.get("clean", {}).get("last_hidden_id"),
                     layers.get("random", {}).get("last_hidden_id")),
        check_subspace(subspace),
        check_scaling(scaling["mean_test_err"]),
    ]
    data = {"study": NAME,
            "data": {"true_intrinsic_dim": config.data.intrinsic_dim,
                     "ambient_dim": config.data.ambient_dim,
                     "d_data": layers.get("d_data"),
                     "label_sharpness": layers.get("clean", {}).get("label_sharpness")},
            "estimators": estimates, "mle_k": config.estimators.mle_k,
            "layers": {k: v for k, v in layers.items() if k != "d_data"},
            "subspace": subspace, "threshold": config.subspace.threshold,
            "scaling": scaling,
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(claims), table=summary_table(metrics, histories))


# ---------------------------------------------------------------------------------------------
# Figures (the data arrive as the report reads summary.json back: every key is text).
# ---------------------------------------------------------------------------------------------


def _numeric_keys(mapping: Mapping[Any, Any]) -> list[tuple[float, Any]]:
    return sorted((float(k), v) for k, v in mapping.items())


def _figure_estimators(data: Mapping[str, Any]) -> tuple[str, Figure] | None:
    import matplotlib.pyplot as plt

    estimates = data.get("estimators") or {}
    if not estimates:
        return None
    embeddings = sorted({e for by_emb in estimates.values() for e in by_emb})
    fig, axes = plt.subplots(1, len(embeddings), figsize=(4.6 * len(embeddings), 3.8),
                             squeeze=False)
    labels = {"twonn": "TwoNN", "mle": "MLE (k - 1, inverse average)",
              "mle_mean": "MLE (k - 2, mean)", "mle_pope": "MLE (Pope et al.'s k - 2)"}
    for ax, embedding in zip(axes[0], embeddings, strict=True):
        dims = sorted({d for by_emb in estimates.values()
                       for d, _ in _numeric_keys(by_emb.get(embedding, {}))})
        ax.plot(dims, dims, color="grey", linestyle=":", label="truth")
        windows = [(d, w) for d in dims if (w := estimate_window(int(d))) is not None]
        ax.vlines([d for d, _ in windows], [w[0] for _, w in windows],
                  [w[1] for _, w in windows], color="grey", linewidth=6, alpha=0.3,
                  label="claimed window")
        for name in sorted(estimates):
            series = _numeric_keys(estimates[name].get(embedding, {}))
            ax.plot([d for d, _ in series], [v for _, v in series], "o-", markersize=4,
                    label=labels.get(name, name))
        ax.set_title(f"{embedding} embedding")
        ax.set_xlabel("true intrinsic dimension d")
        ax.set_ylabel("estimate (seed mean)")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    caption = (f"Estimated vs true intrinsic dimension (MLE k = {data.get('mle_k')}); the grey "
               "bars are the claimed windows (±10% for d ≤ 10, [0.7d, 1.05d] at d = 20).")
    return caption, fig


def _figure_layers(data: Mapping[str, Any]) -> tuple[str, Figure] | None:
    import matplotlib.pyplot as plt

    layers = data.get("layers") or {}
    if not layers:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    reference = layers.get("clean") or layers.get("random")
    ax.plot(reference["id_init"], "o--", color="grey", label="untrained (init)")
    for labels, colour, text in (("clean", "tab:blue", "true labels"),
                                 ("random", "tab:red", "random labels")):
        if labels in layers:
            ax.plot(layers[labels]["id_trained"], "o-", color=colour, label=f"trained, {text}")
    names = [f"{n}\n({w})" for n, w in zip(reference["layers"], reference["widths"], strict=True)]
    ax.set_xticks(range(len(names)), names, fontsize=7)
    true_dim = (data.get("data") or {}).get("true_intrinsic_dim")
    if true_dim is not None:
        ax.axhline(true_dim, color="black", linestyle=":", linewidth=0.8,
                   label=f"latent dimension ({true_dim})")
    ax.set_ylabel("TwoNN intrinsic dimension (test inputs)")
    ax.set_xlabel("layer (width)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return ("Intrinsic dimension of the representations vs depth (seed means): untrained, "
            "trained on true labels, trained on random labels."), fig


def _figure_subspace(data: Mapping[str, Any]) -> tuple[str, Figure] | None:
    import matplotlib.pyplot as plt

    subspace = data.get("subspace") or {}
    if not subspace:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    colours = plt.get_cmap("tab10")
    widths = _numeric_keys(subspace)
    parts = []
    for i, (width, entry) in enumerate(widths):
        colour = colours(i % 10)
        series = _numeric_keys(entry["test_acc_by_d"])
        ax.plot([d for d, _ in series], [a for _, a in series], "o-", color=colour,
                label=f"width {width:g} (D = {entry['n_parameters']:,})")
        ax.axhline(entry["target"], color=colour, linestyle=":", linewidth=0.8)
        parts.append(f"width {width:g}: {entry['d_int90']}")
    ax.set_xscale("log")
    ax.set_xlabel("subspace dimension d")
    ax.set_ylabel("test accuracy (seed mean)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return (f"Test accuracy of training in a random d-dimensional subspace; dotted: "
            f"{data.get('threshold')} × the full model's. d_int90 by width: "
            f"{', '.join(parts)}."), fig


def _figure_scaling(data: Mapping[str, Any]) -> tuple[str, Figure] | None:
    import matplotlib.pyplot as plt

    scaling = data.get("scaling") or {}
    mean_err = scaling.get("mean_test_err") or {}
    if not mean_err:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    floor = scaling["error_floor"]
    cmap = plt.get_cmap("plasma")
    dims = _numeric_keys(mean_err)
    exponents = dict(_numeric_keys(scaling["exponents"]))
    for i, (d, by_n) in enumerate(dims):
        series = _numeric_keys(by_n)
        exponent = exponents[d]["fitted"]
        label = f"d_data = {d:g}" + (f" (slope {exponent:.2f}, law {-1 / d:.2f})"
                                      if exponent is not None else "")
        ax.plot([n for n, _ in series], [max(e, floor) for _, e in series], "o-",
                color=cmap(i / max(1, len(dims))), label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training-set size N")
    ax.set_ylabel("test error (seed mean)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return ("Test error vs training-set size per intrinsic dimension of the data, with the "
            f"fitted log-log slope beside the law's -1/d_data (errors floored at {floor:g} for "
            "the log)."), fig


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    made = [_figure_estimators(data), _figure_layers(data), _figure_subspace(data),
            _figure_scaling(data)]
    return [f for f in made if f is not None]

SPEC = StudySpec(
    entry=STUDY,
    synthesize=synthesize,
    train_run=train_run,
    summarize=summarize,
    figures=figures,
)
