"""Check a GPU machine in one short run: the `ci` workflow end to end, the ensemble-training and
sharpness benchmarks, and the default preset's wall time; every number to one JSON file.

Steps, in this order, each within its share of ``--budget-s`` (default 480 s in all), each timed
as a subprocess that is stopped (its whole process tree) when its share runs out:

  facts         torch, CUDA, device, driver (nvidia-smi), CPUs, date, git commit, Python
  ci_workflow   a copy of the project (the files `git ls-files -co --exclude-standard` lists)
                on the ci preset (genlab.presets.preset_text) with runtime.device set,
                `python -m snakemake --cores all` (the stages import the copy's src/);
                wall time, jobs, the device every trained run's model.json records (the
                step fails if one differs), claims
  ensemble      benchmarks/train_ensemble.py --quick --device DEVICE --json (its figures)
  sharpness     benchmarks/sharpness.py --quick --device DEVICE --json (its figures)
  default_wall  the same as ci_workflow on the repository's own params.yaml (the default preset)
                with what is left of the budget; running out is recorded, not counted a failure

The JSON ({"device", "started", "steps": {name: {"status": "ok" | "failed" | "timed out" |
"skipped", "wall_s", ...}}}) is rewritten (temporary file + rename) before and after each step,
so a killed run leaves what it finished. Only measured numbers are written. Exit status: 0 when
every step is ok, 1 otherwise, 2 when a prerequisite is missing (said within seconds).

    benchmarks/gpu_check.sh                                     # on the GPU machine
    python3 benchmarks/gpu_check.py --device cpu --steps facts ensemble   # tests this script
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "reports" / "gpu_check.json"  # reports/ is ignored by git
STEPS = ("facts", "ci_workflow", "ensemble", "sharpness", "default_wall")
WORKFLOW_STEPS = {"ci_workflow", "default_wall"}
# The most one step may take, as a share of the budget (None: whatever is left; at the default
# 480 s: 60, 240, 90 and 90 s), and what each step keeps back for the steps after it, so that an
# early step that hangs cannot starve the later ones.
CAP_SHARE = {"facts": 1 / 8, "ci_workflow": 1 / 2, "ensemble": 3 / 16, "sharpness": 3 / 16,
             "default_wall": None}
RESERVE_S = {"facts": 10, "ci_workflow": 60, "ensemble": 20, "sharpness": 20, "default_wall": 30}
MIN_STEP_S = 5  # a step with less than this left is skipped
MARGIN_S = 15  # kept back for stopping a process tree (up to 10 s), cleaning up, the last write
PROBE_TIMEOUT_S = 120  # the prerequisite check: seconds normally; this only guards a hung driver


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- subprocesses


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc; empty elsewhere), children first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop_tree(proc: subprocess.Popen) -> None:
    """SIGTERM the process's group and every descendant (a job may have left the group), then
    SIGKILL what is left after a few seconds."""
    pids = descendants(proc.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for target in (-proc.pid, *pids):  # -pid: the process group it leads
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(target, sig)
        try:
            proc.wait(timeout=5)
            pids = [p for p in pids if Path(f"/proc/{p}").exists()]
            if not pids:
                return
        except subprocess.TimeoutExpired:
            pass


def run_timed(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float,
              log: Path) -> tuple[int | None, float, str]:
    """Run ``cmd`` with stdout and stderr to ``log``; (exit code or None when stopped at
    ``timeout``, wall seconds, the output). The process leads its own group, so that a timeout
    or our own termination stops everything it started."""
    with open(log, "wb") as sink:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=max(timeout, 0.1))
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            if proc.poll() is None:
                stop_tree(proc)
        wall = time.perf_counter() - start
    return rc, wall, log.read_text(errors="replace")


def tail(text: str, chars: int = 3000) -> str:
    return text if len(text) <= chars else "..." + text[-chars:]


def subprocess_env(bin_dir: Path) -> dict[str, str]:
    """Our interpreter as `python` first on PATH (the stages run `python -m genlab ...`, and a
    machine may have only `python3`), one torch thread unless set (as the README runs things),
    unbuffered output."""
    env = dict(os.environ)
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "python"
    shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    shim.chmod(0o755)
    env["PATH"] = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent),
                                   env.get("PATH", "")])
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


# --------------------------------------------------------------------------- prerequisites

PROBE = r"""
import importlib, json, sys
device, workflow = sys.argv[1], sys.argv[2] == "1"
problems, versions, failed = [], {}, []
try:
    import torch
    versions["torch"] = torch.__version__
    if device == "cuda" and not torch.cuda.is_available():
        problems.append(
            "CUDA: torch %s (built for CUDA %s) sees no CUDA device: torch.cuda.is_available() "
            "is False. Run on a GPU machine with a CUDA build of torch (--device cpu only tests "
            "this script)." % (torch.__version__, torch.version.cuda or "none: a CPU-only build"))
