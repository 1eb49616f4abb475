"""The CSV exports behind DVC's ``plots:``: a study's PlotSpec drawn from its summary table."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pytest

from genlab.stages.aggregate import write_plots
from genlab.studies import STUDIES
from genlab.studies.base import PlotSpec, plot_table

SHARPNESS = PlotSpec("sharpness", x="step", y="lambda_max", title="λ_max per step")
LOSS = PlotSpec("train_loss", x="step", y="train_loss", title="loss", template="linear")


def summary() -> pa.Table:
    """Two runs' stacked histories; λ_max is logged only on some steps (null), once NaN."""
    return pa.table({
        "step": [0, 10, 20, 0, 10, 20],
        "train_loss": [1.5, 0.25, 0.125, 2.0, 0.5, 1e-7],
        "lambda_max": [3.0, None, 19.75, 4.5, math.nan, 20.0],
        "lr": [0.1] * 3 + [0.2] * 3,
        "run": ["lr0_1-s0"] * 3 + ["lr0_2-s0"] * 3,
    })


def test_each_plot_is_written_with_run_x_y_in_table_order(tmp_path: Path) -> None:
    write_plots((SHARPNESS, LOSS), summary(), tmp_path)
    # the null and the NaN λ_max rows are gone: DVC's renderer cannot draw an empty cell
    assert (tmp_path / "plots" / "sharpness.csv").read_text() == (
        "run,step,lambda_max\n"
        "lr0_1-s0,0,3.0\n"
        "lr0_1-s0,20,19.75\n"
        "lr0_2-s0,0,4.5\n"
        "lr0_2-s0,20,20.0\n")
    assert (tmp_path / "plots" / "train_loss.csv").read_text() == (
        "run,step,train_loss\n"
        "lr0_1-s0,0,1.5\n"
        "lr0_1-s0,10,0.25\n"
        "lr0_1-s0,20,0.125\n"
        "lr0_2-s0,0,2.0\n"
        "lr0_2-s0,10,0.5\n"
        "lr0_2-s0,20,1e-07\n")
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "sharpness.csv", "train_loss.csv"]  # no temporary file left behind


def test_no_plots_writes_nothing(tmp_path: Path) -> None:
    write_plots((), summary(), tmp_path)
    assert not (tmp_path / "plots").exists()


def test_a_missing_column_is_named() -> None:
    with pytest.raises(KeyError, match="nc1"):
        plot_table(PlotSpec("nc1", x="step", y="nc1", title="NC1"), summary())


def test_plot_names_are_unique_slugs_per_study() -> None:
    for name, spec in STUDIES.items():
        names = [p.name for p in spec.plots]
        assert len(names) == len(set(names)), name
        assert all(n.replace("_", "").isalnum() and n.islower() for n in names), name
