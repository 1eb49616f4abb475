"""GPU scheduling through the real Snakefile, on a machine whose torch is made to report GPUs.

No test machine has a GPU, so a ``sitecustomize`` on PYTHONPATH makes torch report two CUDA
devices in the Snakemake process. What is checked is the scheduling the Snakefile sets up: which
rules request ``gpu``, and the cap it registers for local runs. The jobs themselves are not run
on the fake devices (only the params gate, which uses no torch, is executed).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
import yaml

from genlab.workflow.adapter import dvc_jobs
from tests_support import copy_project, run, tool_env

pytestmark = pytest.mark.workflow

FAKE_CUDA = """
import torch
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: {count}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    env = tool_env(tmp_path_factory.mktemp("home"))
    return copy_project(tmp_path_factory.mktemp("gpu"), env), env


def snakemake(project, device: str, fake_devices: int, *args: str, check: bool = True):
    root, env = project
    site = root.parent / f"site{fake_devices}"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(FAKE_CUDA.format(count=fake_devices))
    raw = yaml.safe_load((root / "params.yaml").read_text())
    raw["runtime"]["device"] = device
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return run(["snakemake", *args], root, {**env, "PYTHONPATH": str(site)}, check=check)


def output(proc) -> str:
    return proc.stdout + proc.stderr  # Snakemake logs to stderr, dry-run listings to stdout


def requested_gpus(dry_run_stdout: str) -> dict[str, int]:
    """Rule name -> the gpu resource its jobs request, from a dry run's job listing."""
    out = {}
    for block in re.split(r"\n(?=(?:local)?rule )", dry_run_stdout):
        name = re.match(r"(?:local)?rule (\S+):", block)
        gpu = re.search(r"resources:.*\bgpu=(\d+)", block)
        if name:
            out[name.group(1)] = int(gpu.group(1)) if gpu else None
    return out


def provided_gpus(stdout: str) -> int | None:
    """The gpu cap a (non-dry) run reports, or None when it has none."""
    match = re.search(r"Provided resources:.*\bgpu=\D*(\d+)", stdout)
    return int(match.group(1)) if match else None


def torch_rules(project) -> set[str]:
    """Rules of the stages that run torch (``python -m genlab --stage NAME train|analyze``)."""
    with contextlib.chdir(project[0]):  # DVC names stages relative to the working directory
        jobs = dvc_jobs(".")
    return {job.rule_name for job in jobs if job.cmd.split()[5] in ("train", "analyze")}


def test_on_cuda_torch_rules_request_one_gpu_and_the_rest_none(project) -> None:
    gpus = requested_gpus(output(snakemake(project, "cuda", 2, "-n", "--cores", "4", "-F")))
    on_gpu = torch_rules(project)
    assert on_gpu < set(gpus)
    assert {gpus[r] for r in on_gpu} == {1}
    assert {gpus[r] for r in set(gpus) - on_gpu} == {None}


def test_local_run_caps_gpu_jobs_at_the_device_count(project) -> None:
    out = output(snakemake(project, "cuda", 2, "--cores", "4", "-f", "data/params.checked"))
    assert provided_gpus(out) == 2


def test_resources_on_the_command_line_override_the_cap(project) -> None:
    out = output(snakemake(project, "cuda", 2, "--cores", "4", "--resources", "gpu=1", "-f",
                           "data/params.checked"))
    assert provided_gpus(out) == 1


def test_on_cpu_no_rule_requests_a_gpu_and_there_is_no_cap(project) -> None:
    gpus = requested_gpus(output(snakemake(project, "cpu", 2, "-n", "--cores", "4", "-F")))
    assert {gpus[r] for r in torch_rules(project)} == {0}
    out = output(snakemake(project, "cpu", 2, "--cores", "4", "-f", "data/params.checked"))
    assert provided_gpus(out) is None


def test_cuda_without_a_device_fails_before_any_job(project) -> None:
    root, _ = project
    (root / "data" / "params.checked").unlink(missing_ok=True)
    proc = snakemake(project, "cuda", 0, "--cores", "4", "data/params.checked", check=False)
    assert proc.returncode != 0
    assert "runtime.device is 'cuda' but torch sees no CUDA device" in output(proc)
    assert not (root / "data" / "params.checked").exists()
