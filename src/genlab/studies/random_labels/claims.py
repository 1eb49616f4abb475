"""The random-labels study's summary and claim checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide, declare
from genlab.studies.random_labels.settings import CITATION, NAME, RandomLabelsConfig

CLAIMS = declare(NAME, CITATION, {
    "fits_every_p": ("Networks fit any fraction of random labels to 100% training accuracy",
                     "train accuracy reaches 1.0 at every corruption level p"),
    "test_acc_decreases": ("Test accuracy falls as the fraction of random labels rises",
                           "mean test accuracy strictly decreases as p increases"),
    "chance_at_p1": ("With fully random labels, test accuracy is at chance",
                     "at p = 1, |test accuracy - 1/C| <= 0.03"),
    "fit_slowdown": ("Fitting random labels is slower only by a small constant factor",
                     "fit_step(p=1) / fit_step(p=0) is in [1, 10]"),
}, controls=("fits_every_p", "chance_at_p1"))
# controls: with ~280k parameters for 1,000 points fitting cannot fail at this size, and labels
# that carry no information put any classifier at chance


def _by_p(metrics: Mapping[str, Mapping[str, Any]]) -> dict[float, list[Mapping[str, Any]]]:
    groups: dict[float, list[Mapping[str, Any]]] = {}
    for m in metrics.values():
        groups.setdefault(float(m["label_noise"]), []).append(m)
    return dict(sorted(groups.items()))


def check_claims(per_p: Mapping[float, Mapping[str, Any]], n_classes: int) -> list[ClaimResult]:
    """Decide each claim from per-p aggregates (means over the seeds that did not diverge)."""
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
    if len(ps) < 2 or any(v is None for v in test.values()):
        claims.append(decide(CLAIMS["test_acc_decreases"], None, {"mean_test_acc_by_p": test},
                             reason="needs >= 2 levels of p"))
    else:
        decreasing = all(test[a] > test[b] for a, b in zip(ps[:-1], ps[1:], strict=True))
        claims.append(decide(CLAIMS["test_acc_decreases"], decreasing,
                             {"mean_test_acc_by_p": test}))

    chance = 1.0 / n_classes
    if 1.0 not in per_p or test.get(1.0) is None:
        claims.append(decide(CLAIMS["chance_at_p1"], None, {}, reason="no run at p = 1"))
    else:
        gap = abs(test[1.0] - chance)
        claims.append(decide(CLAIMS["chance_at_p1"], gap <= 0.03,
                             {"test_acc_p1": test[1.0], "chance": chance, "abs_gap": gap}))

    fit = {p: per_p[p]["mean_fit_step"] for p in ps}
    if fit.get(0.0) is None or fit.get(1.0) is None:
        claims.append(decide(CLAIMS["fit_slowdown"], None, {"mean_fit_step_by_p": fit},
                             reason="needs fitted runs at p = 0 and p = 1"))
    else:
        ratio = fit[1.0] / fit[0.0]
        claims.append(decide(CLAIMS["fit_slowdown"], 1.0 <= ratio <= 10.0,
                             {"mean_fit_step_by_p": fit, "ratio": ratio}))
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
    claims = check_claims(per_p, config.data.n_classes)
    table = stack_histories(histories, metrics, ("label_noise", "seed"))
    data = {"study": NAME, "n_classes": config.data.n_classes,
            "per_label_noise": {str(p): v for p, v in per_p.items()},
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(claims), table=table)
