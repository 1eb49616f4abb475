"""Seed means in the figures carry the same 95% interval the claims are judged by."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

from genlab.report.bands import mean_and_interval, plot_mean_band  # noqa: E402


def test_the_band_is_the_t_interval_at_each_x_in_numeric_order() -> None:
    units = {"1000": [0.1, 0.2, 0.3], "250": [1.0, 1.0, 1.3], "4000": [0.05]}
    xs, means, lows, highs = mean_and_interval(units)
    assert xs.tolist() == [250.0, 1000.0, 4000.0]  # not "1000" < "250" < "4000"
    half = stats.t.ppf(0.975, 2) * np.std([0.1, 0.2, 0.3], ddof=1) / np.sqrt(3)
    assert means[1] == pytest.approx(0.2) and lows[1] == pytest.approx(0.2 - half)
    assert highs[1] == pytest.approx(0.2 + half)
    assert lows[2] == highs[2] == means[2] == 0.05  # one unit: no interval, just the point


def test_the_figure_draws_the_mean_and_shades_the_interval_with_n_in_the_label() -> None:
    fig, ax = plt.subplots()
    plot_mean_band(ax, {1: [1.0, 2.0, 3.0], 2: [2.0, 3.0, float("nan"), 4.0]}, color="C0",
                   label="test error")
    (line,) = ax.get_lines()
    assert line.get_label() == "test error (mean ± 95% CI, n = 3)"
    assert line.get_ydata().tolist() == [2.0, 3.0]
    assert len(ax.collections) == 1  # the band
    plt.close(fig)
