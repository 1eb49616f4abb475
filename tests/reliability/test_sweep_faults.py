"""Fault injection across a sweep, through the real engine (Snakemake on a copy of the project):
one run of the sweep diverges, and the schedule (``--cores 1`` vs ``--cores 2``, two clean
workspaces) must not change a byte of any artifact.

Both use the ``eos_gd`` study of the ci preset with one extra run at η = 1000, which overflows
within a few steps: its targets (training, both post-hoc analyses, the aggregate) are a few
minutes of jobs, where the whole ci pipeline would take many.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from genlab.studies.eos_gd.settings import EoSRun, run_id
from tests_support import copy_project, run, tool_env

pytestmark = pytest.mark.workflow

DIVERGING = run_id(EoSRun(lr=1000.0, seed=0))
TARGETS = ["data/eos_gd/summary.json"]  # pulls in training, both analyses and the aggregate
# Same commit sha in every copy: the sidecars record it, and it must not be what differs.
FIXED_DATES = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00",
               "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00"}


def _workspace(dest: Path, cores: int) -> Path:
    env = tool_env(dest / "home") | FIXED_DATES
    root = copy_project(dest / "project", env)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["studies"]["eos_gd"]["runs"][DIVERGING] = {"lr": 1000.0, "seed": 0}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run(["git", "commit", "-qam", "a diverging run"], root, env)
    run(["snakemake", "--cores", str(cores), *TARGETS], root, env, timeout=1800)
    run(["python", "-m", "genlab", "report", "--params", "params.yaml",
         "--studies", "data/eos_gd", "--out", "reports"], root, env)
    return root


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    return {cores: _workspace(tmp_path_factory.mktemp(f"cores{cores}"), cores)
            for cores in (1, 2)}


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_diverged_run_is_recorded_skipped_and_reported(workspaces: dict[int, Path]) -> None:
    root = workspaces[2]
    metrics = json.loads((root / f"data/eos_gd/runs/{DIVERGING}/metrics.json").read_text())
    assert metrics["status"] == "diverged"
    # the rest of the sweep trained
    for other in ("lr0_2-s0", "lr0_3-s0"):
        status = json.loads((root / f"data/eos_gd/runs/{other}/metrics.json").read_text())
        assert status["status"] != "diverged", other
    for analysis in ("sharpness", "intrinsic_dim"):
        result = json.loads((root / f"data/eos_gd/analyses/{analysis}/{DIVERGING}.json")
                            .read_text())
        assert result["status"] == "skipped" and "diverged" in result["reason"], result
    summary = json.loads((root / "data/eos_gd/summary.json").read_text())
    assert DIVERGING in json.dumps(summary)
    html = (root / "reports/index.html").read_text()
    assert DIVERGING in html and "diverged" in html


def test_artifacts_do_not_depend_on_the_schedule(workspaces: dict[int, Path]) -> None:
    one, two = (_digests(workspaces[c] / "data") for c in (1, 2))
    assert one.keys() == two.keys()
    differ = sorted(name for name in one if one[name] != two[name])
    assert not differ, differ
    assert len(one) > 20  # runs, analyses, aggregate: a real comparison, not an empty one
