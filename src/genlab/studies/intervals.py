"""A claim's effect with its uncertainty: an estimate, a 95% interval over independent units,
and the rule the interval is judged by.

An *independent unit* is one seed with its own data draw (training set, label noise, teacher):
two runs that share a training set are one unit for a claim about the data's effect. The
interval is

- ``bootstrap``: the BCa bootstrap interval of the statistic (the mean by default) over the
  units, by :func:`scipy.stats.bootstrap` with a fixed resampling seed, so reruns print the same
  interval (Efron & Tibshirani 1993, ch. 14). BCa needs at least 3 units, and with fewer than
  about 10 it is too narrow (its coverage falls short of 95%): :func:`mean_interval` uses the
  ``t`` interval below 10 units and says which it used.
- ``t``: the Student-t interval of the mean, mean ± t_{0.975, n-1}·s/√n, exact for normal units.
- ``exact``: given by the caller (a Clopper-Pearson interval of a proportion, say).

A :class:`Rule` says what the claim asserts of the effect (``>= 2.5``, ``<= 0``, ``within
[0.95, 1.15]``) and judges an interval three ways (:meth:`Rule.judge`): ``reproduced`` when every
value in the interval satisfies it, ``not_reproduced`` when none does, ``inconclusive`` when the
interval straddles the threshold. One unit gives no interval, and so no verdict but
``inconclusive``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from genlab.claim_rules import IntervalVerdict, Rule

IntervalMethod = Literal["bootstrap", "t", "exact"]
CONFIDENCE = 0.95
BOOTSTRAP_MIN_UNITS = 10  # below this, BCa undercovers: the t interval is used instead
BOOTSTRAP_RESAMPLES = 9999
BOOTSTRAP_SEED = 0


@dataclass(frozen=True)
class Estimate:
    """An effect over ``n`` independent units: the point value and its 95% interval (None with
    fewer than two units, or when every unit is equal and the method needs a spread)."""

    value: float
    interval: tuple[float, float] | None
    n: int
    method: IntervalMethod

    def to_json(self) -> dict[str, Any]:
        return {"estimate": self.value,
                "interval": None if self.interval is None else list(self.interval),
                "n": self.n, "interval_method": self.method}


def _units(values: Sequence[float]) -> np.ndarray:
    units = np.asarray(values, dtype=np.float64).reshape(-1)
    if units.size == 0:
        raise ValueError("an estimate needs at least one unit")
    if not np.isfinite(units).all():
        raise ValueError(f"units must be finite, got {units.tolist()}")
    return units


def t_interval(values: Sequence[float]) -> Estimate:
    """The mean with its Student-t 95% interval."""
    from scipy import stats

    units = _units(values)
    mean = float(units.mean())
    if units.size < 2:
        return Estimate(mean, None, 1, "t")
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, units.size - 1)
                 * units.std(ddof=1) / math.sqrt(units.size))
    return Estimate(mean, (mean - half, mean + half), int(units.size), "t")


def bootstrap_interval(values: Sequence[float],
                       statistic: Callable[[np.ndarray], float] = np.mean) -> Estimate:
    """``statistic`` of the units with its BCa bootstrap 95% interval (seeded: reproducible).
    Every unit equal: the interval is that value (there is nothing to resample)."""
    from scipy import stats

    units = _units(values)
    value = float(statistic(units))
    if units.size < 3:
        return Estimate(value, None, int(units.size), "bootstrap")
    if np.ptp(units) == 0:
        return Estimate(value, (value, value), int(units.size), "bootstrap")
    # numpy's reductions take axis= and run vectorised; any other statistic is called per resample
    vectorized = statistic in (np.mean, np.median)
    result = stats.bootstrap((units,), statistic, vectorized=vectorized,
                             confidence_level=CONFIDENCE, n_resamples=BOOTSTRAP_RESAMPLES,
                             method="BCa", rng=np.random.default_rng(BOOTSTRAP_SEED))
    lo, hi = (float(result.confidence_interval.low), float(result.confidence_interval.high))
    return Estimate(value, (lo, hi), int(units.size), "bootstrap")


def mean_interval(values: Sequence[float]) -> Estimate:
    """The mean over independent units with a 95% interval: BCa bootstrap from
    :data:`BOOTSTRAP_MIN_UNITS` units on, the t interval below (where BCa is too narrow)."""
    units = _units(values)
    return bootstrap_interval(units) if units.size >= BOOTSTRAP_MIN_UNITS else t_interval(units)


def paired_difference(a: Sequence[float], b: Sequence[float]) -> Estimate:
    """The mean of a − b over units measured in both conditions (paired by seed)."""
    left, right = _units(a), _units(b)
    if left.shape != right.shape:
        raise ValueError(f"paired units must match: {left.size} vs {right.size}")
    return mean_interval(left - right)


__all__ = ["CONFIDENCE", "Estimate", "IntervalMethod", "IntervalVerdict", "Rule",
           "bootstrap_interval", "mean_interval", "paired_difference", "t_interval"]
