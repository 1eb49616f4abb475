"""Stage fingerprints and the reconcile step on a two-stage toy dvc.yaml (no engine runs here)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from genlab.workflow.adapter import dvc_jobs, snakemake_inputs
from genlab.workflow.fingerprint import Hasher, inputs_of, judge, write_stamp
from genlab.workflow.sync import reconcile, trigger_path

DVC_YAML = """\
stages:
  make:
    foreach: ${runs}
    do:
      cmd: python -m genlab --stage make@${key} make ${key}
      deps: [data/params.checked, src/code.py]
      params:
        - runs.${key}
      outs:
        - data/made/${key}.txt
        - data/stamps/make@${key}.json
  use:
    cmd: python -m genlab --stage use use
    deps: [data/made, src/code.py]
    params: [scale]
    outs: [data/used, data/stamps/use.json]
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write(tmp_path / "dvc.yaml", DVC_YAML)
    write(tmp_path / "params.yaml", "scale: 1\nruns:\n  a: {x: 1}\n  b: {x: 2}\n")
    write(tmp_path / "src/code.py", "X = 1\n")
    return tmp_path


def run_stage(root: Path, stage: str) -> None:
    """What a stage command does: read its inputs, write its outputs, stamp them."""
    job = next(j for j in dvc_jobs(root) if j.stage == stage)
    inputs = inputs_of(job, Hasher(root))
    if stage.startswith("make@"):
        write(root / f"data/made/{stage.split('@')[1]}.txt", json.dumps(job.params))
    else:
        made = sorted((root / "data/made").iterdir())
        write(root / "data/used/all.txt", "".join(p.read_text() for p in made))
    write_stamp(root, job, inputs)


def run_all(root: Path) -> None:
    for stage in ("make@a", "make@b", "use"):
        run_stage(root, stage)


def stale(root: Path) -> dict[str, str]:
    return {s: v.reason for s, v in judge(root).items() if not v.current}


def test_foreach_items_are_resolved_with_their_params(root: Path) -> None:
    jobs = {j.stage: j for j in dvc_jobs(root)}
    assert list(jobs) == ["make@a", "make@b", "use"]
    assert jobs["make@b"].params == {"runs.b": {"x": 2}}
    assert jobs["make@b"].outs == ("data/made/b.txt", "data/stamps/make@b.json")


def test_a_stage_is_current_exactly_when_its_stamp_matches(root: Path) -> None:
    assert set(stale(root)) == {"make@a", "make@b", "use"}  # never run
    run_all(root)
    assert stale(root) == {}
    # a params edit: that stage only (what follows reruns once its input changes)
    write(root / "params.yaml", "scale: 1\nruns:\n  a: {x: 1}\n  b: {x: 3}\n")
    assert stale(root) == {"make@b": "param runs.b changed ({'x': 2} -> {'x': 3})"}
    run_stage(root, "make@b")
    assert stale(root) == {"use": "input data/made changed"}
    run_stage(root, "use")
    assert stale(root) == {}


def test_code_outputs_and_mtimes(root: Path) -> None:
    run_all(root)
    code = root / "src/code.py"
    os.utime(code, ns=(10**18, 10**18))  # touched, same bytes: still current
    assert stale(root) == {}
    code.write_text("X = 1  # a comment\n")
    assert set(stale(root)) == {"make@a", "make@b", "use"}
    run_all(root)
    (root / "data/used/all.txt").write_text("edited by hand")
    assert stale(root) == {"use": "output data/used/all.txt was changed after the stage wrote it"}
    (root / "data/used/all.txt").unlink()
    assert stale(root) == {"use": "output data/used/all.txt is missing"}


def test_reconcile_sets_what_snakemake_reads(root: Path) -> None:
    run_all(root)
    jobs = dvc_jobs(root)
    # outputs older than their inputs, as a checkout leaves them: made newer, not rerun
    for p in (root / "data").rglob("*.txt"):
        os.utime(p, ns=(1, 1))
    reconcile(root, jobs)
    for job in jobs:
        trigger = root / trigger_path(job)
        assert trigger.stat().st_mtime_ns == 0
        # the inputs Snakemake compares: source files are judged by the fingerprint alone
        newest_input = max([(root / d).stat().st_mtime_ns
                            for d in snakemake_inputs(job, jobs, root) if (root / d).is_file()],
                           default=0)
        assert all((root / o).stat().st_mtime_ns > newest_input for o in job.outs
                   if (root / o).is_file())
    # a stale stage: its trigger gets the reason and a time newer than its outputs
    write(root / "params.yaml", "scale: 2\nruns:\n  a: {x: 1}\n  b: {x: 2}\n")
    verdicts = reconcile(root, jobs=dvc_jobs(root))
    assert [s for s, v in verdicts.items() if not v.current] == ["use"]
    use = next(j for j in dvc_jobs(root) if j.stage == "use")
    trigger = root / trigger_path(use)
    assert "param scale changed" in trigger.read_text()
    assert trigger.stat().st_mtime_ns > (root / "data/used/all.txt").stat().st_mtime_ns


def test_stamps_hold_content_only_and_the_mtime_cache_stays_in_the_workspace(
        root: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The same inputs give byte-identical stamps in another workspace at other times (they are
    DVC outputs: dvc.lock must not depend on when or where a stage ran), and an edit that keeps
    a file's size is still caught once its mtime moves."""
    run_all(root)
    other = tmp_path_factory.mktemp("other")
    for name in ("dvc.yaml", "params.yaml", "src/code.py"):
        write(other / name, (root / name).read_text())
    os.utime(other / "src/code.py", ns=(5 * 10**17, 5 * 10**17))
    run_all(other)
    for stage in ("make@a", "make@b", "use"):
        ours = (root / f"data/stamps/{stage}.json").read_bytes()
        assert ours == (other / f"data/stamps/{stage}.json").read_bytes()
        assert b"mtime" not in ours
        cache = json.loads((root / f".genlab/hashes/{stage}.json").read_text())
        assert all("mtime_ns" in rec for rec in cache.values())
    made = root / "data/made/a.txt"
    made.write_text(made.read_text().replace("1", "7"))  # same size, new mtime
    assert stale(root) == {"make@a": "output data/made/a.txt was changed after the stage wrote it",
                           "use": "input data/made changed"}


def test_a_snapshot_looks_at_each_path_once_and_only_while_open(root: Path) -> None:
    """judge() asks for the same source files' digests once per stage; within its snapshot each
    path is looked at once, and a later call sees the file as it is then."""
    run_all(root)
    hasher = Hasher.load(root)
    code = root / "src/code.py"
    with hasher.snapshot():
        before = hasher.digest("src/code.py")
        code.write_text("X = 2  # edited while judging\n")
        assert hasher.digest("src/code.py") == before
    assert hasher.digest("src/code.py") not in (None, before)
    assert set(judge(root, hasher=hasher)) == {"make@a", "make@b", "use"}
    assert set(stale(root)) == {"make@a", "make@b", "use"}
