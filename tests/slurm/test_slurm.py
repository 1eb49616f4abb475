"""The workflow through ``snakemake --profile workflow/profiles/slurm`` on a real SLURM cluster.

A one-node cluster on localhost (conftest.py, slurm_cluster.py) runs one study of the ci preset,
``double_descent`` (the params gate, synthesize, a train stage per feature draw, aggregate), each
job submitted by the executor plugin with ``sbatch``. Its outputs must be the bytes a local
``snakemake`` run of the same targets writes, every job must be in SLURM's accounting (``sacct``)
under its rule's name, and a job that fails must fail its workflow, naming its SLURM job. With
``runtime.device: cuda``, the torch stages (and only they) must be given a GPU by SLURM: the
node has two fake ones (device files), so the job is allocated one and then finds no CUDA.

The four runs go at once, each in its own copy of one project commit: the plugin polls job
states at growing intervals (1, 11, 21 ... s after the last change), so a SLURM run mostly
waits. Every Snakemake run is under ``timeout -s KILL``: when the plugin loses track of its jobs
it waits forever and ignores SIGTERM (docs/slurm.md).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from slurm_cluster import ACCOUNT, PARTITION, Cluster

from tests_support import copy_project, tool_env

pytestmark = pytest.mark.slurm

# the params gate as well: the closing `dvc commit` needs its stamp, a dependency of every stage
TARGETS = ["data/params.checked", "data/double_descent/summary.json"]
RULES = {"check_params", "double_descent_synthesize_s0", "double_descent_synthesize_s1",
         "double_descent_train_s0", "double_descent_train_s1", "double_descent_aggregate"}
LIMIT_S = 300  # per Snakemake run; a hang is killed, never waited out
# the user profile's placeholders replaced, and status polling fast enough for seconds-long jobs
SLURM_ARGS = ["--profile", "workflow/profiles/slurm",
              "--default-resources", f"slurm_account={ACCOUNT!r}",
              f"slurm_partition={PARTITION!r}", "mem_mb=1000", "runtime=10",
              "--slurm-init-seconds-before-status-checks", "1",
              "--seconds-between-status-checks", "2", "--latency-wait", "5"]
CUDA_TARGET = "data/double_descent/runs/s0/model.json"  # synthesize (CPU), then train (torch)
SUBMITTED = re.compile(r"Job \d+ has been submitted with SLURM jobid (\d+)")

BROKEN_RULE = '''

rule broken_on_purpose:
    output:
        "data/broken.txt",
    log:
        "logs/broken.log",
    shell:
        "echo 'failing on purpose' > {log}; exit 3"
'''


class Run:
    """``snakemake ARGS`` started in the background, its output in a file."""

    def __init__(self, project: Path, env: dict[str, str], *args: str) -> None:
        self.project, self.log = project, project.with_suffix(".log")
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                ["timeout", "-s", "KILL", str(LIMIT_S), "snakemake", *args], cwd=project,
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait(self) -> tuple[int, str]:
        rc = self.proc.wait(timeout=LIMIT_S + 30)
        return rc, self.log.read_text()


def on_cuda(project: Path) -> Path:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["runtime"]["device"] = "cuda"
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return project


def digest(root: Path) -> dict[str, str]:
    """What a run computed: every file under data/, and dvc.lock (the run ends with dvc commit).
    Logs and .snakemake/ hold timings and executor records, which legitimately differ."""
    files = [p for p in (root / "data").rglob("*") if p.is_file()] + [root / "dvc.lock"]
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(files)}


def sacct(cluster: Cluster, job_ids: list[str]) -> dict[str, dict[str, str]]:
    """Accounting records of the given jobs (allocations only, not their steps)."""
    fields = ["jobid", "jobname", "comment", "state", "account", "partition", "exitcode",
              "alloctres"]
    out = cluster.sh("sacct", "-n", "-P", "-X", "-j", ",".join(job_ids),
                     "-o", ",".join(fields)).stdout
    return {row[0]: dict(zip(fields, row, strict=True))
            for row in (line.split("|") for line in out.splitlines() if line)}


@pytest.fixture(scope="module")
def runs(slurm_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Four copies of one commit (it is recorded in every sidecar): the targets run locally
    (one core: the SLURM jobs need the other) and through SLURM; a rule that exits 3, through
    SLURM; one training run on runtime.device: cuda, through SLURM."""
    tmp = tmp_path_factory.mktemp("runs")
    (tmp / "home").mkdir()
    env = tool_env(tmp / "home")
    env["OMP_NUM_THREADS"] = "1"
    local = copy_project(tmp / "local", env)
    on_slurm = shutil.copytree(local, tmp / "slurm", symlinks=True)
    broken = shutil.copytree(local, tmp / "broken", symlinks=True)
    cuda = on_cuda(shutil.copytree(local, tmp / "cuda", symlinks=True))
    with (broken / "Snakefile").open("a") as snakefile:
        snakefile.write(BROKEN_RULE)
    slurm_env = slurm_cluster.env(env)
    started = {"local": Run(local, env, "--cores", "1", *TARGETS),
               "slurm": Run(on_slurm, slurm_env, *SLURM_ARGS, *TARGETS),
               "broken": Run(broken, slurm_env, *SLURM_ARGS, "data/broken.txt"),
               "cuda": Run(cuda, slurm_env, *SLURM_ARGS, CUDA_TARGET)}
    done = {name: (run.project, *run.wait()) for name, run in started.items()}
    for name in ("local", "slurm"):
        _, rc, output = done[name]
        assert rc == 0, f"{name} run exited {rc}:\n{output[-4000:]}"
    return done


