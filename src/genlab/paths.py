"""Where artifacts live, relative to the workspace root. The one definition of the layout.

dvc.yaml spells the same layout in its stage templates; tests/workflow check the two agree.
"""

from __future__ import annotations

from pathlib import PurePosixPath

DATA = PurePosixPath("data")
REPORTS = PurePosixPath("reports")
LOGS = PurePosixPath("logs")
SRC = PurePosixPath("src")
"""Where the genlab package's source lives (each stage's code dependencies, as dvc.yaml names
them)."""
CODE_DIGESTS = DATA / "code"
"""One digest per genlab source file and, under ``closure/``, one per module's import closure
(genlab.workflow.code_digest): the closure digests are what the stages depend on in place of the
sources, so that a comment reruns nothing."""
GATE_STAMP = DATA / "params.checked"
"""The params gate's output: params.yaml was checked (every stage waits on it in DVC)."""
STAMPS = DATA / "stamps"
"""Each stage's fingerprint, ``<stage>.json`` (genlab.workflow.fingerprint)."""


def stamp(stage: str) -> PurePosixPath:
    """Where stage ``stage`` (its dvc.yaml address, ``name@key`` for a foreach item) records
    the inputs its outputs were computed from."""
    return STAMPS / f"{stage}.json"


def study_dir(study: str) -> PurePosixPath:
    return DATA / study


def dataset_dir(study: str) -> PurePosixPath:
    return study_dir(study) / "dataset"


def runs_dir(study: str) -> PurePosixPath:
    return study_dir(study) / "runs"


def run_dir(study: str, run: str) -> PurePosixPath:
    return runs_dir(study) / run


def analyses_dir(study: str) -> PurePosixPath:
    return study_dir(study) / "analyses"


def analysis_dir(study: str, analysis: str) -> PurePosixPath:
    """One post-hoc analysis of every run: <run>.json and <run>_<table>.parquet inside."""
    return analyses_dir(study) / analysis


DRAWS_INFO = "draws.json"
DATASET_FILES = ("train.parquet", "test.parquet", DRAWS_INFO)
"""One seed's data draws (``<dataset>/s<seed>/``, :mod:`genlab.data.draws`)."""
DATASET_PROVENANCE = "provenance.json"  # a seed's synthesize stage's, in its folder


def seed_folder(seed: int | str) -> str:
    """The folder, below a study's dataset folder, of every data draw of ``seed``."""
    return f"s{seed}"


def draw_files(study: str, seed: int | str) -> list[str]:
    """The files of one seed's draws (``seed`` may be a dvc.yaml template, ``${item.seed}``)."""
    return [str(dataset_dir(study) / seed_folder(seed) / f) for f in DATASET_FILES]
RUN_FILES = ("model.safetensors", "model.json", "history.parquet", "metrics.json")
SUMMARY_FILES = ("summary.json", "summary.parquet")
REPORT_FILES = ("index.html", "claims.json", "metrics.json")
METRICS = "metrics"
"""A study's DVC metrics folder, ``data/<study>/metrics/`` (genlab.report.metrics)."""
