"""The neural-collapse study's summary and the claims checked on it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide, declare
from genlab.studies.neural_collapse.settings import CITATION, NAME, CollapseConfig

MIN_TPT_POINTS = 5  # tracked steps in the TPT below which a trend is not judged

CLAIMS = declare(NAME, CITATION, {
    "nc1": ("NC1: within-class variability of the last-layer features collapses during the TPT",
            "in every run, Spearman(step, NC1) <= -0.9 over the tracked steps of the terminal "
            "phase (first step at 100% train accuracy to the end)"),
    "nc3": ("NC3: the classifier's rows converge to the centred class means (self-duality)",
            "in every run, Spearman(step, NC3) <= -0.9 over the tracked steps of the terminal "
            "phase"),
    "nc4": ("NC4: the network's decision becomes the nearest-class-centre rule",
            "in every run that reached the terminal phase, final NC4 <= 0.01"),
    "nc2_angle": ("NC2: the centred class means approach a simplex ETF: cosines -> -1/(C-1)",
                  "in every run that reached the terminal phase, the final mean pairwise cosine "
                  "of the centred class means is within 0.02 of -1/(C-1), and the cosines' "
                  "spread (NC2 equiangularity) is lower at the end than at the start of the "
                  "terminal phase"),
}, controls=("nc4",))
# nc4 is a control here: the nearest-class-centre rule agrees with the network from the first
# tracked steps of the terminal phase on (NC4 = 0 with test accuracy 1.0), so it cannot fail
SPEARMAN_MAX = -0.9
NC4_MAX = 0.01
COSINE_TOLERANCE = 0.02


def _label(m: Mapping[str, Any]) -> str:
    return f"seed={m['seed']}"


def _unchecked(m: Mapping[str, Any], trend: bool) -> str | None:
    """Why a run cannot decide a claim, or None if it can."""
    if m["status"] == "diverged":
        return f"diverged at step {m['diverged_step']}"
    if m["tpt_step"] is None:
        return "never reached 100% train accuracy"
    if trend and m["tpt_points"] < MIN_TPT_POINTS:
        return (f"only {m['tpt_points']} tracked steps in the terminal phase "
                f"(a trend needs {MIN_TPT_POINTS})")
    return None


Judgement = str | tuple[bool, dict[str, Any]]
"""A run's verdict on a claim with the numbers behind it, or why the run cannot decide it."""


def _per_run_claim(key: str, runs: list[Mapping[str, Any]], trend: bool,
                   judge: Callable[[Mapping[str, Any]], Judgement]) -> ClaimResult:
    """A claim judged by ``judge`` in every run that can decide it (see :func:`_unchecked`;
    ``trend``: the claim needs enough tracked steps in the terminal phase): it must hold in
    every run, a failing run outweighs one that cannot decide (the runs that cannot, with
    why, in ``numbers["not_checked"]``)."""
    verdicts: dict[str, bool | None] = {}
    numbers: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    for m in runs:
        label = _label(m)
        judgement = _unchecked(m, trend) or judge(m)
        if isinstance(judgement, str):
            verdicts[label], reasons[label] = None, judgement
        else:
            verdicts[label], numbers[label] = judgement
    if reasons:
        numbers["not_checked"] = reasons
    return decide(CLAIMS[key], verdicts, numbers)


def check_claims(metrics: Mapping[str, Mapping[str, Any]]) -> list[ClaimResult]:
    runs = sorted(metrics.values(), key=lambda m: m["seed"])

    def falls(key: str) -> Callable[[Mapping[str, Any]], Judgement]:
        def judge(m: Mapping[str, Any]) -> Judgement:
            rho = m[f"spearman_{key}"]
            if rho is None:
                return f"{key} constant over the terminal phase"
            return rho <= SPEARMAN_MAX, {
                "spearman": rho, "tpt_step": m["tpt_step"], "tpt_points": m["tpt_points"],
                f"{key}_at_tpt_start": m[f"tpt_start_{key}"], f"{key}_final": m[f"final_{key}"]}
        return judge

    def angle(m: Mapping[str, Any]) -> Judgement:
        # The mean cosine alone cannot fail here: it is near -1/(C-1) at initialisation already
        # (see the package doc), so the cosines must also have become more equal during the TPT.
        target = -1.0 / (m["n_classes"] - 1)
        gap = abs(m["final_mean_cosine"] - target)
        spread_fell = m["final_nc2_equiangular"] < m["tpt_start_nc2_equiangular"]
        return gap <= COSINE_TOLERANCE and spread_fell, {
            "final_mean_cosine": m["final_mean_cosine"], "target": target, "abs_gap": gap,
            "init_mean_cosine": m["init_mean_cosine"],
            "init_nc2_equiangular": m["init_nc2_equiangular"],
            "tpt_start_nc2_equiangular": m["tpt_start_nc2_equiangular"],
            "final_nc2_equiangular": m["final_nc2_equiangular"],
            "spearman_nc2_equiangular": m["spearman_nc2_equiangular"]}

    return [
        _per_run_claim("nc1", runs, True, falls("nc1")),
        _per_run_claim("nc3", runs, True, falls("nc3")),
        _per_run_claim("nc4", runs, False, lambda m: (
            m["final_nc4"] <= NC4_MAX, {"final_nc4": m["final_nc4"]})),
        _per_run_claim("nc2_angle", runs, False, angle),
    ]


def summarize(config: CollapseConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    data = {"study": NAME, "n_classes": config.data.n_classes,
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(check_claims(metrics)),
                   table=stack_histories(histories, metrics, ("seed", "tpt_step")))
