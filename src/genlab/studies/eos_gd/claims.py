"""The edge-of-stability study's summary and claim checks."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide_units, declare
from genlab.studies.eos_gd.settings import CITATION, NAME, EoSClaims, EoSConfig

# Each step size η is a condition (chosen where the edge of stability shows at this scale):
# every claim is judged at each η apart, by its per-seed statistic's interval over the seeds.
CLAIMS = declare(NAME, CITATION, {
    "sharpening": ("Progressive sharpening: λ_max rises during training",
                   "per seed, max tracked λ_max / its value at initialisation"),
    "edge": ("λ_max reaches 2/η and hovers there (the edge of stability)",
             "per seed, the median of λ_max/(2/η) after λ_max first crosses 0.9·(2/η) (a run "
             "that never crosses counts with its final λ_max/(2/η))"),
    "edge_bounded": ("λ_max does not run far above 2/η once there",
                     "per seed, the max of λ_max/(2/η) after the crossing"),
    "loss": ("Training still makes progress at the edge of stability",
             "per seed, log(final train loss / train loss at the crossing)"),
})


def _seed_statistics(m: Mapping[str, Any]) -> dict[str, float | None]:
    """One run's statistic for each claim; None for a diverged run, and for the after-crossing
    statistics of a run that never crossed (its edge statistic is its final λ_max/(2/η))."""
    if m["status"] == "diverged":
        return dict.fromkeys(CLAIMS)
    crossed = m["crossing_step"] is not None
    loss = (math.log(m["final_train_loss"] / m["loss_at_crossing"])
            if crossed and m["final_train_loss"] > 0 and m["loss_at_crossing"] > 0 else None)
    return {"sharpening": m["sharpening"],
            "edge": m["ratio_median_after"] if crossed else m["lambda_final"] / m["two_over_lr"],
            "edge_bounded": m["ratio_max_after"] if crossed else None,
            "loss": loss}


def check_claims(metrics: Mapping[str, Mapping[str, Any]],
                 rules: EoSClaims) -> list[ClaimResult]:
    by_lr: dict[float, dict[int, Mapping[str, Any]]] = {}
    for m in metrics.values():
        by_lr.setdefault(float(m["lr"]), {})[int(m["seed"])] = m
    claims = []
    for key in CLAIMS:
        for lr, seeds in sorted(by_lr.items()):
            stats = {seed: _seed_statistics(m)[key] for seed, m in sorted(seeds.items())}
            numbers = {"two_over_lr": 2 / lr,
                       "diverged_seeds": [s for s, m in sorted(seeds.items())
                                          if m["status"] == "diverged"],
                       "uncrossed_seeds": [s for s, m in sorted(seeds.items())
                                           if m["status"] != "diverged"
                                           and m["crossing_step"] is None]}
            claims.append(decide_units(CLAIMS[key], getattr(rules, key), stats, numbers,
                                       condition=f"lr={lr:g}"))
    return claims


def summarize(config: EoSConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    data = {"study": NAME, "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(check_claims(metrics, config.claims)),
                   table=stack_histories(histories, metrics, ("lr",)))
