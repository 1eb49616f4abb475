"""benchmarks/gpu_check.py, tested on the CPU (--device cpu): the quick steps end to end (the
benchmarks' figures read from their --json), the refusal without CUDA, timeouts that stop a whole
process tree, the file list of a project copy (git's, with and without this checkout's .git) and
the params file of each workflow step. The workflow steps themselves (minutes) are not run here;
on a machine with CUDA, the quick steps run once more on the GPU (marked gpu)."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def load_module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_check(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def check_quick_steps(tmp_path: Path, device: str) -> None:
    out = tmp_path / "check.json"
    proc = run_check("--device", device, "--steps", "facts", "ensemble", "sharpness",
                     "--budget-s", "300", "--out", str(out), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all steps ok" in proc.stdout
    assert "speed-up (loop / vectorised): K=1 bmm" in proc.stdout
    assert "HVPs power / Lanczos: untrained " in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check.json"]  # no temporary left
    record = json.loads(out.read_text())
    assert record["device"] == device and record["wall_s"] > 0
    dt.datetime.fromisoformat(record["started"])
    steps = record["steps"]
    assert list(steps) == ["facts", "ensemble", "sharpness"]
    for name, step in steps.items():
        assert step["status"] == "ok", (name, step)
        assert 0 < step["wall_s"] <= step["timeout_s"]

    facts = steps["facts"]
    assert facts["torch"]["torch"] == torch.__version__
    assert facts["cpu_count"] >= 1 and facts["python"].count(".") == 2
    assert facts["torch"]["genlab"]["version"]
    dt.datetime.fromisoformat(facts["date_utc"])

    if device == "cuda":
        assert facts["torch"]["cuda_kernel_ran"] is True

    ensemble = steps["ensemble"]
    for flag in ("--quick", f"--device {device}", "--json "):
        assert flag in ensemble["command"]
    results = ensemble["results"]  # the benchmark's own --json, not a parse of its table
    assert results["benchmark"] == "train_ensemble" and results["device"].startswith(device)
    rows = results["rows"]
    assert {(r["K"], r["method"]) for r in rows} == {(1, "bmm"), (1, "vmap"), (4, "bmm"),
                                                     (4, "vmap")}
    for row in rows:
        assert row["loop_us_per_model_step"] > 0 and row["vectorised_us_per_model_step"] > 0
        assert row["speed_up"] > 0 and row["fraction_of_matmul"] > 0
    assert results["matmul"][0]["gflop_per_s"] > 0
    assert f"device {device}" in ensemble["output"]

    sharpness = steps["sharpness"]["results"]
    assert sharpness["device"].startswith(device)
    assert set(sharpness["hvps_power_over_lanczos"]) == {"untrained", "trained", "+10 steps"}
    assert all(r > 0 for r in sharpness["hvps_power_over_lanczos"].values())
    lanczos = [r for r in sharpness["to_target"] if r["method"] == "Lanczos"]
    assert len(lanczos) == 3 and all(r["hvps_median"] >= 1 and r["median_s"] > 0
                                     for r in lanczos)
    # two gradients and the three HVP operators side by side
    assert len(sharpness["product_costs"]) == 5
    assert all(r["ms"] > 0 for r in sharpness["product_costs"])


def test_quick_steps_on_cpu_record_measured_numbers(tmp_path: Path) -> None:
    check_quick_steps(tmp_path, "cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_quick_steps_on_the_gpu_record_measured_numbers(tmp_path: Path) -> None:
    check_quick_steps(tmp_path, "cuda")


def test_a_benchmark_that_fails_its_checks_or_writes_no_json_fails_the_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gpu_check = load_module()
    args = gpu_check.argparse.Namespace(device="cpu", full_benchmarks=False)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    commands = []

    def fake_run_timed(cmd, cwd, env, timeout, log):
        commands.append(cmd)
        path = Path(cmd[cmd.index("--json") + 1])
        if "sharpness.py" in cmd[1]:  # a ratio that was not reached: null in its JSON
            path.write_text(json.dumps({"hvps_power_over_lanczos": {"trained": None},
                                        "to_target": [{"hvps_median": 3}],
                                        "product_costs": [{"ms": 1.0}]}))
        return 0, 0.5, "printed"  # train_ensemble.py: exits 0 but writes nothing

    monkeypatch.setattr(gpu_check, "run_timed", fake_run_timed)
    ensemble = gpu_check.step_ensemble(args, 30, env, tmp_path)
    assert ensemble["status"] == "failed" and "--json" in ensemble["error"]
    sharpness = gpu_check.step_sharpness(args, 30, env, tmp_path)
    assert sharpness["status"] == "failed" and sharpness["results"]["to_target"]
    assert "HVPs power / Lanczos: trained -" in gpu_check.summary_line("sharpness", sharpness)
    assert [c[1:] for c in commands] == [
        [f"benchmarks/{script}", "--device", "cpu", "--json", str(tmp_path / f"{stem}.json"),
         "--quick"] for script, stem in (("train_ensemble.py", "train_ensemble"),
                                         ("sharpness.py", "sharpness"))]


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is present: nothing to refuse")
def test_cuda_without_cuda_exits_2_within_seconds_naming_cuda(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    start = time.monotonic()
    proc = run_check("--device", "cuda", "--out", str(out), timeout=120)
    elapsed = time.monotonic() - start
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert elapsed < 60  # torch, genlab, Snakemake and DVC imported once: seconds
    assert "CUDA" in proc.stderr and "torch.cuda.is_available() is False" in proc.stderr
    record = json.loads(out.read_text())
    assert any("CUDA" in p for p in record["prerequisites_missing"])
    assert {s["status"] for s in record["steps"].values()} == {"skipped"}


def test_a_step_without_enough_budget_is_skipped_and_fails_the_run(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    proc = run_check("--device", "cpu", "--steps", "facts", "--budget-s", "8", "--out",
                     str(out), timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    step = json.loads(out.read_text())["steps"]["facts"]
    assert step["status"] == "skipped" and "budget" in step["reason"]


def gone(pid: int) -> bool:
    """Whether the process has ended (a zombie counts: it is waiting to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_timeout_stops_the_whole_process_tree(tmp_path: Path) -> None:
    """Even a grandchild in a session of its own (as a job runner may start its jobs)."""
    gpu_check = load_module()
    pid_file = tmp_path / "child.pid"
    setsid = "setsid " if shutil.which("setsid") else ""
    start = time.monotonic()
    rc, wall, out = gpu_check.run_timed(
        ["bash", "-c", f"echo started; {setsid}sleep 60 & echo $! > {pid_file}; wait"],
        tmp_path, dict(os.environ), timeout=1.5, log=tmp_path / "log")
    assert rc is None and 1.5 <= wall < 15 and time.monotonic() - start < 15
    assert out.startswith("started")
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5  # the orphaned sleep is reaped by init once killed
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(pid), "the grandchild survived the timeout"


def test_run_timed_reports_the_exit_code_and_output(tmp_path: Path) -> None:
    gpu_check = load_module()
    rc, wall, out = gpu_check.run_timed(["bash", "-c", "echo out; echo err >&2; exit 3"],
                                        tmp_path, dict(os.environ), timeout=30,
                                        log=tmp_path / "log")
    assert rc == 3 and 0 < wall < 30 and out.split() == ["out", "err"]


def git_listed() -> set[str]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    return {f for f in listed if f and (ROOT / f).is_file()}


def test_the_copy_lists_what_git_lists() -> None:
    files, how = load_module().project_files()
    assert set(files) == git_listed() and how == "git ls-files -co --exclude-standard"
    assert "benchmarks/gpu_check.py" in files and not any(f.startswith(".venv/") for f in files)


def test_without_this_checkouts_git_the_copy_lists_what_git_lists(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No usable .git (GIT_DIR pointing nowhere stands for a copy of the working tree without
    one): git's own ignore rules, through an empty repository, give the same list."""
    want = git_listed()
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "no-such-repository"))
    files, how = load_module().project_files()
    assert set(files) == want and "empty repository" in how


