"""The neural-collapse study's summary and the claims checked on it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from genlab.studies.base import ClaimResult, Summary, stack_histories
from genlab.studies.claims import decide, decide_units, declare
from genlab.studies.neural_collapse.settings import CITATION, NAME, CollapseClaims, CollapseConfig

MIN_TPT_POINTS = 5  # tracked steps in the TPT below which a trend is not judged

# The class means' spread is a condition: 2.0 was chosen in a pilot after NC3 failed at 1.0,
# so both are run and every claim is judged at each, over the seeds (each its own mixture).
CLAIMS = declare(NAME, CITATION, {
    "nc1": ("NC1: within-class variability of the last-layer features collapses during the TPT",
            "per seed, log10 of NC1 at the start of the terminal phase (first step at 100% "
            "train accuracy) over NC1 at the end: how many orders of magnitude it fell"),
    "nc3": ("NC3: the classifier's rows converge to the centred class means (self-duality)",
            "per seed, Spearman(step, NC3) over the tracked steps of the terminal phase"),
    "nc4": ("NC4: the network's decision becomes the nearest-class-centre rule",
            "in every run that reached the terminal phase, final NC4 <= 0.01"),
    "nc2": ("NC2: the centred class means become equiangular (a simplex ETF)",
            "per seed, log10 of the spread of the class means' pairwise cosines at the start "
            "of the terminal phase over at the end (their mean is near -1/(C-1) already at "
            "init, so the spread is what must fall)"),
}, controls=("nc4",))
# nc4 is a control here: the nearest-class-centre rule agrees with the network from the first
# tracked steps of the terminal phase on (NC4 = 0 with test accuracy 1.0), so it cannot fail
NC4_MAX = 0.01


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


def _log_fall(start: float | None, end: float | None) -> float | None:
    if start is None or end is None or start <= 0 or end <= 0:
        return None
    return math.log10(start / end)


def _seed_statistic(key: str, m: Mapping[str, Any]) -> float | None:
    """One run's statistic for a literature claim; None where the run cannot decide it."""
    if _unchecked(m, trend=key == "nc3") is not None:
        return None
    if key == "nc1":
        return _log_fall(m["tpt_start_nc1"], m["final_nc1"])
    if key == "nc3":
        return m["spearman_nc3"]
    return _log_fall(m["tpt_start_nc2_equiangular"], m["final_nc2_equiangular"])


def check_claims(metrics: Mapping[str, Mapping[str, Any]],
                 rules: CollapseClaims) -> list[ClaimResult]:
    conditions: dict[float, list[Mapping[str, Any]]] = {}
    for m in metrics.values():
        conditions.setdefault(float(m["mean_scale"]), []).append(m)
    claims = []
    for key in CLAIMS:
        for scale, runs in sorted(conditions.items()):
            runs = sorted(runs, key=lambda m: m["seed"])
            condition = f"spread={scale:g}"
            reasons = {_label(m): r for m in runs
                       if (r := _unchecked(m, trend=key == "nc3")) is not None}
            if key == "nc4":  # the control: every run that reached the terminal phase
                verdicts = {_label(m): None if _label(m) in reasons
                            else m["final_nc4"] <= NC4_MAX for m in runs}
                claims.append(decide(CLAIMS[key], verdicts, {
                    "final_nc4": {_label(m): m["final_nc4"] for m in runs},
                    **({"not_checked": reasons} if reasons else {})}, condition=condition))
                continue
            detail = {_label(m): {k: m.get(k) for k in (
                "tpt_step", "tpt_points", f"tpt_start_{key}", f"final_{key}",
                "tpt_start_nc2_equiangular", "final_nc2_equiangular", "final_mean_cosine",
                "init_mean_cosine") if k in m} for m in runs}
            claims.append(decide_units(
                CLAIMS[key], getattr(rules, key),
                {int(m["seed"]): _seed_statistic(key, m) for m in runs},
                {"runs": detail, **({"not_checked": reasons} if reasons else {})},
                condition=condition))
    return claims


# Papyan et al.'s schedule on CIFAR-10: 350 epochs of 50,000 images at batch 128, the step size
# divided by 10 at 1/3 and 2/3 of it; the weight decay's exposure λ·Σ η_t it gives at a
# study's own η₀ and λ is the yardstick for whether a run trained "long enough"
PAPER_STEPS = 350 * math.ceil(50_000 / 128)