except Exception as e:
    problems.append("torch: cannot import it (%s: %s)" % (type(e).__name__, e))
# what the stages, the Snakefile and the benchmarks import: a missing dependency shows up under
# its own name
mods = ["yaml", "genlab", "genlab.cli", "genlab.studies", "genlab.analyses.curvature.hessian",
        "genlab.analyses.dimension.neighbor_screen", "genlab.train.ensemble"]
if workflow:
    mods += ["genlab.presets", "genlab.workflow.adapter", "genlab.workflow.sync",
             "genlab.workflow.generate", "snakemake", "snakemake.cli", "dvc", "dvc.repo"]
for mod in mods:
    if any(mod.startswith(bad + ".") for bad in failed):
        continue  # its package is already reported
    try:
        m = importlib.import_module(mod)
        versions[mod] = getattr(m, "__version__", None)
    except Exception as e:
        failed.append(mod)
        missing = getattr(e, "name", None)
        hint = {"yaml": "pip install pyyaml",
                "genlab": "install it offline with pip install --no-deps --no-build-isolation "
                          "-e . (or put src/ on PYTHONPATH)",
                "snakemake": "pip install 'snakemake>=9,<10'",
                "dvc": "pip install 'dvc>=3.50,<4' (the Snakefile reads dvc.yaml through DVC)"
                }.get(mod.split(".")[0], "")
        if missing and missing.split(".")[0] != mod.split(".")[0]:
            hint = "it needs the package %r (pyproject.toml, requirements/no-deps.txt)" % missing
        problems.append("%s: cannot import it (%s: %s)%s" % (
            mod, type(e).__name__, e, "; " + hint if hint else ""))
