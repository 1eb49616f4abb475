"""The intrinsic-dimension study's summary: its aggregates and the claims checked on them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide, decide_units, declare
from genlab.studies.intrinsic_dim.settings import NAME, IntrinsicDimClaims, IntrinsicDimConfig

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

CITATIONS["hunchback"] = CITATIONS["layers"]

# Every claim is judged over seeds: each seed's estimate runs draw their own points, its layers
# runs their own manifold and teacher, its subspace and scaling runs their own tasks.
CLAIMS = declare(NAME, CITATIONS, {
    "twonn": ("TwoNN recovers the intrinsic dimension of synthetic manifolds",
              "per seed, the largest miss of the window (±10% of d for d ≤ 10, [0.7d, 1.05d] "
              "at d = 20) over every d and embedding, in units of d (≤ 0 inside every window)"),
    "mle": ("The MLE (MacKay-Ghahramani average) recovers the intrinsic dimension of synthetic "
            "manifolds",
            "per seed, the largest miss of the window over every d and embedding, in units of "
            "d (MLE: k neighbours, divisor k - 1, inverse average)"),
    "layers": ("A network trained on true labels compresses its last hidden layer: its ID falls "
               "below the ID at initialisation and below that of a random-label network",
               "per seed, the smaller of ID(init) − ID(true labels) and ID(random labels) − "
               "ID(true labels), TwoNN on the last hidden layer (test inputs)"),
    "hunchback": ("The ID of the representations first rises over the early layers, then falls "
                  "(the hunchback)",
                  "per seed, on the true-label net: the largest ID of the hidden layers before "
                  "the last, minus the larger of the input's ID and the last hidden layer's"),
    "subspace": ("d_int90 is roughly width-invariant",
                 "per seed, the larger over the smaller d_int90 of the narrowest and the widest "
                 "net (their parameter counts differ by ≥ 5x)"),
    "scaling": ("Test error at a fixed training-set size rises with the data's intrinsic "
                "dimension",
                "per seed, the smallest rise of test error between adjacent d_data, over every "
                "training-set size N"),
})


def estimate_window(d: int) -> tuple[float, float] | None:
    """The accepted range of an estimate of d: ±10% for d ≤ 10, [0.7d, 1.05d] for d = 20,
    nothing claimed at other d."""
    if d <= 10:
        return 0.9 * d, 1.1 * d
    if d == 20:
        return 0.7 * d, 1.05 * d
    return None


def window_miss(estimates: Mapping[str, Mapping[int, float]]) -> float | None:
    """One seed's largest miss of the estimate windows (embedding -> d -> estimate), in units
    of d: negative when every estimate is inside its window; None when no d is claimed."""
    misses = []
    for by_d in estimates.values():
        for d, value in by_d.items():
            window = estimate_window(int(d))
            if window is not None:
                misses.append(max(window[0] - value, value - window[1]) / int(d))
    return max(misses) if misses else None


def layer_drop(init: float | None, true: float | None, random: float | None) -> float | None:
    """One seed's smaller drop of the last hidden layer's ID, true labels vs init and vs random
    labels (None without all three)."""
    if init is None or true is None or random is None:
        return None
    return min(init - true, random - true)


def hunchback(ids: Sequence[float]) -> float | None:
    """One profile (input, hidden layers..., output): the largest ID of the hidden layers
    before the last minus the larger of the input's ID and the last hidden layer's; None with
    fewer than two hidden layers."""
    hidden = list(ids[1:-1])
    if len(hidden) < 2:
        return None
    return max(hidden[:-1]) - max(ids[0], hidden[-1])


def d_int90_ratio(narrow: int | None, wide: int | None) -> float | None:
    """The larger over the smaller d_int90 of two widths (None if either never reached it)."""
    if narrow is None or wide is None:
        return None
    return max(narrow, wide) / min(narrow, wide)


def smallest_rise(err: Mapping[int, Mapping[int, float]]) -> float | None:
    """One seed's smallest rise of test error between adjacent d_data, over every common N
    (d_data -> N -> error); None with fewer than two d_data at a common N."""
    dims = sorted(err)
    sizes = sorted(set.intersection(*(set(err[d]) for d in dims))) if dims else []
    if len(dims) < 2 or not sizes:
        return None
    return min(err[b][n] - err[a][n] for n in sizes
               for a, b in zip(dims[:-1], dims[1:], strict=True))


def _seeds(metrics: Mapping[str, Mapping[str, Any]], kind: str) -> dict[int, list[Mapping]]:
    out: dict[int, list[Mapping[str, Any]]] = {}
    for m in _by_kind(metrics, kind).values():
        out.setdefault(int(m["seed"]), []).append(m)
    return dict(sorted(out.items()))


def check_claims(metrics: Mapping[str, Mapping[str, Any]], histories: Mapping[str, pa.Table],
                 rules: IntrinsicDimClaims) -> list[ClaimResult]:
    claims = []
    per_seed: dict[str, dict[int, dict[str, dict[int, float]]]] = {"twonn": {}, "mle": {}}
    for name, m in _by_kind(metrics, "estimate").items():
        for row in histories[name].to_pylist():
            if row["estimator"] in per_seed:
                per_seed[row["estimator"]].setdefault(int(m["seed"]), {}).setdefault(
                    m["embedding"], {})[int(row["d"])] = row["estimate"]
    for key in ("twonn", "mle"):
        claims.append(decide_units(CLAIMS[key], getattr(rules, key),
                                   {seed: window_miss(est) for seed, est in
                                    sorted(per_seed[key].items())}, {}))

    drops, humps, profiles = {}, {}, {}
    for seed, runs in _seeds(metrics, "layers").items():
        by_labels = {m["labels"]: m for m in runs}
        clean, random = by_labels.get("clean"), by_labels.get("random")
        drops[seed] = layer_drop(clean and clean["last_hidden_id_init"],
                                 clean and clean["last_hidden_id"],
                                 random and random["last_hidden_id"])
        humps[seed] = hunchback(clean["id_trained"]) if clean else None
        profiles[str(seed)] = clean["id_trained"] if clean else None
    claims.append(decide_units(CLAIMS["layers"], rules.layers, drops, {}))
    claims.append(decide_units(CLAIMS["hunchback"], rules.hunchback, humps,
                               {"id_trained_by_seed": profiles}))

    ratios, unreached, param_ratio = {}, [], None
    for seed, runs in _seeds(metrics, "subspace").items():
        by_width = sorted(runs, key=lambda m: m["width"])
        if len(by_width) < 2:
            ratios[seed] = None
            continue
        narrow, wide = by_width[0], by_width[-1]
        param_ratio = wide["n_parameters"] / narrow["n_parameters"]
        ratios[seed] = d_int90_ratio(narrow["d_int90"], wide["d_int90"])
        if ratios[seed] is None:
            unreached.append(seed)
    numbers = {"param_ratio": param_ratio, "seeds_that_never_reached_the_target": unreached}
    if param_ratio is not None and param_ratio < 5:
        claims.append(decide(CLAIMS["subspace"], None, numbers,
                             reason="the widths' parameter counts differ by < 5x"))
    else:
        claims.append(decide_units(CLAIMS["subspace"], rules.subspace, ratios, numbers))

    rises = {}
    for seed, runs in _seeds(metrics, "scaling").items():
        err = {int(m["d_data_true"]): {int(n): e for n, e in m["test_err_by_n"].items()}
               for m in runs}
        rises[seed] = smallest_rise(err)
    claims.append(decide_units(CLAIMS["scaling"], rules.scaling, rises, {}))
    return claims


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
    claims = check_claims(metrics, histories, config.claims)
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
