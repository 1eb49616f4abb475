"""The random-labels study's summary and claim checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide, decide_units, declare
from genlab.studies.random_labels.settings import (
    CITATION,
    NAME,
    RandomLabelsClaims,
    RandomLabelsConfig,
)

CLAIMS = declare(NAME, CITATION, {
    "fits_every_p": ("Networks fit any fraction of random labels to 100% training accuracy",
                     "train accuracy reaches 1.0 at every corruption level p, in every run"),
    "test_acc_decreases": ("Test accuracy falls as the fraction of random labels rises",
                           "per seed, the smallest drop of test accuracy between adjacent "
                           "levels of p; the mean over seeds judged by the rule"),
    "chance_at_p1": ("With fully random labels, test accuracy is at chance",
                     "at p = 1, |mean test accuracy - 1/C| <= 0.03"),
    "fit_slowdown": ("Fitting random labels is slower only by a small constant factor",
                     "per seed, fit_step(p=1) / fit_step(p=0); the mean over seeds judged by "
                     "the rule"),
}, controls=("fits_every_p", "chance_at_p1"))
# controls: with ~280k parameters for 1,000 points fitting cannot fail at this size, and labels
# that carry no information put any classifier at chance


def _by_p(metrics: Mapping[str, Mapping[str, Any]]) -> dict[float, list[Mapping[str, Any]]]:
    groups: dict[float, list[Mapping[str, Any]]] = {}
    for m in metrics.values():
        groups.setdefault(float(m["label_noise"]), []).append(m)
    return dict(sorted(groups.items()))


def _by_seed(metrics: Mapping[str, Mapping[str, Any]]) -> dict[int, dict[float, Mapping]]:
    """seed -> p -> the run's metrics: a seed is one unit (its own data draw, every p on it)."""
    seeds: dict[int, dict[float, Mapping[str, Any]]] = {}
    for m in metrics.values():
        seeds.setdefault(int(m["seed"]), {})[float(m["label_noise"])] = m
    return dict(sorted(seeds.items()))


def _ok(m: Mapping[str, Any] | None) -> bool:
    return m is not None and m["status"] != "diverged"


def smallest_drop(by_p: Mapping[float, Mapping[str, Any]]) -> float | None:
    """One seed's smallest decrease of test accuracy between adjacent levels of p (negative
    where accuracy rose); None without two levels that trained."""
    acc = [by_p[p]["final_test_acc"] for p in sorted(by_p) if _ok(by_p[p])]
    if len(acc) < 2 or len(acc) != len(by_p):
        return None
    return float(min(a - b for a, b in zip(acc[:-1], acc[1:], strict=True)))


def fit_ratio(by_p: Mapping[float, Mapping[str, Any]]) -> float | None:
    """One seed's fit_step(p = 1) / fit_step(p = 0); None unless both runs fitted."""
    clean, noise = by_p.get(0.0), by_p.get(1.0)
    if not (_ok(clean) and _ok(noise)) or clean["fit_step"] is None or noise["fit_step"] is None:
        return None
    return float(noise["fit_step"]) / float(clean["fit_step"])


def check_claims(per_p: Mapping[float, Mapping[str, Any]],
                 per_seed: Mapping[int, Mapping[float, Mapping[str, Any]]], n_classes: int,
                 rules: RandomLabelsClaims) -> list[ClaimResult]:
    """Decide each claim: the controls from per-p aggregates (means over the seeds that did not
    diverge), the literature claims by their per-seed statistics' intervals."""
    claims: list[ClaimResult] = []
    ps = sorted(per_p)
    min_train = {p: per_p[p]["min_train_acc"] for p in ps}
    diverged = {p: per_p[p]["n_diverged"] for p in ps}
    claims.append(decide(
        CLAIMS["fits_every_p"],
        all(v is not None and v >= 1.0 for v in min_train.values())
        and not any(diverged.values()),
        {"min_train_acc_by_p": min_train, "n_diverged_by_p": diverged}))

    test = {p: per_p[p]["mean_test_acc"] for p in ps}
    if len(ps) < 2:
        claims.append(decide(CLAIMS["test_acc_decreases"], None, {"mean_test_acc_by_p": test},
                             reason="needs >= 2 levels of p"))
    else:
        claims.append(decide_units(
            CLAIMS["test_acc_decreases"], rules.test_acc_decreases,
            {seed: smallest_drop(by_p) for seed, by_p in per_seed.items()},
            {"mean_test_acc_by_p": test}))

    chance = 1.0 / n_classes
    if 1.0 not in per_p or test.get(1.0) is None:
        claims.append(decide(CLAIMS["chance_at_p1"], None, {}, reason="no run at p = 1"))
    else:
        gap = abs(test[1.0] - chance)
        claims.append(decide(CLAIMS["chance_at_p1"], gap <= 0.03,
                             {"test_acc_p1": test[1.0], "chance": chance, "abs_gap": gap}))

    fit = {p: per_p[p]["mean_fit_step"] for p in ps}
    if 0.0 not in per_p or 1.0 not in per_p:
        claims.append(decide(CLAIMS["fit_slowdown"], None, {"mean_fit_step_by_p": fit},
                             reason="needs runs at p = 0 and p = 1"))
    else:
        claims.append(decide_units(
            CLAIMS["fit_slowdown"], rules.fit_slowdown,
            {seed: fit_ratio(by_p) for seed, by_p in per_seed.items()},
            {"mean_fit_step_by_p": fit}))
    return claims


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def summarize(config: RandomLabelsConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    per_p: dict[float, dict[str, Any]] = {}
    for p, runs in _by_p(metrics).items():
        ok = [m for m in runs if m["status"] != "diverged"]
        fitted = [m for m in ok if m["fit_step"] is not None]
        per_p[p] = {
            "n_runs": len(runs), "n_diverged": len(runs) - len(ok), "n_fitted": len(fitted),
            "mean_test_acc": _mean([m["final_test_acc"] for m in ok]),
            "min_train_acc": min((m["final_train_acc"] for m in ok), default=None),
            # fit_step averages only over fitted runs; n_fitted says how many that is
            "mean_fit_step": _mean([m["fit_step"] for m in fitted]),
        }
    claims = check_claims(per_p, _by_seed(metrics), config.data.n_classes, config.claims)
    table = stack_histories(histories, metrics, ("label_noise", "seed"))
    data = {"study": NAME, "n_classes": config.data.n_classes,
            "per_label_noise": {str(p): v for p, v in per_p.items()},
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(claims), table=table)