def paper_exposure(lr: float, weight_decay: float) -> float:
    return weight_decay * lr * (PAPER_STEPS / 3) * (1 + 0.1 + 0.01)


def _mean(runs: list[Mapping[str, Any]], key: str) -> float:
    values = [float(m[key]) for m in runs if m.get(key) is not None]
    return float(np.mean(values)) if values else math.nan


def diagnosis(metrics: Mapping[str, Mapping[str, Any]], config: CollapseConfig) -> list[str]:
    """The report's "why these verdicts" (issue 38), from the runs' numbers: where the terminal
    phase starts, where NC1 starts and stops, whether the loss is still being pushed down, and
    the weight decay's exposure against the paper's schedule."""
    lines = []
    for scale in sorted({float(m["mean_scale"]) for m in metrics.values()}):
        runs = [m for m in metrics.values() if float(m["mean_scale"]) == scale
                and _unchecked(m, trend=False) is None and "weight_decay_exposure" in m]
        if not runs:
            continue
        falls = [f for m in runs if (f := _log_fall(m["tpt_start_nc1"], m["final_nc1"]))]
        early = [f for m in runs if m.get("nc1_at_first_drop") is not None
                 and (f := _log_fall(m["tpt_start_nc1"], m["nc1_at_first_drop"]))]
        drop = (f"; {np.mean(early):.2f} of them by the step size's first division "
                f"(step {runs[0]['first_drop_step']:,})" if early else "")
        lines.append(
            f"spread={scale:g} (mean of {len(runs)} seeds): the terminal phase starts at step "
            f"{_mean(runs, 'tpt_step'):,.0f} of {config.recipe.steps:,}; NC1 is "
            f"{_mean(runs, 'init_nc1'):.3g} at initialisation, {_mean(runs, 'tpt_start_nc1'):.3g} "
            f"when the TPT starts and {_mean(runs, 'final_nc1'):.3g} at the end: "
            f"{np.mean(falls):.2f} orders of magnitude{drop}. The training loss is "
            f"{_mean(runs, 'tpt_start_train_loss'):.2g} when the TPT starts, at least "
            f"{_mean(runs, 'min_train_loss_in_tpt'):.2g} in it and "
            f"{_mean(runs, 'final_train_loss'):.2g} at the end. The weight decay's exposure "
            f"λ·Σ η_t over the TPT is {_mean(runs, 'weight_decay_exposure_tpt'):.3f}.")
    if not lines:
        return []
    recipe = config.recipe
    return [
        "Cause: the setting's scale, not the implementation or the schedule's length. NC1 is "
        "Tr(Σ_W Σ_B⁺)/C of the last hidden layer, tested against exactly collapsed simplex-ETF "
        "features (0) and an independent numpy implementation on random ones. The paper's "
        f"schedule ({PAPER_STEPS:,} steps on CIFAR-10) at this η₀ = {recipe.lr:g} and λ = "
        f"{recipe.weight_decay:g} gives an exposure of "
        f"{paper_exposure(recipe.lr, recipe.weight_decay):.2f}; a diagnostic run of that length "
        "(seed 0, spread 2; the study's docstring) moved NC1 only 0.26 orders of magnitude, "
        "against 0.20 in 10,000 steps. The TPT starts within the first few hundred steps, "
        "NC1 is already small when it does (the Gaussian classes barely overlap), and the loss "
        "does not keep falling: it settles where weight decay balances it, and NC1 with it. "
        "Papyan et al.'s NC1 falls from deep networks on images whose classes overlap in the "
        "input; at this scale NC1's order-of-magnitude fall is not seen, a finding of the "
        "setting, reported with its numbers.",
        *lines]


def summarize(config: CollapseConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    data = {"study": NAME, "n_classes": config.data.n_classes,
            "runs": {k: dict(v) for k, v in sorted(metrics.items())},
            "diagnosis": diagnosis(metrics, config)}
    return Summary(data=data, claims=tuple(check_claims(metrics, config.claims)),
                   table=stack_histories(histories, metrics, ("mean_scale", "seed", "tpt_step")))
