"""Benchmark: where the pipeline's wall time goes: start-up, compute, writing, the engine.

Reads a finished Snakemake run: its log (``.snakemake/log/``, the newest unless ``--log``) for
each job's rule, log file, start and finish (Snakemake stamps whole seconds), and each job's stage
log for the line the CLI closes a stage with (genlab.timing):

    genlab train: process 14.10 s: start-up 2.31 s, writing 0.05 s

process: from the process's creation to that line; start-up: from its creation until the stage
begins its work (interpreter, imports, params.yaml, the study's code); writing: inside the atomic
writes of its artifacts; compute: the rest of the process. The engine's overhead per job is
Snakemake's span of the job minus the process (its shell, the spawn, its polling); after the last
job, the run's recording in DVC. The pipeline's efficiency is its wall time (first job's start to
last job's finish) over (Σ compute / cores): 1.0 is every core computing all the time.

``--run default|ci`` first runs that preset's whole pipeline in a fresh clone of this repository's
HEAD (the current environment's genlab, snakemake and dvc), ``--cores`` at a time, and reports
on it; the clone is deleted unless ``--keep``. ``--baseline`` runs it first with a fresh
interpreter per job (``GENLAB_FORKSERVER=0``, as before the fork server), in a clone of its own,
and prints the two side by side with the ratios (baseline / fork server).

    .venv/bin/python benchmarks/pipeline.py                      # the last run here
    .venv/bin/python benchmarks/pipeline.py --project /tmp/clone/genlab
    .venv/bin/python benchmarks/pipeline.py --run ci --json pipeline.json   # ~2 min on 2 cores
    .venv/bin/python benchmarks/pipeline.py --run ci --baseline            # ~6 min

``--json PATH`` writes the figures: {"benchmark", "log", "cores", "wall_s", "after_last_job_s",
"command_s", "jobs", "totals": {...}, "efficiency", "median_start_up_s", "by_kind": {kind:
{...}}, "by_study": {study: {...}}, "slowest": [{"rule", "process_s", ...}]}; with
``--baseline`` also "baseline" (its "wall_s", "command_s", "totals", "efficiency", ...) and
"ratios" (baseline / fork server, by the printed comparison's row names).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from genlab.studies import NAMES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_json import write_json  # noqa: E402

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
START = re.compile(r"^(?:local)?rule (\S+):$")
LOG = re.compile(r"^\s+log: (\S+)$")
FINISH = re.compile(r"^Finished jobid: \d+ \(Rule: (\S+)\)$")
PROCESS = re.compile(r"genlab \S+: process ([\d.]+) s: start-up ([\d.]+) s, writing ([\d.]+) s")
FORK_SERVER_ENV = "GENLAB_FORKSERVER"  # "0": no fork server (genlab.workflow.forkserver)
KINDS = ("check_params", "synthesize", "train", "analyze", "aggregate", "report")


@dataclass
class Job:
    rule: str
    log: str | None = None
    start: float | None = None  # epoch seconds, Snakemake's (whole seconds)
    finish: float | None = None
    process_s: float = float("nan")
    start_up_s: float = float("nan")
    writing_s: float = float("nan")

    @property
    def span_s(self) -> float:
        return self.finish - self.start

    @property
    def compute_s(self) -> float:
        return self.process_s - self.start_up_s - self.writing_s

    @property
    def engine_s(self) -> float:  # ±1 s per job from Snakemake's whole seconds; unbiased in sums
        return self.span_s - self.process_s

    @property
    def kind(self) -> str:
        if self.rule in ("check_params", "report"):
            return self.rule
        for kind in ("synthesize", "train", "aggregate"):
            if f"_{kind}" in self.rule:
                return kind
        return "analyze"

    def study(self, studies: list[str]) -> str:
        # the longest name that prefixes the rule: influence_mnist1d_train is not influence's
        return max((s for s in studies if self.rule.startswith(f"{s}_")), key=len,
                   default=self.rule)


def _epoch(text: str) -> float:
    return datetime.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y").timestamp()


def parse_log(path: Path) -> list[Job]:
    """The jobs of one Snakemake log, with their start, finish and log file."""
    running: dict[str, Job] = {}
    done: list[Job] = []
    stamp, current = None, None
    for line in path.read_text().splitlines():
        if m := STAMP.match(line):
            stamp = _epoch(m.group(1))
        elif m := START.match(line):
            current = running[m.group(1)] = Job(m.group(1), start=stamp)
        elif (m := LOG.match(line)) and current is not None:
            current.log = m.group(1)
        elif m := FINISH.match(line):
            job = running.pop(m.group(1), None)
            if job is not None and m.group(1) != "all":
                job.finish = stamp
                done.append(job)
    return done


def read_stage_log(job: Job, root: Path) -> None:
    if job.log is None or not (root / job.log).exists():
        return
    for m in PROCESS.finditer((root / job.log).read_text(errors="replace")):
        job.process_s, job.start_up_s, job.writing_s = map(float, m.groups())


def totals(jobs: list[Job]) -> dict[str, float]:
    return {"jobs": len(jobs), "span_s": sum(j.span_s for j in jobs),
            "process_s": sum(j.process_s for j in jobs),
            "start_up_s": sum(j.start_up_s for j in jobs),
            "writing_s": sum(j.writing_s for j in jobs),
            "compute_s": sum(j.compute_s for j in jobs),
            "engine_s": sum(j.engine_s for j in jobs),
            "median_start_up_s": statistics.median(j.start_up_s for j in jobs)}


def run_pipeline(preset: str, cores: int, keep: bool,
                 fork_server: bool = True) -> tuple[Path, float, Path]:
    """Clone HEAD, switch to ``preset``, run Snakemake (its jobs in fork-server children, or
    each in a fresh interpreter); the clone, the command's seconds, and the folder to delete
    afterwards."""
    repo = Path(__file__).resolve().parents[1]
    scratch = Path(tempfile.mkdtemp(prefix="genlab-pipeline-"))
    clone = scratch / "genlab"
    subprocess.run(["git", "clone", "--quiet", str(repo), str(clone)], check=True)
    if preset != "default":
        subprocess.run([sys.executable, "-m", "genlab", "preset", preset, "--out", "params.yaml"],
                       cwd=clone, check=True)
    how = "fork server" if fork_server else "a fresh interpreter per job"
    print(f"running the {preset} pipeline in {clone} on {cores} cores ({how})", flush=True)
    # this interpreter's environment first: the stages' `python -m genlab` and snakemake
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop(FORK_SERVER_ENV, None)
    if not fork_server:
        env[FORK_SERVER_ENV] = "0"
    t0 = time.perf_counter()
    proc = subprocess.run(["snakemake", "--cores", str(cores)], cwd=clone, capture_output=True,
                          text=True, env=env)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"snakemake failed (the clone is kept: {clone}):\n"
                         f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return clone, seconds, (None if keep else scratch)


def newest_log(root: Path) -> tuple[Path, list[Job]]:
    """The newest log of a run that ran jobs (dry runs write logs too), and its jobs."""
    for log in sorted((root / ".snakemake/log").glob("*.snakemake.log"),
                      key=lambda p: p.stat().st_mtime, reverse=True):
        if jobs := parse_log(log):
            return log, jobs
    raise SystemExit(f"{root}: no finished job")


def measure(root: Path, log: Path | None, cores: int,
            command_s: float | None) -> tuple[dict, list[Job], str]:
    """The run's figures, its jobs (with their stage logs read) and Snakemake's log text."""
    log, jobs = (log, parse_log(log)) if log else newest_log(root)
    if not jobs:
        raise SystemExit(f"{log}: no finished job")
    for job in jobs:
        read_stage_log(job, root)
    missing = [j.rule for j in jobs if j.process_s != j.process_s]  # NaN: no process line
    if missing:
        raise SystemExit(f"{len(missing)} job(s) without the CLI's process line (logs written "
                         f"before genlab.timing?), e.g. {missing[:3]}")
    wall = max(j.finish for j in jobs) - min(j.start for j in jobs)
    total = totals(jobs)
    record = {"benchmark": "pipeline", "log": str(log), "cores": cores, "wall_s": wall,
              "command_s": command_s, "jobs": len(jobs), "totals": total,
              "efficiency": wall / (total["compute_s"] / cores),
              "median_start_up_s": total["median_start_up_s"],
              "idle_core_s": cores * wall - total["span_s"]}
    if command_s is not None:
        record["after_last_job_s"] = command_s - wall
    return record, jobs, log.read_text()


def report(record: dict, jobs: list[Job], text: str, top: int) -> None:
    """Print the run's tables and add the per-kind, per-study and slowest-job figures."""
    wall, total, cores = record["wall_s"], record["totals"], record["cores"]
    command_s = record["command_s"]
    elapsed = re.search(r"Elapsed time: (\d+):(\d\d):(\d\d)", text)
    print(f"{record['log']}\n{len(jobs)} jobs on {cores} cores: pipeline wall {wall:.0f} s (first "
          f"job's start to last job's finish)"
          + (f"; the command {command_s:.0f} s" if command_s is not None else "")
          + (f"; Snakemake's elapsed {elapsed.group(0).split(': ')[1]}" if elapsed else ""))
    header = (f"{'':<22} {'jobs':>5} {'start-up':>9} {'median':>7} {'compute':>9} "
              f"{'writing':>8} {'engine':>8} {'share':>6}")
    print("\nseconds summed over jobs (median: start-up per job); share: of all compute")
    print(header)

    def row(name: str, group: list[Job]) -> dict[str, float]:
        t = totals(group)
        print(f"{name:<22} {t['jobs']:>5} {t['start_up_s']:>9.1f} {t['median_start_up_s']:>7.2f} "
              f"{t['compute_s']:>9.1f} {t['writing_s']:>8.1f} {t['engine_s']:>8.1f} "
              f"{t['compute_s'] / total['compute_s']:>6.1%}")
        return t

    record["by_kind"] = {k: row(k, [j for j in jobs if j.kind == k]) for k in KINDS
                         if any(j.kind == k for j in jobs)}
    print()
    studies = sorted(NAMES, key=len, reverse=True)  # the longest prefix names a job's study
    by_study: dict[str, list[Job]] = {}
    for job in jobs:
        by_study.setdefault(job.study(studies), []).append(job)
    record["by_study"] = {s: row(s, g) for s, g in sorted(
        by_study.items(), key=lambda item: -sum(j.compute_s for j in item[1]))}
    print()
    row("all", jobs)
    print(f"\nefficiency: wall / (compute / cores) = {wall:.0f} / ({total['compute_s']:.0f} / "
          f"{cores}) = {record['efficiency']:.2f}; idle core-seconds {record['idle_core_s']:.0f}; "
          f"median start-up per job {total['median_start_up_s']:.2f} s")
    slowest = sorted(jobs, key=lambda j: -j.process_s)[:top]
    print(f"\nslowest {len(slowest)} jobs: process s (start-up s)")
    for job in slowest:
        print(f"  {job.rule:<48} {job.process_s:>7.1f} ({job.start_up_s:.2f})")
    record["slowest"] = [{**asdict(j), "compute_s": j.compute_s} for j in slowest]


