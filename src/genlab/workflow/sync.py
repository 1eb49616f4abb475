"""Keep Snakemake's and DVC's records of the same outputs in agreement.

- :func:`record_in_dvc` runs after a successful Snakemake run: ``dvc commit`` stores the outputs'
  hashes in dvc.lock and the files in DVC's cache, so ``dvc status`` is clean and ``dvc push``
  can share them.
- :func:`sync` runs after ``dvc repro`` or ``dvc pull``: those outputs carry no Snakemake records
  and fresh mtimes, so Snakemake would rerun them. Guarded by a clean ``dvc status`` (the files
  are exactly what dvc.lock describes for the current code and params), it has Snakemake adopt
  them as up to date.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path


class SyncError(RuntimeError):
    pass


def _run(args: list[str], root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=root, capture_output=True, text=True)


def run_dvc(root: str | Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``dvc ARGS`` in ``root`` by the interpreter running genlab (its DVC, not PATH's)."""
    return _run([sys.executable, "-m", "dvc", *args], Path(root))


def dvc_status(root: str | Path) -> dict:
    """``dvc status`` as a dict: empty when every stage is up to date."""
    proc = run_dvc(root, "status", "--json")
    if proc.returncode != 0:
        raise SyncError(f"dvc status failed:\n{proc.stderr.strip()}")
    return json.loads(proc.stdout or "{}")


def record_in_dvc(root: str | Path) -> None:
    """Commit every stage whose outputs all exist (a partial run commits what it finished)."""
    from genlab.workflow.adapter import dvc_jobs

    root = Path(root)
    jobs = dvc_jobs(root)
    # A targeted run (`snakemake data/eos_gd/summary.json`) never schedules the gate: Snakemake
    # checks params.yaml at parse time instead. DVC still lists the gate's stamp as a dependency
    # of every stage and refuses to commit a stage whose dependency is missing, so write it now
    # by running the gate itself (it validates the same file, in about a second).
    for gate in (j for j in jobs if j.gate):
        if not all((root / o).exists() for o in gate.outs):
            argv = shlex.split(gate.cmd)
            if argv[0] == "python":  # the interpreter running us, not whichever is on PATH
                argv[0] = sys.executable
            proc = _run(argv, root)
            if proc.returncode != 0:
                raise SyncError(f"{gate.stage} failed:\n{proc.stderr.strip()}")
    done = [j.stage for j in jobs if all((root / o).exists() for o in j.outs)]
    if not done:
        return
    # every stage done: commit them all without naming them. DVC collects the index once then,
    # instead of once per named target (27.8 s against ~6 min for the 75 default-preset stages,
    # each listing its exact code dependencies; measured 2026-12-04)
    targets = [] if len(done) == len(jobs) else done
    proc = run_dvc(root, "commit", "--force", "--quiet", *targets)
    if proc.returncode != 0:
        raise SyncError(f"dvc commit failed:\n{proc.stderr.strip()}")


def sync(root: str | Path, dry_run: bool = False) -> int:
    root = Path(root)
    status = dvc_status(root)
    if status:
        stale = ", ".join(sorted(status))
        print(f"genlab sync: refusing: `dvc status` is not clean ({stale}). Run `dvc repro` "
              "or `dvc pull` first, so the files are the ones dvc.lock describes.",
              file=sys.stderr)
        return 1
    if dry_run:
        print("genlab sync: dvc status is clean; would record outputs for Snakemake")
        return 0
    # --forceall: Snakemake writes its records only for jobs it schedules, and without records it
    # would not see later params or code edits; in --touch mode scheduling only updates mtimes.
    proc = _run([sys.executable, "-m", "snakemake", "--touch", "--forceall", "--cores", "1",
                 "--quiet"], root)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return proc.returncode
    print("genlab sync: Snakemake now treats DVC's outputs as up to date")
    return 0


def run(args) -> int:
    """``genlab sync``."""
    return sync(Path.cwd(), dry_run=args.dry_run)