print(json.dumps({"problems": problems, "versions": versions}))
"""


def check_prerequisites(device: str, steps: list[str], env: dict[str, str]) -> list[str]:
    """What is missing for these steps, each a sentence naming it; empty when all is there."""
    workflow = bool(WORKFLOW_STEPS & set(steps))
    problems = []
    if workflow and shutil.which("git") is None:
        problems.append("git: not on PATH (the workflow steps copy the project into a new git "
                        "repository, which DVC needs)")
    try:
        proc = subprocess.run([sys.executable, "-c", PROBE, device, "1" if workflow else "0"],
                              env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                              cwd=ROOT)
    except subprocess.TimeoutExpired:
        return [*problems, f"{sys.executable}: importing torch and checking CUDA did not finish "
                f"in {PROBE_TIMEOUT_S} s (a hung driver?)"]
    try:
        probe = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return [*problems, f"{sys.executable}: the prerequisite check itself failed "
                f"(exit {proc.returncode}): {tail(proc.stderr, 1000)}"]
    return [*problems, *probe["problems"]]


# --------------------------------------------------------------------------- project copies


def project_files() -> tuple[list[str], str]:
    """The files a fresh clone would have (tracked, and untracked but not ignored), as git lists
    them (tests/tests_support.py's copy_project lists them the same way). Where git cannot use
    this checkout's repository (no .git here, or one git refuses), git lists them against an empty
    repository of its own: every file is untracked then, and git's own ignore rules (the
    .gitignore files, .git/info/exclude, core.excludesFile) decide what is left out."""
    listing = ["ls-files", "-co", "--exclude-standard", "-z"]
    try:
        return git_files(["git", *listing]), "git ls-files -co --exclude-standard"
    except (OSError, subprocess.SubprocessError, RuntimeError):
        pass
    with tempfile.TemporaryDirectory(prefix="genlab-gpu-check-git-") as empty:
        subprocess.run(["git", "init", "-q", "--bare", empty], check=True, capture_output=True,
                       timeout=60)
        exclude = ROOT / ".git" / "info" / "exclude"
        extra = ["--exclude-from", str(exclude)] if exclude.is_file() else []
        files = git_files(["git", f"--git-dir={empty}", f"--work-tree={ROOT}", *listing, *extra])
    return files, "git ls-files -co --exclude-standard against an empty repository"


def git_files(cmd: list[str]) -> list[str]:
    """The files ``cmd`` (a git ls-files -z) lists under ROOT that are files here."""
    listed = subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
    files = [f for f in listed.decode().split("\0") if f and (ROOT / f).is_file()]
    if not files:
        raise RuntimeError(f"{' '.join(cmd)} listed no file")
    return files


def copy_project(dest: Path, params: str, device: str, env: dict[str, str]) -> dict:
    """The project's files in ``dest``, params.yaml = ``params_text(params)`` with runtime.device
    set, committed in a new git repository (DVC needs one). Returns what was done, for the
    record."""
    import yaml

    files, how = project_files()
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    params_yaml = yaml.safe_load(params_text(params))
    params_yaml.setdefault("runtime", {})["device"] = device
    (dest / "params.yaml").write_text(yaml.safe_dump(params_yaml, sort_keys=False))
    git_env = {**env, "GIT_AUTHOR_NAME": "genlab gpu_check",
               "GIT_AUTHOR_EMAIL": "gpu_check@genlab.invalid",
               "GIT_COMMITTER_NAME": "genlab gpu_check",
               "GIT_COMMITTER_EMAIL": "gpu_check@genlab.invalid"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "gpu_check"]):
        proc = subprocess.run(cmd, cwd=dest, env=git_env, capture_output=True, text=True,
                              timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} in the copy exited {proc.returncode}: "
                               f"{proc.stderr.strip()}")
    return {"files_copied": len(files), "copied_by": how, "params": params,
            "scale": params_yaml.get("scale"), "runtime": params_yaml["runtime"]}


def params_text(params: str) -> str:
    """The full params file: "params.yaml" (the default preset), or the named preset merged
    onto params.yaml by genlab.presets."""
    if params == "params.yaml":
        return (ROOT / "params.yaml").read_text()
    from genlab.presets import preset_text

    return preset_text(params, ROOT)


# --------------------------------------------------------------------------- steps


def step_facts(args: argparse.Namespace, timeout: float, env: dict[str, str],
               work: Path) -> dict:
    script = r"""
import json, sys, torch
device = sys.argv[1]
d = {"torch": torch.__version__, "torch_cuda_build": torch.version.cuda,
     "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
     "cuda_available": torch.cuda.is_available(), "torch_default_threads": torch.get_num_threads()}
if torch.cuda.is_available():
    d["device_count"] = torch.cuda.device_count()
    d["devices"] = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        d["devices"].append({"name": p.name, "memory_gib": round(p.total_memory / 2**30, 2),
                             "capability": "%d.%d" % (p.major, p.minor),
                             "multiprocessors": p.multi_processor_count})
    d["arch_list"] = torch.cuda.get_arch_list()
if device == "cuda":  # a kernel must run, not only the driver answer
    x = torch.ones(1024, 1024, device="cuda")
    d["cuda_kernel_ran"] = float((x @ x).sum().item()) == 1024.0 ** 3
import genlab
d["genlab"] = {"version": genlab.__version__, "path": genlab.__file__}
for mod in ("snakemake", "dvc", "numpy", "pyarrow"):
    try:
        d[mod] = __import__(mod).__version__
    except Exception as e:
        d[mod] = "not importable (%s)" % type(e).__name__
