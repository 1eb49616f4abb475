"""Helpers for the report tests: a report workspace built in a second (the ci preset's params, one
study with a faked summary whose figure is a small matplotlib plot, the others not run yet, and a
folder of stage logs)."""

from __future__ import annotations

import types
from pathlib import Path

import pyarrow as pa
import pytest

from genlab.io import write_json, write_parquet
from tests_support import ci_params_text

PRESENT = "random_labels"
CLAIM = {"study": PRESENT, "key": "fits_random_labels", "claim": "Networks fit random labels.",
         "citation": "Zhang et al. 2017",
         "criterion": "train accuracy ≥ 0.99 at p = 1", "status": "reproduced",
         "numbers": {"train_acc": 1.0, "test_acc": 0.31}}
LOG = ("2026-12-02 10:00:00,000 INFO genlab: trained 4 run(s) of random_labels in 2.0s\n"
       "2026-12-02 10:00:03,500 INFO genlab: genlab train: wall time 3.61 s\n")
OLD_LOG = ("2026-12-02 09:59:00,000 INFO genlab: synthesized random_labels\n"
           "2026-12-02 09:59:01,250 INFO genlab: done\n")


def _figures(data, table):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(table["step"].to_pylist(), table["train_acc"].to_pylist(), marker="o")
    ax.set_xlabel("step")
    ax.set_ylabel("train accuracy")
    return [("Train accuracy of the fake run", fig)]


def _tables(data):
    return [("Ours beside the paper's", ("model", "paper (%)", "ours (%)"),
             [{"model": "mlp", "paper (%)": 68.0, "ours (%)": 66.123456}])]


@pytest.fixture
def report_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path with params.yaml, data/<study>/ for every declared study (only PRESENT's holds a
    summary) and logs/; returns the workspace root."""
    import genlab.studies

    # genlab.report.collect imports the loader of a study's figures when it runs
    real, fake = genlab.studies.load_figures, types.SimpleNamespace(figures=_figures,
                                                                   tables=_tables)
    monkeypatch.setattr(genlab.studies, "load_figures",
                        lambda name: fake if name == PRESENT else real(name))
    (tmp_path / "params.yaml").write_text(ci_params_text())
    study = tmp_path / "data" / PRESENT
    write_json(study / "summary.json", {
        "claims": [CLAIM], "runs": {"p1-s0": {"status": "done", "train_acc": 1.0}},
        "provenance": {"settings_sha256": "a" * 64, "device": "cpu", "git_commit": "abc123",
                       "genlab_version": "0.1", "versions": {"torch": "2.x"}}})
    write_parquet(study / "summary.parquet",
                  pa.table({"run": ["p1-s0"] * 3, "step": [0, 10, 20],
                            "train_acc": [0.1, 0.6, 1.0]}))
    (tmp_path / "logs" / PRESENT).mkdir(parents=True)
    (tmp_path / "logs" / PRESENT / "train.log").write_text(LOG)
    (tmp_path / "logs" / PRESENT / "synthesize.log").write_text(OLD_LOG)
    return tmp_path


def render_workspace(root: Path) -> Path:
    """`genlab report` over every declared study's folder, as dvc.yaml calls it."""
    from genlab.cli import main
    from genlab.config import load_params

    studies = [str(root / "data" / n) for n in load_params(root / "params.yaml").declared_studies()]
    assert main(["report", "--params", str(root / "params.yaml"), "--studies", *studies,
                 "--out", str(root / "reports")]) == 0
    return root / "reports" / "index.html"
