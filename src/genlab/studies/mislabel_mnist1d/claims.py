"""The mislabel_mnist1d study's summary and claims: each ranking's AUC for the flips, per model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary
from genlab.studies.claims import decide, decide_units, declare
from genlab.studies.mislabel_detection.claims import (
    auc_of,
    detection_table,
    random_ranking_control,
)
from genlab.studies.mislabel_mnist1d.settings import (
    CITATION,
    NAME,
    MislabelMNIST1DClaims,
    MislabelMNIST1DConfig,
)

MODELS = ("logistic", "mlp")
DATASET = "mnist1d"

CLAIMS = declare(NAME, CITATION, {
    "self_influence_logistic": (
        "Self-influence ranks mislabelled training points first, for logistic regression on a "
        "ten-class real dataset",
        "multinomial logistic regression on MNIST-1D: per seed (its own draw and flips), ROC "
        "AUC of the exact self-influence ranking for the flipped labels"),
    "self_influence_mlp": (
        "Self-influence ranks mislabelled training points first, for a network fitted to them",
        "tanh MLP on MNIST-1D, weakly regularised so that it fits nearly every flipped label: per "
        "seed, ROC AUC of the exact (GGN) self-influence ranking (the fraction of the flips each "
        "MLP fits is reported beside)"),
    "beats_loss": (
        "Self-influence finds the flipped labels better than the training loss does",
        "per seed, ROC AUC of exact self-influence minus that of the training-loss ranking, "
        "per model"),
    "random": (
        "A random ranking finds the flipped labels at chance",
        "ROC AUC of the random ranking within 0.5 ± 0.1 (mean over runs)"),
}, controls=("random",))


def check_claims(metrics: Mapping[str, Mapping[str, Any]],
                 rules: MislabelMNIST1DClaims) -> list[ClaimResult]:
    done = {name: m for name, m in sorted(metrics.items()) if "methods" in m}
    skipped = sorted(name for name in metrics if name not in done)
    out = []
    gaps = []
    for model in MODELS:
        runs = {name: m for name, m in done.items() if m["model"] == model}
        units = {int(m["seed"]): auc_of(m, "exact") for m in runs.values()}
        numbers: dict[str, Any] = {
            "dataset": DATASET, "skipped": skipped,
            "flips_fitted_by_run": {name: m["train_acc_flipped"] for name, m in runs.items()},
            **{f"auc_{method}_by_run": {name: auc_of(m, method) for name, m in runs.items()}
               for method in ("loss", "ekfac", "grad_dot")}}
        if runs:
            out.append(decide_units(CLAIMS[f"self_influence_{model}"],
                                    getattr(rules, f"self_influence_{model}"), units, numbers,
                                    condition=DATASET))
            gaps.append((model, {int(m["seed"]): auc_of(m, "exact") - auc_of(m, "loss")
                                 for m in runs.values()}, numbers))
        else:
            out.append(decide(CLAIMS[f"self_influence_{model}"], None, numbers,
                              condition=DATASET, reason=f"no trained {model} run"))
    for model, gap, numbers in gaps:
        out.append(decide_units(CLAIMS["beats_loss"], rules.beats_loss, gap, numbers,
                                condition=f"{DATASET} {model}"))
    out.append(random_ranking_control(CLAIMS["random"], done, skipped))
    return out


def summarize(config: MislabelMNIST1DConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    data = {"study": NAME, "dataset": DATASET, "flip_fraction": config.flip_fraction,
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(check_claims(metrics, config.claims)),
                   table=detection_table(metrics))