COMPARED = (("pipeline wall (s)", lambda r: r["wall_s"]),
            ("the command (s)", lambda r: r["command_s"]),
            ("start-up, summed over jobs (s)", lambda r: r["totals"]["start_up_s"]),
            ("median start-up per job (s)", lambda r: r["median_start_up_s"]),
            ("compute, summed over jobs (s)", lambda r: r["totals"]["compute_s"]),
            ("efficiency, wall / (compute / cores)", lambda r: r["efficiency"]))


def compare(baseline: dict, record: dict) -> dict[str, float]:
    """Print the fork-server run beside the baseline run (a fresh interpreter per job); the
    ratios baseline / fork server."""
    print("\nthe same pipeline, a fresh interpreter per job (baseline) and fork-server children")
    print(f"{'':<38} {'baseline':>9} {'fork server':>12} {'ratio':>7}")
    ratios = {}
    for name, value in COMPARED:
        before, after = value(baseline), value(record)
        ratios[name] = before / after if after else float("nan")
        print(f"{name:<38} {before:>9.2f} {after:>12.2f} {ratios[name]:>6.2f}x")
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--log", type=Path, help="a Snakemake log (default: the project's newest)")
    parser.add_argument("--run", choices=("default", "ci"),
                        help="first run this preset's pipeline in a fresh clone of HEAD")
    parser.add_argument("--baseline", action="store_true",
                        help="with --run: first run it with a fresh interpreter per job "
                             "(GENLAB_FORKSERVER=0), in its own clone, and compare")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep --run's clone")
    parser.add_argument("--top", type=int, default=10, help="slowest jobs to list")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.baseline and not args.run:
        parser.error("--baseline needs --run")
    baseline = None
    if args.baseline:
        root, command_s, cleanup = run_pipeline(args.run, args.cores, args.keep, fork_server=False)
        baseline = measure(root, None, args.cores, command_s)[0]
        if cleanup is not None:
            shutil.rmtree(cleanup, ignore_errors=True)
    command_s, cleanup = None, None
    root = args.project.resolve()
    if args.run:
        root, command_s, cleanup = run_pipeline(args.run, args.cores, args.keep)
    record, jobs, text = measure(root, args.log, args.cores, command_s)
    report(record, jobs, text, args.top)
    if baseline is not None:
        record["baseline"] = baseline
        record["ratios"] = compare(baseline, record)
    write_json(args.json, record)
    if cleanup is not None:
        shutil.rmtree(cleanup, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
