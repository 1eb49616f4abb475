"""Seed means drawn with their 95% intervals: every report figure of a mean over independent
units shows its uncertainty the way the claims judge it (:func:`genlab.studies.intervals.
t_interval`), so a figure never looks surer than the verdict beside it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from genlab.studies.intervals import t_interval


def units_by_x(rows: Iterable[Mapping[str, Any]], x: str, y: str,
               keep: Callable[[Mapping[str, Any]], bool], scale: float = 1.0
               ) -> dict[float, list[float]]:
    """The ``y`` values (times ``scale``) of the rows ``keep`` selects, grouped by their ``x``: a
    long history table's curve of one condition, one unit (seed) per row at each x."""
    out: dict[float, list[float]] = {}
    for row in rows:
        if keep(row):
            out.setdefault(row[x], []).append(scale * row[y])
    return out


def mean_and_interval(units_by_x: Mapping[float, Sequence[float]]
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """x (ascending, numerically), the mean over units at each x, and its 95% t interval's
    ends (the mean itself where one unit gives no interval); non-finite units are left out."""
    xs, means, lows, highs = [], [], [], []
    for x in sorted(units_by_x, key=float):
        units = [float(u) for u in units_by_x[x] if u is not None and np.isfinite(u)]
        if not units:
            continue
        estimate = t_interval(units)
        low, high = estimate.interval or (estimate.value, estimate.value)
        xs.append(float(x))
        means.append(estimate.value)
        lows.append(low)
        highs.append(high)
    return np.array(xs), np.array(means), np.array(lows), np.array(highs)


def plot_mean_band(ax: Any, units_by_x: Mapping[float, Sequence[float]], *, color: Any,
                   label: str, style: str = "o-", floor: float | None = None,
                   **line: Any) -> None:
    """The mean over units at each x as a line, its 95% t interval as a shaded band; ``label``
    gets the number of units (``(mean ± 95% CI, n = 3)``). ``floor`` clips the band from below
    for a log axis."""
    xs, means, lows, highs = mean_and_interval(units_by_x)
    if not len(xs):
        return
    counts = {len([u for u in units_by_x[x] if u is not None and np.isfinite(u)])
              for x in units_by_x}
    n = f"n = {min(counts)}" if len(counts) == 1 else f"n = {min(counts)}–{max(counts)}"
    if floor is not None:
        means, lows, highs = (np.maximum(a, floor) for a in (means, lows, highs))
    ax.plot(xs, means, style, color=color, label=f"{label} (mean ± 95% CI, {n})", **line)
    ax.fill_between(xs, lows, highs, color=color, alpha=0.2, linewidth=0)


__all__ = ["mean_and_interval", "plot_mean_band"]
