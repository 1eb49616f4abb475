"""The measures-grid study's summary and claims: every measure's ranking against the gap."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from scipy.stats import rankdata

from genlab.analyses.measures.ranking import (
    bootstrap_ranking,
    conditional_mutual_information,
    granulated_kendall,
    kendall_tau,
)
from genlab.analyses.measures.registry import MEASURES
from genlab.studies.base import ClaimResult, Summary
from genlab.studies.claims import decide_units, declare
from genlab.studies.measures_grid.settings import (
    CITATION,
    NAME,
    TASKS,
    MeasuresGridClaims,
    MeasuresGridConfig,
)

HYPERPARAMETERS = ("depth", "width", "lr", "batch_size", "weight_decay")
"""The grid's axes: Ψ and the CMI score condition on those that take two or more values."""

JIANG_MEASURES = (
    "num_params", "inverse_margin", "spec_init", "spec_orig", "prod_of_spec_over_margin",
    "prod_of_spec", "fro_over_spec", "sum_of_spec_over_margin", "sum_of_spec",
    "prod_of_fro_over_margin", "prod_of_fro", "sum_of_fro_over_margin", "sum_of_fro",
    "frobenius_distance", "spectral_distance", "param_norm", "path_norm_over_margin",
    "path_norm", "pacbayes_init", "pacbayes_orig", "pacbayes_flatness", "pacbayes_mag_flatness",
    "sharpness_flatness", "sharpness_mag_flatness", "steps_to_loss")
"""The registry's measures from Jiang et al.'s appendix C: the field the first claim ranks in.
The others (curvature, intrinsic dimension, rotation, Jacobian, neural collapse) are ranked in
the table but were not in the paper's comparison."""
FLATNESS = ("pacbayes_flatness", "pacbayes_mag_flatness")
NORM_BASED = (
    "spec_init", "spec_orig", "prod_of_spec_over_margin", "prod_of_spec", "fro_over_spec",
    "sum_of_spec_over_margin", "sum_of_spec", "prod_of_fro_over_margin", "prod_of_fro",
    "sum_of_fro_over_margin", "sum_of_fro", "frobenius_distance", "spectral_distance",
    "param_norm", "path_norm_over_margin", "path_norm")
"""Jiang et al.'s norm- and margin-based measures (their §7, appendix C.1-C.2): spectral and
Frobenius products and sums, distances to initialisation, parameter and path norms."""
CLAIMS = declare(NAME, CITATION, {
    "flatness_top": (
        "Sharpness-based measures predict the gap best: the PAC-Bayes flatness 1/σ′² (plain or "
        "magnitude-aware) is among the top measures by granulated Kendall Ψ",
        "per seed (its own data draw and grid of models), the Ψ-rank of the better of "
        "pacbayes_flatness and pacbayes_mag_flatness among Jiang et al.'s measures with a "
        "defined Ψ, over the top-third cutoff ⌈n/3⌉ (≤ 1: in the top third; a Ψ ≤ 0 counts "
        "as ranked last)"),
    "flatness_top_cmi": (
        "A PAC-Bayes flatness measure is among the top third of measures by the "
        "conditional-mutual-information score",
        "per seed, the CMI-rank of the better of pacbayes_flatness and pacbayes_mag_flatness "
        "among Jiang et al.'s measures with a defined score, over ⌈n/3⌉ (≤ 1: top third)"),
    "spectral_negative": (
        "The product of spectral norms correlates negatively with the generalization gap",
        "per seed, Kendall τ of prod_of_spec with the gap over the seed's included models"),
    "norm_below_flatness": (
        "Norm-based measures rank the gap worse than both PAC-Bayes flatness measures (by Ψ)",
        "per seed, the smaller sign·Ψ of pacbayes_flatness and pacbayes_mag_flatness minus "
        "the median sign·Ψ of Jiang et al.'s norm-based measures (> 0: both flatness measures "
        "above the typical norm)"),
})
"""What Jiang et al. (2020) report, as notes/science.md section 6 summarises it (a paraphrase:
the paper's own wording could not be checked here): the best performers are the PAC-Bayes
sharpness measures, especially the magnitude-aware one (1/σ′²_mag, eq. 61), and the worst-case
1/α′; path norm was reasonable; spectral-norm measures correlated *negatively* with the gap
(§7). Here the first is read on Ψ (the statistic the paper ranks measures by), the second on τ
(the correlation over all models); neither criterion was tuned to this grid."""
MIN_MODELS = 4  # fewer included models than this: the claims are not run


