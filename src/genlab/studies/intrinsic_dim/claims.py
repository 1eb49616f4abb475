"""The intrinsic-dimension study's summary: its aggregates and the claims checked on them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide, declare
from genlab.studies.intrinsic_dim.settings import NAME, IntrinsicDimConfig

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

CLAIMS = declare(NAME, CITATIONS, {
    "twonn": ("TwoNN recovers the intrinsic dimension of synthetic manifolds",
              "seed-mean TwoNN estimate within ±10% of d for every d ≤ 10, and within "
              "[0.7d, 1.05d] for d = 20, on every embedding"),
    "mle": ("The MLE (MacKay-Ghahramani average) recovers the intrinsic dimension of synthetic "
            "manifolds",
            "seed-mean MLE (k neighbours, divisor k - 1, inverse average) within ±10% of d for "
            "every d ≤ 10, and within [0.7d, 1.05d] for d = 20, on every embedding"),
    "layers": ("A network trained on true labels compresses its last hidden layer: its ID falls "
               "below the ID at initialisation and below that of a random-label network",
               "seed-mean TwoNN ID of the last hidden layer (test inputs): trained on true "
               "labels < the same model at init, and < trained on random labels"),
    "subspace": ("d_int90 is roughly width-invariant",
                 "d_int90(widest) / d_int90(narrowest) ≤ 2.5 (each the median over seeds) "
                 "while their parameter counts differ by ≥ 5x"),
    "scaling": ("Test error at a fixed training-set size rises with the data's intrinsic "
                "dimension",
                "at every training-set size N, seed-mean test error strictly increases with "
                "d_data"),
})


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
        return decide(CLAIMS[key], None, {}, reason="no estimate at a claimed d (≤ 10 or 20)")
    return decide(CLAIMS[key], [c["ok"] for c in checked.values()],
                  {"checked": checked,
                   "failed": sorted(name for name, c in checked.items() if not c["ok"])})


def check_layers(init: float | None, true: float | None, random: float | None) -> ClaimResult:
    """Seed-mean last-hidden-layer IDs: at init, trained on true labels, on random labels."""
    numbers = {"last_hidden_id_init": init, "last_hidden_id_true": true,
               "last_hidden_id_random": random}
    if init is None or true is None or random is None:
        return decide(CLAIMS["layers"], None, numbers,
                      reason="needs layers runs with true and random labels")
    return decide(CLAIMS["layers"], true < init and true < random,
                  {**numbers, "true_over_init": true / init, "true_over_random": true / random})


def check_subspace(per_width: Mapping[int, Mapping[str, Any]]) -> ClaimResult:
    """``per_width``: width -> {"n_parameters", "d_int90" (None: not reached), "max_d"}."""
    widths = sorted(per_width)
    numbers: dict[str, Any] = {"d_int90_by_width": {w: per_width[w]["d_int90"] for w in widths},
                               "n_parameters_by_width": {w: per_width[w]["n_parameters"]
                                                         for w in widths}}
    if len(widths) < 2:
        return decide(CLAIMS["subspace"], None, numbers, reason="needs two widths")
    narrow, wide = per_width[widths[0]], per_width[widths[-1]]
    param_ratio = wide["n_parameters"] / narrow["n_parameters"]
    numbers["param_ratio"] = param_ratio
    if param_ratio < 5:
        return decide(CLAIMS["subspace"], None, numbers,
                      reason="the widths' parameter counts differ by < 5x")
    missing = [w for w in (widths[0], widths[-1]) if per_width[w]["d_int90"] is None]
    if missing:
        top = max(per_width[w]["max_d"] or 0 for w in missing)
        return decide(CLAIMS["subspace"], False, numbers,
                      reason=f"no d in the sweep (up to {top}) reached the target at width "
                             f"{missing}")
    ratio = max(wide["d_int90"], narrow["d_int90"]) / min(wide["d_int90"], narrow["d_int90"])
    numbers["d_int90_ratio"] = ratio
    return decide(CLAIMS["subspace"], ratio <= 2.5, numbers)


def check_scaling(mean_err: Mapping[int, Mapping[int, float]]) -> ClaimResult:
    """``mean_err``: d_data -> N -> seed-mean test error."""
    dims = sorted(mean_err)
    sizes = sorted(set.intersection(*(set(mean_err[d]) for d in dims))) if dims else []
    numbers: dict[str, Any] = {"test_err": {d: {n: mean_err[d][n] for n in sizes} for d in dims}}
    if len(dims) < 2 or not sizes:
        return decide(CLAIMS["scaling"], None, numbers,
                      reason="needs ≥ 2 values of d_data at a common N")
    failing = [n for n in sizes
               if not all(mean_err[a][n] < mean_err[b][n]
                          for a, b in zip(dims[:-1], dims[1:], strict=True))]
    numbers["sizes_not_increasing"] = failing
    return decide(CLAIMS["scaling"], not failing, numbers)


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
