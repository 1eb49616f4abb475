"""The influence_mnist1d study's summary and claims: each method's LDS over seeds, per model."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary
from genlab.studies.claims import decide, decide_units, declare
from genlab.studies.influence_mnist1d.experiment import METHODS
from genlab.studies.influence_mnist1d.settings import (
    CITATION,
    NAME,
    AttributionClaims,
    InfluenceMNIST1DConfig,
)
from genlab.studies.intervals import mean_interval

MODELS = ("logistic", "mlp")
DATASET = "mnist1d"
REFERENCE = {
    "source": "dattri's benchmark on MNIST-10 (5,000 training / 500 test images, models trained "
              "by SGD; LDS over 50 half-size subsets): the bars of its README figure "
              "assets/images/benchmark-result-mnist.png, read to ±0.01",
    "lds": {"logistic": {"exact": 0.80, "lissa": 0.79, "grad_dot": 0.33, "trak": 0.42},
            "mlp": {"exact": 0.26, "lissa": 0.14, "grad_dot": 0.10, "trak": 0.11}},
    "note": "exact: dattri's CG (its explicit inverse is 0.80 for LR, none for the MLP); trak: "
            "TRAK-1, one model, as here. A reference point, not a claim: data, training and "
            "sizes differ.",
}

CLAIMS = declare(NAME, CITATION, {
    "logistic_lds": (
        "Influence functions predict retraining of L2 logistic regression on random halves of a "
        "real dataset (LDS)",
        "multinomial logistic regression on MNIST-1D: per seed (its own draw), LDS of exact "
        "influence"),
    "mlp_lds": (
        "For a small MLP on a real dataset, influence functions rank retrainings on random "
        "halves of the data",
        "tanh MLP on MNIST-1D: per seed, LDS of exact GGN influence against the margins "
        "averaged over the retrainings' initialisations"),
    "curvature_helps": (
        "Influence functions, which use the curvature, predict retraining better than gradient "
        "dot products (TracIn at the final checkpoint), which do not",
        "per seed, LDS of exact influence minus LDS of grad-dot, per model"),
    "lds_random": (
        "Random scores do not predict retraining on random halves of the data",
        "|LDS(random)| ≤ 0.1 (mean over every run)"),
}, controls=("lds_random",))


def _lds(runs: Mapping[str, Mapping[str, Any]], method: str) -> dict[int, float | None]:
    """Per seed: ``method``'s LDS."""
    return {int(m["seed"]): m["methods"][method]["lds"] for m in runs.values()}


def method_estimates(done: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """model -> method -> the mean LDS over seeds with its 95% interval and n."""
    out: dict[str, dict[str, Any]] = {}
    for model in MODELS:
        runs = [m for m in done.values() if m["model"] == model]
        for method in METHODS:
            values = [m["methods"][method]["lds"] for m in runs]
            values = [float(v) for v in values if v is not None and math.isfinite(v)]
            if values:
                out.setdefault(model, {})[method] = mean_interval(values).to_json()
    return out


def check_claims(metrics: Mapping[str, Mapping[str, Any]],
                 rules: AttributionClaims) -> list[ClaimResult]:
    """Decide each claim from the runs' metrics (runs whose training did not converge have no
    method metrics and do not count; a claim without runs is not run)."""
    done = {name: m for name, m in sorted(metrics.items()) if "methods" in m}
    skipped = sorted(name for name in metrics if name not in done)
    of = {model: {n: m for n, m in done.items() if m["model"] == model} for model in MODELS}
    numbers = {"dataset": DATASET, "not_converged": skipped}
    out = []
    for key, model in (("logistic_lds", "logistic"), ("mlp_lds", "mlp")):
        if not of[model]:
            out.append(decide(CLAIMS[key], None, numbers, condition=DATASET,
                              reason=f"no trained {model} run"))
            continue
        out.append(decide_units(CLAIMS[key], getattr(rules, key), _lds(of[model], "exact"), {
            **numbers, "reference_lds": REFERENCE["lds"][model]["exact"],
            "by_seed_ekfac": _lds(of[model], "ekfac"), "by_seed_trak": _lds(of[model], "trak"),
            "by_seed_grad_dot": _lds(of[model], "grad_dot")}, condition=DATASET))
    for model in MODELS:
        if not of[model]:
            continue
        exact, dot = _lds(of[model], "exact"), _lds(of[model], "grad_dot")
        gap = {seed: None if exact[seed] is None or dot[seed] is None else exact[seed] - dot[seed]
               for seed in exact}
        out.append(decide_units(CLAIMS["curvature_helps"], rules.curvature_helps, gap,
                                numbers, condition=f"{DATASET} {model}"))
    chance = [m["methods"]["random"]["lds"] for m in done.values()]
    if not chance:
        out.append(decide(CLAIMS["lds_random"], None, numbers, reason="no trained run"))
    else:
        mean = float(np.mean(chance))
        out.append(decide(CLAIMS["lds_random"], abs(mean) <= 0.1,
                          {**numbers, "mean_lds_random": mean,
                           "lds_random_by_run": {n: m["methods"]["random"]["lds"]
                                                 for n, m in done.items()}}))
    return out


def summarize(config: InfluenceMNIST1DConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    schema = pa.schema([("run", pa.string()), ("model", pa.string()), ("seed", pa.int64()),
                        ("method", pa.string()), ("lds", pa.float64()),
                        ("seconds", pa.float64())])
    rows = [{"run": run, "model": m["model"], "seed": int(m["seed"]), "method": method,
             "lds": float(values["lds"]), "seconds": float(m["seconds"][method])}
            for run, m in sorted(metrics.items())
            for method, values in m.get("methods", {}).items()]
    done = {run: m for run, m in sorted(metrics.items()) if "methods" in m}
    data = {"study": NAME, "dataset": DATASET, "reference": REFERENCE,
            "lds_estimates": method_estimates(done),
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(check_claims(metrics, config.claims)),
                   table=pa.Table.from_pylist(rows, schema=schema))