def test_every_job_went_through_sbatch(slurm_cluster: Cluster, runs: dict) -> None:
    _, _, output = runs["slurm"]
    job_ids = SUBMITTED.findall(output)
    assert len(job_ids) == len(RULES), output[-4000:]
    records = sacct(slurm_cluster, job_ids)
    assert set(records) == set(job_ids)
    # the plugin names each job after the workflow run and comments it with the rule
    assert {r["comment"].removeprefix("rule_") for r in records.values()} == RULES
    assert {(r["state"], r["account"], r["partition"]) for r in records.values()} == {
        ("COMPLETED", ACCOUNT, PARTITION)}
    assert len({r["jobname"] for r in records.values()}) == 1


def test_outputs_equal_a_local_run(runs: dict) -> None:
    want = digest(runs["local"][0])
    assert {"data/double_descent/summary.json", "data/double_descent/runs/s1/model.safetensors",
            "dvc.lock"} <= set(want)
    assert digest(runs["slurm"][0]) == want


def test_a_failing_job_fails_the_workflow_and_is_named(slurm_cluster: Cluster,
                                                       runs: dict) -> None:
    project, rc, output = runs["broken"]
    assert rc == 1, output[-4000:]  # 137 would be the plugin's hang, killed by timeout
    (job_id,) = SUBMITTED.findall(output)
    assert "Error in rule broken_on_purpose" in output
    assert f"SLURM-job '{job_id}' failed" in output, output[-4000:]
    record = sacct(slurm_cluster, [job_id])[job_id]
    # the job step is Snakemake, which exits 1 when the rule's command fails
    assert (record["comment"], record["state"], record["exitcode"]) == (
        "rule_broken_on_purpose", "FAILED", "1:0")
    assert not (project / "data/broken.txt").exists()


def test_on_cuda_the_torch_stage_gets_a_gpu_and_the_others_none(slurm_cluster: Cluster,
                                                                  runs: dict) -> None:
    project, rc, output = runs["cuda"]
    records = {r["comment"]: r for r in
               sacct(slurm_cluster, SUBMITTED.findall(output)).values()}
    assert set(records) == {"rule_double_descent_synthesize_s0", "rule_double_descent_train_s0"}, \
        output[-4000:]
    assert "gres/gpu" not in records["rule_double_descent_synthesize_s0"]["alloctres"]
    assert "gres/gpu=1" in records["rule_double_descent_train_s0"]["alloctres"]
    # the GPU is a device file, not a CUDA device: the stage says so and the workflow fails
    assert rc == 1 and records["rule_double_descent_train_s0"]["state"] == "FAILED"
    log = (project / "logs/double_descent/s0/train.log").read_text()
    assert "runtime.device is 'cuda' but torch sees no CUDA device" in log