print(json.dumps(d))
"""
    rc, wall, out = run_timed([sys.executable, "-c", script, args.device], ROOT, env, timeout,
                              work / "facts.log")
    result: dict[str, Any] = {"wall_s": round(wall, 2)}
    if rc is None:
        return {"status": "timed out", "after_s": round(wall, 1), "output_tail": tail(out)}
    try:
        result["torch"] = json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {**result, "status": "failed", "exit_code": rc, "output_tail": tail(out)}
    result.update(python=platform.python_version(), python_executable=sys.executable,
                  platform=platform.platform(), cpu_count=os.cpu_count(),
                  cpus_usable=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                  else None, date_utc=now_iso(), git=git_facts(), nvidia_smi=nvidia_smi(),
                  memory_gib=memory_gib(),
                  env={k: env.get(k) for k in ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
                                               "PYTHONPATH")})
    ok = rc == 0 and (args.device != "cuda" or result["torch"].get("cuda_kernel_ran") is True)
    return {"status": "ok" if ok else "failed", **({} if ok else {"exit_code": rc}), **result}


def git_facts() -> str | None:
    """HEAD's sha (``-dirty`` when tracked files changed), as the stages' provenance records it."""
    try:
        from genlab.provenance import git_commit
    except ImportError:  # the prerequisites step names what is missing
        return None
    return git_commit(str(ROOT))


def nvidia_smi() -> list[dict] | str | None:
    """The GPUs as nvidia-smi reports them; None where it is not installed."""
    if shutil.which("nvidia-smi") is None:
        return None
    for fields in ("name,driver_version,memory.total,compute_cap,clocks.max.sm,power.limit",
                   "name,driver_version,memory.total"):
        try:
            proc = subprocess.run(["nvidia-smi", f"--query-gpu={fields}",
                                   "--format=csv,noheader"], capture_output=True, text=True,
                                  timeout=30)
        except (OSError, subprocess.SubprocessError) as e:
            return f"failed: {type(e).__name__}"
        if proc.returncode == 0:
            keys = fields.split(",")
            return [dict(zip(keys, (v.strip() for v in line.split(",")), strict=False))
                    for line in proc.stdout.strip().splitlines()]
    return f"failed: {tail(proc.stdout + proc.stderr, 500)}"


def memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def run_benchmark(script: str, ok, args: argparse.Namespace, timeout: float,
                  env: dict[str, str], work: Path) -> dict:
    """benchmarks/``script`` (--quick unless --full-benchmarks) with ``--json``: its figures are
    the record's ``results``; ok when it exited 0 and ``ok(results)`` holds."""
    results_path = work / f"{Path(script).stem}.json"
    cmd = [sys.executable, f"benchmarks/{script}", "--device", args.device, "--json",
           str(results_path)]
    if not args.full_benchmarks:
        cmd.append("--quick")
    rc, wall, out = run_timed(cmd, ROOT, env, timeout, work / f"{script}.log")
    record: dict[str, Any] = {"command": " ".join(["python", *cmd[1:]]), "wall_s": round(wall, 2)}
    if rc is None:
        return {"status": "timed out", "after_s": round(wall, 1), **record,
                "output_tail": tail(out)}
    record.update(exit_code=rc, output=tail(out, 20000))
    try:
        record["results"] = results = json.loads(results_path.read_text())
        good = rc == 0 and ok(results)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return {"status": "failed", "error": f"its --json: {type(e).__name__}: {e}", **record}
    return {"status": "ok" if good else "failed", **record}


def positive(values) -> bool:
    """Whether there are values and every one is a number > 0 (None: not measured)."""
    values = list(values)
    return bool(values) and all(isinstance(v, int | float) and v > 0 for v in values)


def ensemble_ok(r: dict) -> bool:
    return (positive(v for row in r["rows"] for k, v in row.items() if k != "method")
            and positive(m["gflop_per_s"] for m in r["matmul"]))


def sharpness_ok(r: dict) -> bool:
    return (positive(r["hvps_power_over_lanczos"].values())
            and positive(row["hvps_median"] for row in r["to_target"])
            and positive(c["ms"] for c in r["product_costs"]))


def step_ensemble(args, timeout, env, work) -> dict:
    return run_benchmark("train_ensemble.py", ensemble_ok, args, timeout, env, work)