def measure_value(value: Any) -> float:
    """A measure as metrics.json stores it (NaN as null, ±inf as "inf"/"-inf") back to a float."""
    if value is None:
        return math.nan
    return float(value)  # float("inf") and float("-inf") parse the strings


def _ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks of the defined values (±inf included: a flatness of inf is the sharpest),
    NaN where undefined. τ, Ψ and the CMI score read only the order, and ranks keep ±inf from
    making differences NaN."""
    out = np.full(len(values), np.nan)
    keep = ~np.isnan(values)
    out[keep] = rankdata(values[keep])
    return out


def ranking_rows(values: Mapping[str, np.ndarray], gap: np.ndarray,
                 hyperparams: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    """One row per measure: τ with the gap, Ψ and each ψ_i over ``hyperparams`` (those the grid
    varies), the CMI score and its conditioning set, the number of models it is defined on; in
    descending order of sign·Ψ (undefined last). Columns ψ_<name> exist for every name in
    :data:`HYPERPARAMETERS` (NaN where not varied)."""
    rows = []
    for name, raw in values.items():
        ranks = _ranks(np.asarray(raw, dtype=np.float64))
        sign = MEASURES[name].sign if name in MEASURES else 1
        tau = kendall_tau(ranks, gap)
        if hyperparams:
            granulated = granulated_kendall(ranks, gap, hyperparams)
            psi, per = granulated.psi, granulated.per_hyperparameter
            cmi = conditional_mutual_information(ranks, gap, hyperparams)
            cmi_score, cmi_set = cmi.score, "+".join(cmi.argmin) or "none"
        else:
            psi, per, cmi_score, cmi_set = math.nan, {}, math.nan, ""
        rows.append({
            "measure": name, "sign": sign, "tau": tau, "psi": psi,
            **{f"psi_{h}": per.get(h, math.nan) for h in HYPERPARAMETERS},
            "cmi": cmi_score, "cmi_conditioning": cmi_set,
            "n_models": int(np.count_nonzero(~np.isnan(ranks))),
            "oriented_tau": sign * tau, "oriented_psi": sign * psi,
        })
    return sorted(rows, key=lambda r: (math.isnan(r["oriented_psi"]), -np.nan_to_num(
        r["oriented_psi"], nan=0.0), r["measure"]))


def _top_third(rows: Sequence[Mapping[str, Any]], key: str,
               by_name: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """Rank of the better flatness measure by ``key`` among Jiang et al.'s measures where it
    is defined, over the top-third cutoff (a value <= 0 counts as ranked last)."""
    ranked = sorted((r for r in rows if r["measure"] in JIANG_MEASURES
                     and not math.isnan(r[key])), key=lambda r: -r[key])
    candidates = [by_name[m] for m in FLATNESS
                  if m in by_name and not math.isnan(by_name[m][key])]
    if not candidates:
        return None
    best = max(candidates, key=lambda r: r[key])
    position = 1 + [r["measure"] for r in ranked].index(best["measure"])
    # a score <= 0 does not predict the gap at all: it counts as ranked below every measure
    effective = position if best[key] > 0 else len(ranked) + 1
    return {"value": effective / math.ceil(len(ranked) / 3), "measure": best["measure"],
            "score": best[key], "rank": position, "n_ranked": len(ranked)}


def seed_statistics(rows: Sequence[Mapping[str, Any]],
                    n_included: int) -> dict[str, Any]:
    """One seed's statistic for each claim from its ranking rows (:func:`ranking_rows`), with
    the numbers behind them; a statistic is None where it is undefined."""
    out: dict[str, Any] = {key: None for key in CLAIMS} | {"n_included": n_included}
    if n_included < MIN_MODELS:
        return out
    by_name = {r["measure"]: r for r in rows}
    by_psi = _top_third(rows, "oriented_psi", by_name)
    if by_psi is not None:
        out |= {"flatness_top": by_psi["value"], "flatness_measure": by_psi["measure"],
                "flatness_psi": by_psi["score"], "flatness_rank": by_psi["rank"],
                "n_ranked": by_psi["n_ranked"]}
    by_cmi = _top_third(rows, "cmi", by_name)
    if by_cmi is not None:
        out |= {"flatness_top_cmi": by_cmi["value"], "flatness_cmi_measure": by_cmi["measure"],
                "flatness_cmi": by_cmi["score"], "flatness_cmi_rank": by_cmi["rank"],
                "n_ranked_cmi": by_cmi["n_ranked"]}
    spec = by_name.get("prod_of_spec")
    if spec is not None and not math.isnan(spec["tau"]):
        out["spectral_negative"] = spec["tau"]
    flat = [by_name[m]["oriented_psi"] for m in FLATNESS if m in by_name]
    norms = [by_name[m]["oriented_psi"] for m in NORM_BASED if m in by_name
             and not math.isnan(by_name[m]["oriented_psi"])]
    if len(flat) == len(FLATNESS) and not any(map(math.isnan, flat)) and norms:
        out |= {"norm_below_flatness": min(flat) - float(np.median(norms)),
                "norm_median_psi": float(np.median(norms)), "n_norm_measures": len(norms)}
    return out


def check_claims(per_seed: Mapping[int, Mapping[str, Any]], rules: MeasuresGridClaims,
                 task: str | None = None) -> list[ClaimResult]:
    """Decide each claim from every seed's statistics (:func:`seed_statistics`) on ``task``
    (the claim's condition)."""
    details = {str(seed): {k: v for k, v in stats.items() if k not in CLAIMS}
               for seed, stats in per_seed.items()}
    return [decide_units(CLAIMS[key], getattr(rules, key),
                         {seed: stats[key] for seed, stats in per_seed.items()},
                         {"by_seed_detail": details, "min_models": MIN_MODELS},
                         condition=task)
            for key in CLAIMS]


@dataclass(frozen=True)
class _Ranking:
    """The ranking of the included runs among some names, with what it was computed from."""

    rows: list[dict[str, Any]]  # ranking_rows' rows
    values: dict[str, np.ndarray]  # measure -> its value per included run
    gap: np.ndarray  # the gap per included run
    varied: dict[str, np.ndarray]  # the hyperparameters these runs vary
    included: list[str]


def _ranking(metrics: Mapping[str, Mapping[str, Any]], names: Sequence[str]) -> _Ranking:
    included = [n for n in names if metrics[n]["included"]]
    measure_names = sorted({m for n in names for m in metrics[n]["measures"]})
    gap = np.array([metrics[n]["gap"] for n in included], dtype=np.float64)
    values = {m: np.array([measure_value(metrics[n]["measures"].get(m)) for n in included],
                          dtype=np.float64) for m in measure_names}
    varied = {h: np.array([metrics[n][h] for n in included]) for h in HYPERPARAMETERS
              if len({metrics[n][h] for n in included}) > 1}
    return _Ranking(ranking_rows(values, gap, varied), values, gap, varied, included)


def _with_intervals(ranking: _Ranking, resamples: int) -> None:
    """Add each row's bootstrap interval over models on τ, Ψ and the CMI score (``tau_lo``,
    ``tau_hi``, ...; NaN where undefined or ``resamples`` is 0)."""
    rows, gap = ranking.rows, ranking.gap
    ranks = np.array([_ranks(ranking.values[r["measure"]]) for r in rows]).reshape(
        len(rows), len(gap))
    bounds = (bootstrap_ranking(ranks, gap, ranking.varied, resamples)
              if resamples and len(gap) > 1
              else {k: np.full((len(rows), 2), np.nan) for k in ("tau", "psi", "cmi")})
    for i, row in enumerate(rows):
        for key, b in bounds.items():
            row[f"{key}_lo"], row[f"{key}_hi"] = float(b[i, 0]), float(b[i, 1])


def _summarize_task(config: MeasuresGridConfig, task: str,
                    metrics: Mapping[str, Mapping[str, Any]]
                    ) -> tuple[dict[str, Any], list[ClaimResult], list[dict[str, Any]]]:
    """One task's (condition's) summary data, claims and ranking rows."""
    names = sorted(n for n in metrics if metrics[n]["task"] == task)
    excluded: dict[str, int] = {}
    for n in names:
        if not metrics[n]["included"]:
            excluded[metrics[n]["status"]] = excluded.get(metrics[n]["status"], 0) + 1
    pooled = _ranking(metrics, names)
    _with_intervals(pooled, config.ranking_resamples)
    rows, varied, included, gap = pooled.rows, pooled.varied, pooled.included, pooled.gap
    per_seed = {}
    for seed in sorted({int(metrics[n]["seed"]) for n in names}):
        mine = _ranking(metrics, [n for n in names if int(metrics[n]["seed"]) == seed])
        per_seed[seed] = seed_statistics(mine.rows, len(mine.included))
    data = {
        "task": task, "n_runs": len(names), "n_included": len(included),
        "n_excluded": sum(excluded.values()), "excluded_by_status": excluded,
        "excluded_runs": {n: metrics[n].get("exclusion") or metrics[n]["status"]
                          for n in names if not metrics[n]["included"]},
        "hyperparameters_varied": list(varied),
        "ranking_resamples": config.ranking_resamples,
        "gap": ({"mean": float(gap.mean()), "min": float(gap.min()), "max": float(gap.max())}
                if len(gap) else None),
        "top_by_psi": [r["measure"] for r in rows if not math.isnan(r["oriented_psi"])][:5],
        "top_by_tau": [r["measure"] for r in sorted(
            rows, key=lambda r: -np.nan_to_num(r["oriented_tau"], nan=-2.0))][:5],
        "top_by_cmi": [r["measure"] for r in sorted(
            rows, key=lambda r: -np.nan_to_num(r["cmi"], nan=-1.0))][:5],
        "ranking": rows,
    }
    return data, check_claims(per_seed, config.claims, task), [{"task": task, **r} for r in rows]


CLAIMED_SIGN = {"prod_of_spec": -1} | {name: 1 for name in FLATNESS}
"""The sign the claims expect of each diagnosed measure's correlation with the gap: negative
for the spectral product (spectral_negative), positive for the flatness measures (flatness_top,
norm_below_flatness)."""
DIAGNOSED_MEASURES = tuple(CLAIMED_SIGN)
"""The measures the not-reproduced claims turn on, whose τ with each axis the diagnosis gives."""


def _tau_text(tau: float) -> str:
    return "undefined" if math.isnan(tau) else f"{tau:+.2f}"


def _within_axis_text(task: str, rows: Sequence[Mapping[str, Any]],
                      varied: Sequence[str]) -> str:
    """Each diagnosed measure's ψ_i (τ within the groups of models that differ in axis i alone,
    pooled over seeds) and the axes on which its sign is the opposite of the claims': a wrong
    sign on two or more axes separately is not one axis's confound."""
    by_name = {r["measure"]: r for r in rows}
    parts = []
    for name in DIAGNOSED_MEASURES:
        row = by_name.get(name)
        if row is None:
            continue
        psi = {h: row[f"psi_{h}"] for h in varied}
        wrong = [h for h, v in psi.items() if not math.isnan(v) and v * CLAIMED_SIGN[name] < 0]
        defined = sum(not math.isnan(v) for v in psi.values())
        parts.append(
            f"{name} ψ " + ", ".join(f"{h} {_tau_text(v)}" for h, v in psi.items())
            + f" (Ψ {_tau_text(row['psi'])}; the claims want it "
            + ("negative" if CLAIMED_SIGN[name] < 0 else "positive")
            + f"; opposite on {len(wrong)} of {defined} axes"
            + (f": {', '.join(wrong)}" if wrong else "") + ")")
    return (f"{task}, one axis at a time (Jiang et al.'s ψ_i: Kendall τ with the gap within the "
            "groups of models that differ in that axis alone, all seeds' models pooled): "
            + "; ".join(parts) + ".")


TEACHER_CAUSE = (
    "Why the teacher task's verdicts (issue 38): a finding of this synthetic task, not a bug "
    "and not the stopping rule. The measure code is tested against exact references (norms "
    "against numpy in float64, the spectral norm against torch's, path norms against the sum "
    "over paths, the PAC-Bayes σ on linear regression in closed form, Kendall τ against scipy, "
    "Ψ and the CMI score on grids with known answers), and the same code under Jiang et al.'s "
    "protocol on real data (the mnist1d task, cpu preset: stop at a training cross-entropy of "
    "0.01, models under 99% training accuracy dropped) ranks a PAC-Bayes flatness measure first"
    " by Ψ on every seed (flatness_top 0.111, reproduced, n = 3; docs/results.md, bad024f). The"
    " teacher task stops at 100% training accuracy instead; a setting run retrained the default"
    " preset's teacher grid (seeds 0-2, 96 models, at 4970a6c) to Jiang et al.'s stop "
    "(recipe.teacher: stop_at_train_loss 0.01, min_train_acc 0.99, max_steps 20000; 72 models "
    "kept, the 24 others depth-1 models with weight decay that missed the stop) and every "
    "verdict stayed: flatness_top 2.889 (not reproduced), flatness_top_cmi 1.000 [0.005, 1.995]"
    " (inconclusive), spectral_negative +0.402 [0.154, 0.650] and norm_below_flatness −0.754 "
    "[−1.440, −0.069] (not reproduced), pooled Ψ of pacbayes_flatness −0.17 and "
    "pacbayes_mag_flatness −0.16. The lines below are this run's: Kendall τ of each axis with "
    "the gap and with the claims' measures, then each measure's ψ per axis and the axes on "
    "which its sign is the opposite of the claims' (on two or more axes separately: not one "
    "axis's confound).")
"""The teacher task's cause (issue 38), from the setting run recorded in the study's
docstring; the per-task lines after it are computed from this run."""


def diagnosis(conditions: Mapping[str, Mapping[str, Any]],
              metrics: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The report's "why these verdicts" (issue 38), from the runs' numbers: per task, which of
    the grid's axes moves the gap (Kendall τ of each varied hyperparameter with the gap over
    the included models), how the claims' measures follow the gap and those axes, and each
    measure's ψ per axis (:func:`_within_axis_text`). With the teacher task, first its cause
    (:data:`TEACHER_CAUSE`): what the code's tests, the mnist1d task and a setting run at Jiang
    et al.'s stopping rule separated."""
    lines = []
    for task, data in conditions.items():
        ranking = _ranking(metrics, sorted(n for n in metrics if metrics[n]["task"] == task))
        gap = ranking.gap
        if len(gap) < MIN_MODELS:
            continue
        axes = ", ".join(f"{h} {_tau_text(kendall_tau(v.astype(np.float64), gap))}"
                         for h, v in ranking.varied.items())
        measures = "; ".join(
            f"{m}: with the gap {_tau_text(kendall_tau(ranking.values[m], gap))}, with "
            + ", ".join(f"{h} {_tau_text(kendall_tau(ranking.values[m], v.astype(np.float64)))}"
                        for h, v in ranking.varied.items())
            for m in DIAGNOSED_MEASURES if m in ranking.values)
        g = data["gap"]
        lines.append(
            f"{task}: {data['n_included']} of {data['n_runs']} runs kept (the rest missed the "
            f"stop or min_train_acc), gap {g['mean']:.3f} (range {g['min']:.3f} to "
            f"{g['max']:.3f}). Kendall τ with the gap, by axis: {axes}. {measures}.")
        lines.append(_within_axis_text(task, data["ranking"], list(ranking.varied)))
    if not lines:
        return []
    return [TEACHER_CAUSE, *lines] if "teacher" in conditions else lines


def summarize(config: MeasuresGridConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    """Per task (condition): exclude the runs that did not meet the recipe's stop or
    ``min_train_acc`` (counted by status), rank every measure over the rest (pooled over seeds,
    with bootstrap intervals over models, for the report), and judge the claims on each seed's
    own ranking. The table is every task's pooled ranking, one row per task and measure;
    ``data["runs"]`` keeps each run's gap and measures for the scatter plots."""
    tasks = [t for t in TASKS if any(m["task"] == t for m in metrics.values())]
    conditions, claims, table_rows = {}, [], []
    for task in tasks:
        data, task_claims, rows = _summarize_task(config, task, metrics)
        conditions[task] = data
        claims += task_claims
        table_rows += rows
    table = (pa.Table.from_pylist(table_rows) if table_rows
             else pa.table({"task": pa.array([], pa.string()),
                            "measure": pa.array([], pa.string())}))
    data = {
        "study": NAME, "tasks": tasks, "conditions": conditions,
        "diagnosis": diagnosis(conditions, metrics),
        "runs": {n: {k: v for k, v in metrics[n].items() if k != "measure_reasons"}
                 for n in sorted(metrics)},
    }
    return Summary(data=data, claims=tuple(claims), table=table)
