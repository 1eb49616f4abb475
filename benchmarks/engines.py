"""The engines' books: recording, sync and no-op checks, against the previous methods, same run.

Runs in a workspace where the whole pipeline has run (default: this repository after
`make reproduce`; `--project` for another), and leaves it as it found it (dvc.lock is restored
after each measurement that changes it). Prints one table; `--json PATH` writes the figures.

  noop_snakemake   `snakemake -n` with nothing to do (median of --repeat)
  noop_dvc_status  `dvc status` with nothing to do (median of --repeat)
  record_full      genlab's record_in_dvc with every stage to record (dvc.lock emptied), against
                   `dvc commit --force` of every stage with no targets (the previous method
                   once every stage was done; naming them took minutes)
  record_one       record_in_dvc with one stage to record (the report's entry taken out of
                   dvc.lock), against the same previous method (which committed every stage
                   after any run)
  sync             `genlab sync` (mtimes from the stamps), against the previous
                   `snakemake --touch --forceall` pass (skip it with --no-old-sync: minutes)

    python benchmarks/engines.py                       # after make reproduce
    python benchmarks/engines.py --project /tmp/wf --json engines.json
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from genlab.workflow.adapter import dvc_jobs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_json import write_json  # noqa: E402


def timed(args: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return elapsed


def median_of(n: int, args: list[str], cwd: Path) -> float:
    return statistics.median(timed(args, cwd) for _ in range(n))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-old-sync", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    root = args.project.resolve()
    py = sys.executable
    snakemake, dvc = [py, "-m", "snakemake"], [py, "-m", "dvc"]
    record = [py, "-c", "from genlab.workflow.sync import record_in_dvc; record_in_dvc('.')"]
    status = subprocess.run([*dvc, "status", "--json"], cwd=root, capture_output=True, text=True)
    if status.stdout.strip() != "{}":
        raise SystemExit("needs a workspace where every stage is current (`dvc status` clean): "
                         "run `make reproduce` or `snakemake --cores all` first")
    stages = len(dvc_jobs(root))
    lock = root / "dvc.lock"
    saved = lock.read_bytes()
    figures: dict[str, dict[str, float | None]] = {}

    def pair(name: str, new: float, old: float | None) -> None:
        figures[name] = {"new_s": new, "old_s": old,
                         "speedup": None if old is None else old / new}

    pair("noop_snakemake", median_of(args.repeat, [*snakemake, "-n", "--quiet"], root), None)
    pair("noop_dvc_status", median_of(args.repeat, [*dvc, "status"], root), None)
    try:
        old = timed([*dvc, "commit", "--force", "--quiet"], root)
        lock.write_text("schema: '2.0'\nstages: {}\n")
        pair("record_full", timed(record, root), old)
        entries = yaml.safe_load(saved)
        del entries["stages"]["report"]
        lock.write_text(yaml.safe_dump(entries, sort_keys=False))
        pair("record_one", timed(record, root), old)
    finally:
        lock.write_bytes(saved)
    new = timed([*(py, "-m", "genlab"), "sync"], root)
    old = None if args.no_old_sync else timed(
        [*snakemake, "--touch", "--forceall", "--cores", "1", "--quiet"], root)
    pair("sync", new, old)
    if not args.no_old_sync:  # the touch pass made Snakemake's records; put genlab's mtimes back
        timed([py, "-m", "genlab", "sync"], root)
    shutil.rmtree(root / ".snakemake" / "log", ignore_errors=True)

    print(f"engines' books on {root} ({stages} stages)")
    print(f"{'measurement':<18}{'genlab (s)':>12}{'previous (s)':>14}{'speedup':>9}")
    for name, f in figures.items():
        old_s = "" if f["old_s"] is None else f"{f['old_s']:.1f}"
        speed = "" if f["speedup"] is None else f"{f['speedup']:.1f}x"
        print(f"{name:<18}{f['new_s']:>12.1f}{old_s:>14}{speed:>9}")
    write_json(args.json, {"project": str(root), "stages": stages, "figures": figures})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
