"""How well a measure ranks models by their generalization gap (Jiang et al., ICLR 2020, §5-6).

Given, for N models, a measure μ_k, a gap g_k and hyperparameter values θ_k:

- **Kendall τ** (:func:`kendall_tau`). With S = Σ_{k<l} sign(μ_k − μ_l) sign(g_k − g_l),
  τ_b = S / √((n₀ − n_μ)(n₀ − n_g)), n₀ = N(N−1)/2 and n_μ, n_g the pairs tied in μ or g:
  ``scipy.stats.kendalltau``'s default (a test checks the equality, ties included). Jiang et al.
  eq. 2 is τ_a = S/n₀ (``variant="a"``), the same number when nothing is tied. NaN entries are
  dropped (as scipy's ``nan_policy="omit"``); fewer than 2 models, or all tied, gives NaN.
- **Granulated Kendall Ψ** (:func:`granulated_kendall`, Jiang et al. eqs. 4-5). For each
  hyperparameter i, group the models whose *other* hyperparameters are all equal; within each
  group only θ_i varies (and the seed, if there are replicates). ψ_i is the mean τ over the
  groups (m_i of them), and Ψ = (1/n) Σ_i ψ_i over the n hyperparameters. A group with fewer than
  2 models, or a NaN τ (everything tied), is left out of its mean; on Jiang et al.'s full grid
  none is.
- **Conditional mutual information** (:func:`conditional_mutual_information`, Jiang et al. §6).
  Over ordered pairs of distinct models (k, l), V_g = 𝟙[g_k > g_l], V_μ = 𝟙[μ_k > μ_l] and, for a
  set S of hyperparameters, U_S = (θ_S^k, θ_S^l). Then

      Î(V_μ, V_g | U_S) = I(V_μ; V_g | U_S) / H(V_g | U_S),
      I(V_μ; V_g | U_S) = Σ_u p(u) Σ_{a,b} p(a, b | u) log[p(a, b | u) / (p(a | u) p(b | u))],

  H(V_g | U_S) = Σ_u p(u) H(V_g | U_S = u), p(u) the fraction of pairs in cell u, and the score
  is K(μ) = min over |S| ≤ 2 of Î: how much the measure says about the gap beyond what any
  one or two hyperparameters already say (a measure that only tracks, say, the width scores ≈ 0
  once the width is conditioned on). In [0, 1]; NaN where H(V_g | U_S) = 0. The PGDL scoring
  program (Jiang et al. 2020) also binarises with a strict >, but averages the cells without the
  weights p(u) (equal on a full grid), counts each model paired with itself and takes the
  minimum over |S| = 2 only; here the paper's definition is followed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

TauVariant = Literal["a", "b"]


def _finite_pairs(measure: ArrayLike, gap: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.asarray(measure, dtype=np.float64).reshape(-1)
    y = np.asarray(gap, dtype=np.float64).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"measure and gap have different lengths, {len(x)} and {len(y)}")
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep], keep


def kendall_tau(measure: ArrayLike, gap: ArrayLike, variant: TauVariant = "b") -> float:
    """Kendall's τ_b (or Jiang et al.'s τ_a) between a measure and the gap (module docstring)."""
    if variant not in ("a", "b"):
        raise ValueError(f"unknown variant {variant!r}; known: ['a', 'b']")
    x, y, _ = _finite_pairs(measure, gap)
    n = len(x)
    if n < 2:
        return math.nan
    s = untied_x = untied_y = 0
    for k in range(n - 1):  # row by row: O(N) memory
        sx, sy = np.sign(x[k + 1:] - x[k]), np.sign(y[k + 1:] - y[k])
        s += int((sx * sy).sum())
        untied_x += int(np.count_nonzero(sx))
        untied_y += int(np.count_nonzero(sy))
    if variant == "a":
        return s / (n * (n - 1) / 2)
    if untied_x == 0 or untied_y == 0:
        return math.nan
    return s / math.sqrt(untied_x * untied_y)


def _codes(values: ArrayLike, n: int, name: str) -> tuple[np.ndarray, int]:
    """Integer codes 0 … L−1 of one hyperparameter's values, and L."""
    array = np.asarray(values).reshape(-1)
    if len(array) != n:
        raise ValueError(f"hyperparameter {name!r} has {len(array)} values for {n} models")
    _, codes = np.unique(array, return_inverse=True)
    return codes.reshape(-1), int(codes.max()) + 1


@dataclass(frozen=True)
class GranulatedKendall:
    psi: float  # Ψ = mean over hyperparameters of ψ_i
    per_hyperparameter: dict[str, float]  # ψ_i
    groups: dict[str, int]  # groups of ≥ 2 models with a defined τ behind each ψ_i


