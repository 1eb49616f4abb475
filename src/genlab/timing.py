"""Where a stage's process spends its time: start-up, writing, the rest (benchmarks/pipeline.py).

Start-up runs from the process's creation (the kernel's clock, so the interpreter's own start
and every import count) to the moment the stage begins its work: the last call of
:func:`work_begins`, which :mod:`genlab.stages.common` makes once params.yaml is validated and
again once the study's code is imported. Writing is the time spent inside
:func:`genlab.io.atomic_path` (serialising, fsync, rename). The CLI logs both beside the stage's
wall time; nothing of it reaches an artifact (wall times are not reproducible).
"""

from __future__ import annotations

import os
import time

_state = {"work_begins": None, "writing": 0.0, "process": None}


def started_by(pid: int) -> None:
    """Count start-up from the creation of process ``pid``: a job run in a child of the fork
    server (:mod:`genlab.workflow.forkserver`) started when its client did."""
    _state["process"] = pid


def process_started() -> float:
    """The epoch time this process (or the client it runs for) was created."""
    candidates = [pid for pid in (_state["process"], os.getpid()) if pid]  # a client may be gone
    for pid in candidates:
        try:
            return _created(pid)
        except (OSError, ValueError, IndexError):
            continue
    import psutil  # no /proc (not Linux): imported here, only a stage's closing line needs it

    for pid in candidates:
        try:
            return psutil.Process(pid).create_time()
        except psutil.NoSuchProcess:
            continue
    raise AssertionError("unreachable: this process exists")


def _created(pid: int) -> float:
    """A process's creation from /proc, to ~20 ms. psutil's ``create_time`` adds the start (in
    clock ticks since boot) to /proc/stat's boot time, which is truncated to whole seconds: every
    process then looks created up to a second early (0.47 s on the machine this was measured on,
    so every start-up looked 0.47 s longer than it was). Here the boot time is now less the
    uptime, both to 10 ms."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
    with open("/proc/uptime", encoding="ascii") as uptime:
        booted = time.time() - float(uptime.read().split()[0])
    return booted + ticks / os.sysconf("SC_CLK_TCK")


def work_begins() -> None:
    _state["work_begins"] = time.time()


def add_writing(seconds: float) -> None:
    _state["writing"] += seconds


def summary(command_started: float) -> tuple[float, float, float]:
    """(process seconds so far, start-up seconds, writing seconds); without a
    :func:`work_begins` call the command's start ends the start-up."""
    started = process_started()
    begins = _state["work_begins"] or command_started
    return time.time() - started, max(begins - started, 0.0), _state["writing"]


__all__ = ["add_writing", "process_started", "started_by", "summary", "work_begins"]
