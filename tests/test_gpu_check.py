"""benchmarks/gpu_check.py, tested on the CPU (--device cpu): the quick steps end to end, the
refusal without CUDA, timeouts that stop a whole process tree, and the file list of a project
copy without git. The workflow steps (minutes) are not run here."""

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

ROOT = Path(__file__).resolve().parents[1]
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


def test_quick_steps_on_cpu_record_measured_numbers(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    proc = run_check("--device", "cpu", "--steps", "facts", "ensemble", "sharpness",
                     "--budget-s", "300", "--out", str(out), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all steps ok" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check.json"]  # no temporary left
    record = json.loads(out.read_text())
    assert record["device"] == "cpu" and record["wall_s"] > 0
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

    ensemble = steps["ensemble"]
    assert "--quick" in ensemble["command"] and "--device cpu" in ensemble["command"]
    rows = ensemble["parsed"]["rows"]
    assert {(r["K"], r["method"]) for r in rows} == {(1, "bmm"), (1, "vmap"), (4, "bmm"),
                                                     (4, "vmap")}
    for row in rows:
        assert row["loop_us_per_model_step"] > 0 and row["vectorised_us_per_model_step"] > 0
        assert row["speed_up"] > 0 and row["fraction_of_matmul"] > 0
    assert ensemble["parsed"]["matmul"][0]["gflops"] > 0
    assert "device cpu" in ensemble["output"]

    sharpness = steps["sharpness"]["parsed"]
    assert set(sharpness["hvps_power_over_lanczos"]) == {"untrained", "trained", "+10 steps"}
    assert all(r > 0 for r in sharpness["hvps_power_over_lanczos"].values())
    lanczos = [r for r in sharpness["section1"] if r["method"] == "Lanczos"]
    assert len(lanczos) == 3 and all(r["hvps"] >= 1 and r["seconds"] > 0 for r in lanczos)
    assert len(sharpness["product_costs"]) == 4
    assert all(r["ms"] > 0 for r in sharpness["product_costs"])


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


def test_without_git_the_copy_lists_what_git_lists() -> None:
    gpu_check = load_module()
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    want = {f for f in listed if f and (ROOT / f).is_file()}
    assert set(gpu_check.walked_files()) == want


def test_the_parsers_read_what_the_benchmarks_print() -> None:
    gpu_check = load_module()
    ensemble = gpu_check.parse_ensemble(
        "\n1 thread(s): 512^2 float32 matmul 67.5 GFLOP/s; times in microseconds per model-step\n"
        "threads    K method   loop us    vec us speed-up vec GFLOP/s of matmul\n"
        "      1    4    bmm    1386.9     719.6     1.9x       16.97     25.1%\n")
    assert ensemble == {"rows": [{"threads": 1, "K": 4, "method": "bmm",
                                  "loop_us_per_model_step": 1386.9,
                                  "vectorised_us_per_model_step": 719.6, "speed_up": 1.9,
                                  "vectorised_gflops": 16.97, "fraction_of_matmul": 0.251}],
                        "matmul": [{"threads": 1, "size": 512, "gflops": 67.5}]}