def granulated_kendall(measure: ArrayLike, gap: ArrayLike,
                       hyperparams: Mapping[str, ArrayLike],
                       variant: TauVariant = "b") -> GranulatedKendall:
    """Ψ and every ψ_i (module docstring); ``hyperparams`` maps each name to its N values."""
    x = np.asarray(measure, dtype=np.float64).reshape(-1)
    y = np.asarray(gap, dtype=np.float64).reshape(-1)
    if not hyperparams:
        raise ValueError("granulated Kendall needs at least one hyperparameter")
    codes = {name: _codes(values, len(x), name)[0] for name, values in hyperparams.items()}
    psi, groups = {}, {}
    for name in codes:
        others = [codes[o] for o in codes if o != name]
        keys = np.stack(others, axis=1) if others else np.zeros((len(x), 1), dtype=np.int64)
        _, group_of = np.unique(keys, axis=0, return_inverse=True)
        taus = [kendall_tau(x[group_of.reshape(-1) == g], y[group_of.reshape(-1) == g], variant)
                for g in np.unique(group_of)]
        taus = [t for t in taus if not math.isnan(t)]
        psi[name] = float(np.mean(taus)) if taus else math.nan
        groups[name] = len(taus)
    defined = [v for v in psi.values() if not math.isnan(v)]
    return GranulatedKendall(psi=float(np.mean(defined)) if defined else math.nan,
                             per_hyperparameter=psi, groups=groups)


def _entropy_bits(counts: np.ndarray) -> np.ndarray:
    """Entropy in bits of each row of nonnegative counts (0 for an empty row)."""
    total = counts.sum(axis=-1, keepdims=True)
    p = np.divide(counts, total, out=np.zeros_like(counts, dtype=np.float64), where=total > 0)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logs).sum(axis=-1)


def normalized_cmi(joint: np.ndarray) -> float:
    """I(V_μ; V_g | U)/H(V_g | U) from counts ``joint`` (cells, 2 [V_g], 2 [V_μ]), the cells
    weighted by their share of the pairs; NaN where H(V_g | U) = 0."""
    joint = np.asarray(joint, dtype=np.float64)
    weight = joint.sum(axis=(1, 2)) / joint.sum()  # p(u)
    flat = joint.reshape(len(joint), 4)
    h_g = _entropy_bits(joint.sum(axis=2))  # H(V_g | u)
    h_m = _entropy_bits(joint.sum(axis=1))  # H(V_μ | u)
    mutual = h_g + h_m - _entropy_bits(flat)  # I = H(V_g) + H(V_μ) − H(V_g, V_μ) per cell
    conditional_h = float((weight * h_g).sum())
    if conditional_h <= 0:
        return math.nan
    return float((weight * mutual).sum()) / conditional_h


@dataclass(frozen=True)
class ConditionalMI:
    score: float  # K(μ) = min over conditioning sets of Î
    argmin: tuple[str, ...]  # the conditioning set attaining it
    per_set: dict[tuple[str, ...], float]  # Î for every conditioning set


def _conditioning_cells(coded: Mapping[str, tuple[np.ndarray, int]], k: np.ndarray,
                        l_: np.ndarray, max_conditioning: int, compact: bool = True
                        ) -> Iterator[tuple[tuple[str, ...], np.ndarray, int]]:
    """For each set S of at most ``max_conditioning`` hyperparameters (the empty set first):
    S, the cell of U_S = (θ_S^k, θ_S^l) of each pair (k, l) as 0 … C−1, and C. ``compact``
    numbers only the cells that occur; otherwise C is every combination of levels (cells that
    no pair falls in carry no weight in the score)."""
    names: Sequence[str] = list(coded)
    for size in range(min(max_conditioning, len(names)) + 1):
        for subset in itertools.combinations(names, size):
            cell = np.zeros(len(k), dtype=np.int64)
            cells = 1
            for name in subset:
                codes, levels = coded[name]
                cell = (cell * levels + codes[k]) * levels + codes[l_]
                cells *= levels * levels
            if compact:
                _, cell = np.unique(cell, return_inverse=True)
                cell = cell.reshape(-1)
                cells = int(cell.max()) + 1
            yield subset, cell, cells


