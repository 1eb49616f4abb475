"""Fault injection, killed jobs: SIGKILL a real ``genlab train`` and ``genlab analyze`` process
mid-run, then rerun.

The rerun's artifacts are byte-identical to an uninterrupted run's, and while the job ran (and
after it was killed) no file was ever visible under a final artifact name unless it was complete.
(tests/test_cli.py covers the same resume in-process; these use real processes and signals.)
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from genlab.cli import main
from genlab.provenance import git_commit
from tests_support import ci_params_text, tool_env

pytestmark = pytest.mark.workflow  # real processes with torch imports: about a minute

RUNS = ("p0-s0", "p0_5-s0")


def _digests(folder: Path) -> dict[str, str]:
    """Final-named files only: dot-files are temporaries and checkpoints."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))
            if p.is_file() and not any(part.startswith(".")
                                       for part in p.relative_to(folder).parts)}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny random_labels study that trains long enough to be killed (no early stop, a
    checkpoint at every evaluation), its dataset and an uninterrupted reference of every stage."""
    base = tmp_path_factory.mktemp("killed")
    raw = yaml.safe_load(ci_params_text())
    study = raw["studies"]["random_labels"]
    study["data"].update(n_train=60, n_test=100, dim=8, n_classes=3)
    study["model"]["hidden"] = [32]
    study["train"].update(batch_size=20, max_steps=1000, stop_at_train_acc=None)
    study["runs"] = {run: study["runs"][run] for run in RUNS}
    raw["studies"] = {"random_labels": study}
    raw["runtime"]["checkpoint_minutes"] = 0
    params = base / "params.yaml"
    params.write_text(yaml.safe_dump(raw))
    common = ["--params", str(params), "--study", "random_labels"]
    ref = base / "reference"
    here = Path.cwd()
    os.chdir(base)  # where the killed jobs run: provenance records the git commit of the cwd
    git_commit.cache_clear()  # (cached per process: another test may have asked elsewhere)
    try:
        assert main(["synthesize", *common, "--out", str(ref / "dataset")]) == 0
        for run in RUNS:
            assert main(["train", *common, "--run", run, "--dataset", str(ref / "dataset"),
                         "--out", str(ref / "runs" / run)]) == 0
        assert main(["analyze", "sharpness", *common, "--dataset", str(ref / "dataset"),
                     "--runs", str(ref / "runs"), "--out", str(ref / "sharpness")]) == 0
    finally:
        os.chdir(here)
        git_commit.cache_clear()
    return {"base": base, "params": params, "ref": ref}


def _kill_when(args: list[str], cwd: Path, ready, watch: Path, reference: dict[str, str]) -> None:
    """Start ``genlab ARGS``, SIGKILL it once ``ready()``; meanwhile every final-named file that
    appears under ``watch`` must already be complete (equal to the reference's)."""
    env = tool_env(cwd) | {"OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(["genlab", *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    try:
        while not ready():
            if proc.poll() is not None:
                pytest.fail(f"the job ended (exit {proc.returncode}) before it could be killed: "
                            f"{proc.stderr.read().decode()[-2000:]}")
            assert time.monotonic() < deadline, "the job never got going"
            for name, digest in _digests(watch).items() if watch.exists() else ():
                assert digest == reference[name], f"{name} was visible before it was complete"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


def test_a_killed_training_job_resumes_to_identical_artifacts(setup) -> None:
    base, params, ref = setup["base"], setup["params"], setup["ref"]
    run, out = RUNS[1], base / "train_killed" / RUNS[1]
    args = ["train", "--params", str(params), "--study", "random_labels", "--run", run,
            "--dataset", str(ref / "dataset"), "--out", str(out)]
    reference = _digests(ref / "runs" / run)
    state = out / ".checkpoint" / "state.json"

    def a_few_checkpoints_in() -> bool:
        try:
            return json.loads(state.read_text())["step"] >= 100
        except (OSError, ValueError, KeyError):
            return False

    _kill_when(args, base, a_few_checkpoints_in, out, reference)
    assert _digests(out) == {}  # killed before the end: no artifact under a final name
    assert json.loads(state.read_text())["step"] < 1000
    proc = subprocess.run(["genlab", *args], cwd=base, env=tool_env(base), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "resuming from the checkpoint" in proc.stderr
    assert _digests(out) == reference
    assert not (out / ".checkpoint").exists()


def test_a_killed_analysis_job_reruns_to_identical_artifacts(setup) -> None:
    base, params, ref = setup["base"], setup["params"], setup["ref"]
    out = base / "analysis_killed"
    args = ["analyze", "sharpness", "--params", str(params), "--study", "random_labels",
            "--dataset", str(ref / "dataset"), "--runs", str(ref / "runs"), "--out", str(out)]
    reference = _digests(ref / "sharpness")
    _kill_when(args, base, lambda: (out / f"{RUNS[0]}.json").exists(), out, reference)
    partial = _digests(out)
    assert partial and partial != reference  # killed between the runs' outputs
    assert all(reference[name] == digest for name, digest in partial.items())
    proc = subprocess.run(["genlab", *args], cwd=base, env=tool_env(base), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _digests(out) == reference
