"""The deep-double-descent study's summary and claims."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary
from genlab.studies.claims import decide_units, declare
from genlab.studies.deep_double_descent.settings import (
    CITATION,
    NAME,
    DeepDoubleDescentConfig,
    DoubleDescentClaims,
)

MODELS = ("mlp", "cnn")
CLAIMS = declare(NAME, CITATION, {
    "threshold_peak": ("With label noise, test error rises as the network grows towards the "
                       "width that first fits its training set, above the best narrower "
                       "network's (the peak of deep double descent at the interpolation "
                       "threshold)",
                       "per seed: test error in points at the interpolation threshold (the "
                       "narrowest width whose training error on its noisy labels is at most "
                       "fit_error) minus the narrower width with the lowest test error, that "
                       "width chosen on one half of the test set and measured on the other "
                       "(both ways, averaged)"),
    "second_descent": ("Past the interpolation threshold, test error falls again as the "
                       "network widens (the second descent)",
                       "per seed: test error in points at the interpolation threshold minus "
                       "the widest network's"),
})


def _measured(m: Mapping[str, Any]) -> bool:
    return m["status"] != "diverged" and math.isfinite(m["final_test_err"])


def threshold_width(curve: Mapping[int, Mapping[str, Any]], fit_error: float) -> int | None:
    """The narrowest width whose final training error (on its noisy labels) is at most
    ``fit_error``; None if no width fits."""
    fitted = [w for w, m in curve.items() if m["final_train_err"] <= fit_error]
    return min(fitted) if fitted else None


def cross_fitted_rise(curve: Mapping[int, Mapping[str, Any]], threshold: int) -> float | None:
    """Test error (points) at ``threshold`` minus the best narrower width's: each half of the
    test set picks the narrower width with its lowest error, the other half measures the
    difference, and the two are averaged; None without a narrower width."""
    narrower = [w for w in curve if w < threshold]
    if not narrower:
        return None
    at = curve[threshold]["test_err_halves"]
    rises = []
    for pick, measure in ((0, 1), (1, 0)):
        best = min(narrower, key=lambda w: (curve[w]["test_err_halves"][pick], w))
        rises.append(at[measure] - curve[best]["test_err_halves"][measure])
    return 100.0 * sum(rises) / 2


def seed_statistics(metrics: Mapping[str, Mapping[str, Any]], model: str, fit_error: float
                    ) -> dict[str, dict[int, Any]]:
    """Per seed of ``model``: its threshold width and each claim's statistic (None where the
    seed has a diverged run, no width that fits, or no width on the claim's other side)."""
    curves: dict[int, dict[int, Mapping[str, Any]]] = {}
    for m in metrics.values():
        if m["model"] == model:
            curves.setdefault(int(m["seed"]), {})[int(m["width"])] = m
    out: dict[str, dict[int, Any]] = {"threshold": {}, "threshold_peak": {},
                                      "second_descent": {}}
    for seed, curve in sorted(curves.items()):
        threshold = (threshold_width(curve, fit_error)
                     if all(_measured(m) for m in curve.values()) else None)
        out["threshold"][seed] = threshold
        widest = max(curve)
        out["threshold_peak"][seed] = (None if threshold is None
                                       else cross_fitted_rise(curve, threshold))
        out["second_descent"][seed] = (
            None if threshold is None or threshold == widest
            else 100.0 * (curve[threshold]["final_test_err"] - curve[widest]["final_test_err"]))
    return out


def check_claims(metrics: Mapping[str, Mapping[str, Any]], rules: DoubleDescentClaims,
                 fit_error: float) -> list[ClaimResult]:
    claims = []
    for model in MODELS:
        if not any(m["model"] == model for m in metrics.values()):
            continue
        stats = seed_statistics(metrics, model, fit_error)
        diverged = sorted(name for name, m in metrics.items()
                          if m["model"] == model and not _measured(m))
        numbers = {"threshold_width_by_seed": {str(k): v for k, v in stats["threshold"].items()},
                   "diverged": diverged}
        for key in CLAIMS:
            claims.append(decide_units(CLAIMS[key], getattr(rules, key), stats[key], numbers,
                                       condition=model))
    return claims


def summarize(config: DeepDoubleDescentConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    rows = [{"run": name, "model": m["model"], "width": int(m["width"]), "seed": int(m["seed"]),
             "status": m["status"], "n_parameters": int(m["n_parameters"]),
             "train_err": m["final_train_err"], "test_err": m["final_test_err"],
             "train_err_true_labels": m["final_train_err_true_labels"]}
            for name, m in sorted(metrics.items())]
    claims = check_claims(metrics, config.claims, config.fit_error)
    # each architecture's threshold per seed, as its claims found it (for the figure)
    thresholds = {c.condition: c.numbers["threshold_width_by_seed"] for c in claims}
    data = {"study": NAME, "label_noise": config.label_noise, "fit_error": config.fit_error,
            "thresholds": thresholds, "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    table = pa.Table.from_pylist(rows) if rows else pa.table({"run": pa.array([], pa.string())})
    return Summary(data=data, claims=tuple(claims), table=table)