def conditional_mutual_information(measure: ArrayLike, gap: ArrayLike,
                                   hyperparams: Mapping[str, ArrayLike],
                                   max_conditioning: int = 2) -> ConditionalMI:
    """Jiang et al.'s K(μ) = min_{|S| ≤ max_conditioning} Î(V_μ, V_g | U_S) (module docstring),
    over the ordered pairs of distinct models whose measure and gap are both defined."""
    x, y, keep = _finite_pairs(measure, gap)
    if len(x) < 2:
        return ConditionalMI(math.nan, (), {})
    coded = {name: _codes(values, len(keep), name) for name, values in hyperparams.items()}
    coded = {name: (codes[keep], levels) for name, (codes, levels) in coded.items()}
    k, l_ = np.nonzero(~np.eye(len(x), dtype=bool))  # ordered pairs k ≠ l
    outcome = 2 * (y[k] > y[l_]).astype(np.int64) + (x[k] > x[l_]).astype(np.int64)
    per_set: dict[tuple[str, ...], float] = {}
    for subset, cell, cells in _conditioning_cells(coded, k, l_, max_conditioning):
        joint = np.bincount(cell * 4 + outcome, minlength=4 * cells)
        per_set[subset] = normalized_cmi(joint.reshape(-1, 2, 2))
    defined = {s: v for s, v in per_set.items() if not math.isnan(v)}
    if not defined:
        return ConditionalMI(math.nan, (), per_set)
    argmin = min(defined, key=defined.__getitem__)
    return ConditionalMI(defined[argmin], argmin, per_set)


PAIR_BUDGET = 2**24
"""Most (measure, ordered pair) entries :func:`ranking_statistics` holds in one array (int64:
128 MiB): 37 measures over 96 models fit at once; over the paper preset's 1,215, 11 at a time."""


@dataclass(frozen=True)
class RankingStatistics:
    """τ_b, Ψ and the CMI score K of several measures over the same models, one entry each."""

    tau: np.ndarray
    psi: np.ndarray
    cmi: np.ndarray


def _pair_signs(values: np.ndarray, k: np.ndarray, l_: np.ndarray) -> np.ndarray:
    """sign(v_k − v_l) per row of ``values`` and pair, 0 where either is NaN."""
    a, b = values[..., k], values[..., l_]
    return np.where(np.isnan(a) | np.isnan(b), 0.0, np.sign(a - b))


def _tau_by_group(sx: np.ndarray, sy: np.ndarray, group: np.ndarray,
                  n_groups: int) -> np.ndarray:
    """τ_b of each row of ``sx`` (``sy``: the gap's signs, 0 where the row's measure is
    undefined) within each group of pairs (``group`` per pair, −1: none); NaN where a group has
    no untied pair in the measure or the gap."""
    use = group >= 0
    g = group[use]
    out = np.full((len(sx), n_groups), np.nan)
    for r in range(len(sx)):
        x, y = sx[r, use], sy[r, use]
        s = np.bincount(g, weights=x * y, minlength=n_groups)
        ux = np.bincount(g, weights=np.abs(x), minlength=n_groups)
        uy = np.bincount(g, weights=np.abs(y), minlength=n_groups)
        ok = (ux > 0) & (uy > 0)
        out[r, ok] = s[ok] / np.sqrt(ux[ok] * uy[ok])
    return out


def _nanmean_rows(values: np.ndarray) -> np.ndarray:
    """The mean of each row's defined entries; NaN for a row with none."""
    count = (~np.isnan(values)).sum(axis=1)
    total = np.nansum(values, axis=1)
    return np.divide(total, count, out=np.full(len(values), np.nan), where=count > 0)


def _normalized_cmi_rows(joint: np.ndarray) -> np.ndarray:
    """:func:`normalized_cmi` of each ``joint[r]`` (cells, 2, 2); NaN where a row is empty or
    H(V_g | U) = 0."""
    total = joint.sum(axis=(1, 2, 3))
    weight = np.divide(joint.sum(axis=(2, 3)), total[:, None],
                       out=np.zeros(joint.shape[:2]), where=total[:, None] > 0)
    h_g = _entropy_bits(joint.sum(axis=3))
    h_m = _entropy_bits(joint.sum(axis=2))
    mutual = h_g + h_m - _entropy_bits(joint.reshape(*joint.shape[:2], 4))
    conditional_h = (weight * h_g).sum(axis=1)
    return np.divide((weight * mutual).sum(axis=1), conditional_h,
                     out=np.full(len(joint), np.nan), where=conditional_h > 0)


