"""The post-hoc analyses' report figures: axes that fit the data they show."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pyarrow as pa  # noqa: E402

from genlab.report.analyses import sharpness_figure  # noqa: E402


def _density(runs: dict[str, float]) -> pa.Table:
    rows = [{"run": run, "eigenvalue": top * i / 10, "density": 1.0 / (1 + i)}
            for run, top in runs.items() for i in range(11)]
    return pa.Table.from_pylist(rows)


def test_a_threshold_far_beyond_the_spectra_is_written_not_drawn() -> None:
    """random_labels' threshold (2 + 2β)/η = 76 against spectra up to ~7 squeezed every density
    into a tenth of the axis: the axis fits the spectra and names the threshold instead."""
    records = {"p0": {"status": "done", "threshold": 76.0},
               "p1": {"status": "done", "threshold": 76.0}}
    fig = sharpness_figure(records, _density({"p0": 7.0, "p1": 5.0}), "hessian")
    ax = fig.axes[0]
    low, high = ax.get_xlim()
    assert high < 8 and low < 0.5
    assert not [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    notes = [t.get_text() for t in ax.texts]
    assert notes == ["threshold beyond the axis → p0: 76; p1: 76"]


def test_a_threshold_near_the_spectra_is_drawn_inside_the_axis() -> None:
    records = {"p0": {"status": "done", "threshold": 9.0}}
    fig = sharpness_figure(records, _density({"p0": 7.0}), "hessian")
    ax = fig.axes[0]
    assert ax.get_xlim()[1] > 9.0 and not ax.texts
    assert [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == ":"] == [9.0]