def test_git_ignore_rules_apply_without_a_repository(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """What a hand-written matcher got wrong or left out (negation, anchoring, nested
    .gitignore files, directory-only patterns) is git's to decide."""
    (tmp_path / ".gitignore").write_text("*.log\n!keep.log\n/build/\ncache/\n")
    (tmp_path / "sub" / "build").mkdir(parents=True)
    (tmp_path / "sub" / "cache").mkdir()
    (tmp_path / "build").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("local.txt\n")
    for rel in ("a.py", "x.log", "keep.log", "build/out.o", "sub/build/kept.o",
                "sub/cache/gone", "sub/local.txt", "sub/b.py", "cache"):
        (tmp_path / rel).write_text(rel)
    gpu_check = load_module()
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # no repository above
    files, how = gpu_check.project_files()
    assert "empty repository" in how
    assert sorted(files) == [".gitignore", "a.py", "cache", "keep.log", "sub/.gitignore",
                             "sub/b.py", "sub/build/kept.o"]


def test_the_workflow_steps_params_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """ci_workflow runs genlab.presets.preset_text("ci", ROOT); default_wall params.yaml."""
    gpu_check = load_module()
    assert gpu_check.params_text("params.yaml") == (ROOT / "params.yaml").read_text()
    calls = []

    def preset_text(name: str, root: Path) -> str:
        calls.append((name, root))
        return "scale: ci\n"

    presets = pytest.importorskip("genlab.presets")
    monkeypatch.setattr(presets, "preset_text", preset_text)
    assert gpu_check.params_text("ci") == "scale: ci\n" and calls == [("ci", ROOT)]


def test_the_ci_copy_is_the_ci_preset_on_the_device_committed(tmp_path: Path) -> None:
    """What ci_workflow runs snakemake in (a second): git's file list, the merged ci preset with
    runtime.device set, valid, all committed."""
    import yaml

    from genlab.config import load_params

    gpu_check = load_module()
    record = gpu_check.copy_project(tmp_path, "ci", "cpu", dict(os.environ))
    assert record["scale"] == "ci" and record["copied_by"] == "git ls-files -co --exclude-standard"
    assert (tmp_path / "Snakefile").is_file() and (tmp_path / "src/genlab/presets.py").is_file()
    assert not (tmp_path / ".venv").exists()
    assert record["runtime"]["device"] == "cpu"
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    want = yaml.safe_load(gpu_check.params_text("ci"))
    want["runtime"]["device"] = "cpu"
    assert params == want
    assert load_params(tmp_path / "params.yaml").runtime.device == "cpu"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path, capture_output=True,
                            text=True, check=True).stdout
    assert status == ""