def ranking_statistics(measures: ArrayLike, gap: ArrayLike, hyperparams: Mapping[str, ArrayLike],
                       max_conditioning: int = 2) -> RankingStatistics:
    """:func:`kendall_tau` (τ_b), :func:`granulated_kendall`'s Ψ and
    :func:`conditional_mutual_information`'s score for every row of ``measures`` (M, N) at once,
    equal to those functions row by row (tested): built for bootstrap resamples, where the
    pairs, groups and conditioning cells are shared by every measure. ``gap`` must be defined
    for every model; a measure's NaN entries drop its pairs with that model. ``hyperparams``
    may be empty (Ψ and the CMI score are then NaN)."""
    x = np.atleast_2d(np.asarray(measures, dtype=np.float64))
    y = np.asarray(gap, dtype=np.float64).reshape(-1)
    m, n = x.shape
    if len(y) != n or np.isnan(y).any():
        raise ValueError(f"gap must hold {n} defined values")
    codes = {name: _codes(values, n, name) for name, values in hyperparams.items()}
    # what every measure shares: the pairs, the gap's order on them, the granulated Kendall
    # groups and the conditioning cells
    k, l_ = np.triu_indices(n, 1)
    gap_sign = np.sign(y[k] - y[l_])
    groupings = []
    for name in codes:
        others = [codes[o][0] for o in codes if o != name]
        keys = np.stack(others, axis=1) if others else np.zeros((n, 1), dtype=np.int64)
        _, group_of = np.unique(keys, axis=0, return_inverse=True)
        group_of = group_of.reshape(-1)
        groupings.append((np.where(group_of[k] == group_of[l_], group_of[k], -1),
                          int(group_of.max()) + 1))
    ok, ol = np.nonzero(~np.eye(n, dtype=bool)) if codes else (k[:0], k[:0])  # k ≠ l
    gap_order = 2 * (y[ok] > y[ol]).astype(np.int64)
    cells = [(cell, count) for _, cell, count in _conditioning_cells(
        codes, ok, ol, max_conditioning, compact=False)] if codes else []
    whole = np.zeros(len(k), dtype=np.int64)
    tau, psi, cmi = np.full(m, np.nan), np.full(m, np.nan), np.full(m, np.nan)
    rows = max(1, PAIR_BUDGET // max(1, n * (n - 1)))
    for start in range(0, m, rows):  # a few measures at a time: arrays stay within budget
        chunk = slice(start, min(m, start + rows))
        xc = x[chunk]
        finite = ~np.isnan(xc)
        defined = finite[:, k] & finite[:, l_]
        sx, sy = _pair_signs(xc, k, l_), gap_sign[None, :] * defined
        tau[chunk] = _tau_by_group(sx, sy, whole, 1)[:, 0]
        if groupings:
            psi[chunk] = _nanmean_rows(np.stack(
                [_nanmean_rows(_tau_by_group(sx, sy, group, count))
                 for group, count in groupings], axis=1))
        if not cells:
            continue
        outcome = gap_order[None, :] + (xc[:, ok] > xc[:, ol])
        weight = (finite[:, ok] & finite[:, ol]).astype(np.float64).reshape(-1)
        best = cmi[chunk]
        for cell, count in cells:
            index = (np.arange(len(xc))[:, None] * count + cell[None, :]) * 4 + outcome
            joint = np.bincount(index.reshape(-1), weights=weight,
                                minlength=len(xc) * count * 4).reshape(len(xc), count, 2, 2)
            value = _normalized_cmi_rows(joint)
            best = np.where(~np.isnan(value) & ~(value >= best), value, best)
        cmi[chunk] = best
    return RankingStatistics(tau=tau, psi=psi, cmi=cmi)


def bootstrap_ranking(measures: ArrayLike, gap: ArrayLike, hyperparams: Mapping[str, ArrayLike],
                      resamples: int, seed: int = 0,
                      confidence: float = 0.95) -> dict[str, np.ndarray]:
    """Percentile bootstrap intervals over models of each measure's τ, Ψ and CMI score
    (:func:`ranking_statistics` on ``resamples`` draws of N models with replacement, seeded):
    ``{"tau": (M, 2), "psi": (M, 2), "cmi": (M, 2)}``, NaN where fewer than half the resamples
    define the statistic. Models are the resampled unit: the interval says how much the
    ranking depends on which models the grid happened to hold, not on the seeds' data draws."""
    x = np.atleast_2d(np.asarray(measures, dtype=np.float64))
    y = np.asarray(gap, dtype=np.float64).reshape(-1)
    hp = {name: np.asarray(values).reshape(-1) for name, values in hyperparams.items()}
    rng = np.random.default_rng(seed)
    draws: dict[str, list[np.ndarray]] = {"tau": [], "psi": [], "cmi": []}
    for _ in range(resamples):
        idx = rng.integers(0, len(y), len(y))
        stats = ranking_statistics(x[:, idx], y[idx], {h: v[idx] for h, v in hp.items()})
        for key in draws:
            draws[key].append(getattr(stats, key))
    alpha = (1 - confidence) / 2
    out = {}
    for key, values in draws.items():
        stacked = np.stack(values) if values else np.full((0, x.shape[0]), np.nan)
        bounds = np.full((x.shape[0], 2), np.nan)
        for r in range(x.shape[0]):
            column = stacked[:, r][~np.isnan(stacked[:, r])]
            if resamples and len(column) >= resamples / 2:
                bounds[r] = np.quantile(column, [alpha, 1 - alpha])
        out[key] = bounds
    return out


__all__ = ["ConditionalMI", "GranulatedKendall", "RankingStatistics", "TauVariant",
           "bootstrap_ranking", "conditional_mutual_information", "granulated_kendall",
           "kendall_tau", "normalized_cmi", "ranking_statistics"]