def step_sharpness(args, timeout, env, work) -> dict:
    return run_benchmark("sharpness.py", sharpness_ok, args, timeout, env, work)


PROGRESS = re.compile(r"(\d+) of (\d+) steps \((\d+)%\) done")


def pipeline_record(project: Path, out: str, device: str) -> tuple[dict, list[str]]:
    """What a workflow run did: jobs, the device each trained run recorded, claims; and the
    reasons it is not ok, if any."""
    problems = []
    record: dict[str, Any] = {}
    progress = PROGRESS.findall(out)
    if progress:
        record["jobs_done"], record["jobs_total"] = int(progress[-1][0]), int(progress[-1][1])
    elif "Nothing to be done" in out:
        record["jobs_done"] = record["jobs_total"] = 0
    devices: Counter[str] = Counter()
    mismatched = []
    for model_json in sorted(project.glob("data/*/runs/*/model.json")):
        try:
            seen = json.loads(model_json.read_text())["provenance"]["device"]
        except (OSError, ValueError, KeyError, TypeError):
            seen = "unreadable"
        devices[seen] += 1
        if not (seen == "cpu" if device == "cpu" else seen.startswith("cuda:")):
            mismatched.append(f"{model_json.relative_to(project).parent}: {seen}")
    record["trained_runs"] = {"total": sum(devices.values()), "by_device": dict(devices)}
    if mismatched:
        record["trained_runs"]["not_on_" + device] = mismatched[:20]
        problems.append(f"{len(mismatched)} trained run(s) not on {device}")
    # the post-hoc analyses (sharpness, intrinsic_dim) record their device too: reported
    analyses: Counter[str] = Counter()
    for result in project.glob("data/*/analyses/*/*.json"):
        try:
            seen = json.loads(result.read_text())["provenance"]["device"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        analyses[f"{result.parent.name} on {seen}"] += 1
    record["analyses_by_device"] = dict(sorted(analyses.items()))
    claims_path = project / "reports" / "claims.json"
    if claims_path.is_file():
        claims = json.loads(claims_path.read_text())["claims"]
        statuses = Counter(c.get("status") for c in claims)
        record["claims"] = {"reproduced": statuses.get("reproduced", 0), "total": len(claims),
                            "by_status": dict(statuses),
                            "not_reproduced_or_not_run": [
                                f"{c.get('study')}: {c.get('claim')} ({c.get('status')})"
                                for c in claims
                                if c.get("status") not in ("reproduced", "passed")][:40]}
    return record, problems


def failed_rule_logs(project: Path, out: str) -> dict[str, str]:
    """The ends of the logs of the rules Snakemake reported failing (at most three)."""
    logs = {}
    for block in re.split(r"(?=Error in rule )", out)[1:]:
        rule = block.split(":", 1)[0].removeprefix("Error in rule ").strip()
        m = re.search(r"^\s*log: (\S+)", block, re.M)
        if m and (project / m[1]).is_file() and len(logs) < 3:
            logs[rule] = tail((project / m[1]).read_text(errors="replace"), 2000)
    return logs


def run_workflow(params: str, args: argparse.Namespace, timeout: float,
                 env: dict[str, str], work: Path, name: str) -> dict:
    deadline = time.monotonic() + timeout
    project = work / f"{name}-project"
    project.mkdir()
    start = time.perf_counter()
    try:
        record: dict[str, Any] = {"copy": copy_project(project, params, args.device, env)}
    except Exception as e:  # noqa: BLE001 -- any failure to set up is this step's failure
        return {"status": "failed", "error": f"copying the project: {type(e).__name__}: {e}"}
    record["copy"]["wall_s"] = round(time.perf_counter() - start, 2)
    cmd = [sys.executable, "-m", "snakemake", "--cores", args.cores,
           *shlex.split(args.snakemake_args)]
    record["command"] = " ".join(["python", *cmd[1:]])
    # the copy's own genlab, not an installed one: the code that runs is the code DVC hashes,
    # and edits to the checkout while this runs do not reach it
    env = {**env, "PYTHONPATH": os.pathsep.join(
        p for p in (str(project / "src"), env.get("PYTHONPATH")) if p)}
    rc, wall, out = run_timed(cmd, project, env, deadline - time.monotonic(),
                              work / f"{name}-snakemake.log")
    record["wall_s"] = round(wall, 2)
    summary, problems = pipeline_record(project, out, args.device)
    record.update(summary)
    if args.keep:
        record["project_kept_at"] = str(project)
    if rc is None:
        return {"status": "timed out", "after_s": round(wall, 1),
                **({"problems": problems} if problems else {}), **record,
                "output_tail": tail(out, 2000)}
    record["exit_code"] = rc
    if rc != 0:
        problems.append(f"snakemake exited {rc}")
        record["output_tail"] = tail(out)
        record["failed_rule_logs"] = failed_rule_logs(project, out)
    if record["trained_runs"]["total"] == 0:
        problems.append("no trained run (data/*/runs/*/model.json) to check the device of")
    if problems:
        return {"status": "failed", "problems": problems, **record}
    return {"status": "ok", **record}


def step_ci_workflow(args, timeout, env, work) -> dict:
    return run_workflow("ci", args, timeout, env, work, "ci")


def step_default_wall(args, timeout, env, work) -> dict:
    return run_workflow("params.yaml", args, timeout, env, work, "default")


STEP_FUNCTIONS = {"facts": step_facts, "ci_workflow": step_ci_workflow,
                  "ensemble": step_ensemble, "sharpness": step_sharpness,
                  "default_wall": step_default_wall}


# --------------------------------------------------------------------------- record, summary


def write_atomically(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def summary_line(name: str, step: dict) -> str:
    status = step["status"]
    head = f"  {name:<13}{status:<10}"
    if status == "timed out":
        return (head + f"after {step['after_s']:.0f} s" + jobs_text(step)
                + ("  PROBLEMS: " + "; ".join(step["problems"]) if "problems" in step else ""))
    if status == "skipped":
        return head + step.get("reason", "")
    text = f"{step['wall_s']:7.1f} s" if "wall_s" in step else ""
    if name == "facts" and "torch" in step:
        t = step["torch"]
        gpus = ", ".join(f"{d['name']} ({d['memory_gib']} GiB)" for d in t.get("devices", []))
        smi = step.get("nvidia_smi")
        driver = (f", driver {smi[0].get('driver_version')}" if isinstance(smi, list) and smi
                  else "")
        text += (f"  torch {t['torch']}, CUDA build {t['torch_cuda_build']}, "
                 f"GPUs: {gpus or 'none'}{driver}, {step['cpu_count']} CPUs")
    elif name in WORKFLOW_STEPS:
        text += jobs_text(step)
        runs = step.get("trained_runs", {})
        if runs:
            text += f", {runs['total']} trained runs: " + ", ".join(
                f"{n} on {d}" for d, n in runs["by_device"].items())
        if "claims" in step:
            text += f", claims {step['claims']['reproduced']}/{step['claims']['total']} reproduced"
    elif name == "ensemble" and "results" in step:
        text += "  speed-up (loop / vectorised): " + ", ".join(
            f"K={r['K']} {r['method']} {r['speed_up']:.1f}x" for r in step["results"]["rows"])
    elif name == "sharpness" and "results" in step:
        text += "  HVPs power / Lanczos: " + ", ".join(
            f"{p} {'-' if r is None else format(r, '.1f') + 'x'}"
            for p, r in step["results"]["hvps_power_over_lanczos"].items())
    if "problems" in step:
        text += "  PROBLEMS: " + "; ".join(step["problems"])
    elif status == "failed" and "error" in step:
        text += "  " + step["error"]
    return head + text


def jobs_text(step: dict) -> str:
    if "jobs_total" in step:
        return f"  {step['jobs_done']} of {step['jobs_total']} jobs"
    return ""


def counts_as_ok(name: str, step: dict) -> bool:
    # the default preset's wall time is measured with what is left: running out is a finding
    return step["status"] == "ok" or (name == "default_wall" and step["status"] == "timed out")


# --------------------------------------------------------------------------- main


class Terminated(Exception):
    pass


def main(argv: list[str] | None = None) -> int:
    intro, details = __doc__.split("\n\n", 1)
    parser = argparse.ArgumentParser(description=intro.replace("\n", " "), epilog=details,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="the device to check (default cuda; cpu only tests this script)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"the JSON file (default {DEFAULT_OUT.relative_to(ROOT)})")
    parser.add_argument("--budget-s", type=float, default=480,
                        help="seconds for all steps together (default 480)")
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS),
                        help="which steps (run in the order above; default all)")
    parser.add_argument("--cores", default="all", help="snakemake --cores (default all)")
    parser.add_argument("--snakemake-args", default="",
                        help="more arguments for both workflow runs, one string "
                        "(e.g. \"--resources gpu=1\")")
    parser.add_argument("--full-benchmarks", action="store_true",
                        help="run the benchmarks in full, not --quick (minutes each on a CPU)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work folder (project copies, logs) and print its path")
    args = parser.parse_args(argv)
    steps = [s for s in STEPS if s in args.steps]
    out = args.out.resolve()
    started_mono = time.monotonic()
    deadline = started_mono + args.budget_s
    work = Path(tempfile.mkdtemp(prefix="genlab-gpu-check-"))
    env = subprocess_env(work / "bin")
    record: dict[str, Any] = {"device": args.device, "started": now_iso(),
                              "budget_s": args.budget_s, "argv": sys.argv[1:],
                              "python": sys.executable, "steps": {}}

    def on_sigterm(signum, frame):
        raise Terminated

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        problems = check_prerequisites(args.device, steps, env)
        if problems:
            record["prerequisites_missing"] = problems
            record["steps"] = {s: {"status": "skipped", "reason": "prerequisites missing"}
                               for s in steps}
            write_atomically(out, record)
            print("gpu_check: cannot run; missing:\n" + "\n".join(f"  - {p}" for p in problems)
                  + f"\n(record: {out})", file=sys.stderr)
            return 2
        print(f"gpu_check: device {args.device}, steps {' '.join(steps)}, budget "
              f"{args.budget_s:.0f} s; writing {out}", flush=True)
        for i, name in enumerate(steps):
            remaining = deadline - time.monotonic()
            timeout = remaining - MARGIN_S - sum(RESERVE_S[s] for s in steps[i + 1:])
            if CAP_SHARE[name] is not None:
                timeout = min(timeout, CAP_SHARE[name] * args.budget_s)
            if timeout < MIN_STEP_S:
                record["steps"][name] = {"status": "skipped",
                                         "reason": f"budget spent ({remaining:.0f} s left)"}
                write_atomically(out, record)
                continue
            record["steps"][name] = {"status": "running", "timeout_s": round(timeout, 1),
                                     "started": now_iso()}
            write_atomically(out, record)
            print(f"  {name}: up to {timeout:.0f} s ...", flush=True)
            try:
                result = STEP_FUNCTIONS[name](args, timeout, env, work)
            except Terminated:
                record["steps"][name] = {"status": "failed", "error": "gpu_check was terminated"}
                raise
            except Exception as e:  # noqa: BLE001 -- record it and go on to the next step
                result = {"status": "failed", "error": f"{type(e).__name__}: {e}"}
            result["timeout_s"] = round(timeout, 1)
            record["steps"][name] = result
            write_atomically(out, record)
            print(summary_line(name, result), flush=True)
    except (Terminated, KeyboardInterrupt):
        record["interrupted"] = True
        write_atomically(out, record)
        print(f"gpu_check: interrupted; steps so far in {out}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"gpu_check: work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    record["wall_s"] = round(time.monotonic() - started_mono, 1)
    write_atomically(out, record)
    ok = all(counts_as_ok(n, s) for n, s in record["steps"].items())
    verdict = "all steps ok" if ok else "NOT all steps ok"
    if ok and record["steps"].get("default_wall", {}).get("status") == "timed out":
        verdict += (" (default_wall ran out of budget: not a failure; its wall time is at "
                    "least its after_s)")
    print(f"\ngpu_check on {args.device}: {verdict} in {record['wall_s']:.0f} s; numbers in "
          f"{out}")
    for name, step in record["steps"].items():
        print(summary_line(name, step))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
