"""The measures-grid study's summary and claims: every measure's ranking against the gap."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from scipy.stats import rankdata

from genlab.analyses.measures.ranking import (
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
CLAIMS = declare(NAME, CITATION, {
    "flatness_top": (
        "Sharpness-based measures predict the gap best: the PAC-Bayes flatness 1/σ′² (plain or "
        "magnitude-aware) is among the top measures by granulated Kendall Ψ",
        "per seed (its own teacher task and grid of models), the Ψ-rank of the better of "
        "pacbayes_flatness and pacbayes_mag_flatness among Jiang et al.'s measures with a "
        "defined Ψ, over the top-third cutoff ⌈n/3⌉ (≤ 1: in the top third; a Ψ ≤ 0 counts "
        "as ranked last)"),
    "spectral_negative": (
        "The product of spectral norms correlates negatively with the generalization gap",
        "per seed, Kendall τ of prod_of_spec with the gap over the seed's included models"),
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


def seed_statistics(rows: Sequence[Mapping[str, Any]],
                    n_included: int) -> dict[str, Any]:
    """One seed's statistic for each claim from its ranking rows (:func:`ranking_rows`), with
    the numbers behind them; a statistic is None where it is undefined."""
    by_name = {r["measure"]: r for r in rows}
    if n_included < MIN_MODELS:
        return {"flatness_top": None, "spectral_negative": None, "n_included": n_included}
    ranked = [r for r in rows
              if r["measure"] in JIANG_MEASURES and not math.isnan(r["oriented_psi"])]
    ranked.sort(key=lambda r: -r["oriented_psi"])
    candidates = [by_name[m] for m in FLATNESS
                  if m in by_name and not math.isnan(by_name[m]["oriented_psi"])]
    out: dict[str, Any] = {"n_included": n_included, "flatness_top": None,
                           "spectral_negative": None}
    if candidates:
        best = max(candidates, key=lambda r: r["oriented_psi"])
        position = 1 + [r["measure"] for r in ranked].index(best["measure"])
        cutoff = math.ceil(len(ranked) / 3)
        # a Ψ <= 0 does not predict the gap at all: it counts as ranked below every measure
        effective = position if best["oriented_psi"] > 0 else len(ranked) + 1
        out |= {"flatness_top": effective / cutoff, "flatness_measure": best["measure"],
                "flatness_psi": best["psi"], "flatness_rank": position, "n_ranked": len(ranked)}
    spec = by_name.get("prod_of_spec")
    if spec is not None and not math.isnan(spec["tau"]):
        out["spectral_negative"] = spec["tau"]
    return out


def check_claims(per_seed: Mapping[int, Mapping[str, Any]],
                 rules: MeasuresGridClaims) -> list[ClaimResult]:
    """Decide each claim from every seed's statistics (:func:`seed_statistics`)."""
    details = {str(seed): {k: v for k, v in stats.items() if k not in CLAIMS}
               for seed, stats in per_seed.items()}
    return [decide_units(CLAIMS[key], getattr(rules, key),
                         {seed: stats[key] for seed, stats in per_seed.items()},
                         {"by_seed_detail": details, "min_models": MIN_MODELS})
            for key in CLAIMS]


def _ranking(metrics: Mapping[str, Mapping[str, Any]], names: Sequence[str]
             ) -> tuple[list[dict[str, Any]], dict[str, np.ndarray], list[str]]:
    """The ranking rows of the included runs among ``names``, the hyperparameters they vary,
    and the included names."""
    included = [n for n in names if metrics[n]["included"]]
    measure_names = sorted({m for n in names for m in metrics[n]["measures"]})
    gap = np.array([metrics[n]["gap"] for n in included], dtype=np.float64)
    values = {m: np.array([measure_value(metrics[n]["measures"].get(m)) for n in included],
                          dtype=np.float64) for m in measure_names}
    varied = {h: np.array([metrics[n][h] for n in included]) for h in HYPERPARAMETERS
              if len({metrics[n][h] for n in included}) > 1}
    return ranking_rows(values, gap, varied), varied, included


def summarize(config: MeasuresGridConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    """Exclude the runs that did not reach the training-accuracy threshold (counted by status),
    rank every measure over the rest (pooled over seeds, for the report), and judge the claims
    on each seed's own ranking. The table is the pooled ranking, one row per measure;
    ``data["runs"]`` keeps each run's gap and measures for the scatter plots."""
    names = sorted(metrics)
    excluded: dict[str, int] = {}
    for n in names:
        if not metrics[n]["included"]:
            excluded[metrics[n]["status"]] = excluded.get(metrics[n]["status"], 0) + 1
    rows, varied, included = _ranking(metrics, names)
    gap = np.array([metrics[n]["gap"] for n in included], dtype=np.float64)
    seeds = sorted({int(metrics[n]["seed"]) for n in names})
    per_seed = {}
    for seed in seeds:
        mine = [n for n in names if int(metrics[n]["seed"]) == seed]
        seed_rows, _, seed_included = _ranking(metrics, mine)
        per_seed[seed] = seed_statistics(seed_rows, len(seed_included))
    claims = check_claims(per_seed, config.claims)
    table = pa.Table.from_pylist(rows) if rows else pa.table({"measure": pa.array([], pa.string())})
    data = {
        "study": NAME, "n_runs": len(names), "n_included": len(included),
        "n_excluded": sum(excluded.values()), "excluded_by_status": excluded,
        "excluded_runs": [n for n in names if not metrics[n]["included"]],
        "hyperparameters_varied": list(varied),
        "gap": ({"mean": float(gap.mean()), "min": float(gap.min()), "max": float(gap.max())}
                if len(gap) else None),
        "top_by_psi": [r["measure"] for r in rows if not math.isnan(r["oriented_psi"])][:5],
        "top_by_tau": [r["measure"] for r in sorted(
            rows, key=lambda r: -np.nan_to_num(r["oriented_tau"], nan=-2.0))][:5],
        "ranking": rows,
        "runs": {n: {k: v for k, v in metrics[n].items() if k != "measure_reasons"}
                 for n in names},
    }
    return Summary(data=data, claims=tuple(claims), table=table)
