"""Where a stage's process spends its time: start-up, writing, the rest (benchmarks/pipeline.py).

Start-up runs from the process's creation (the kernel's clock, so the interpreter's own start
and every import count) to the moment the stage begins its work: the last call of
:func:`work_begins`, which :mod:`genlab.stages.common` makes once params.yaml is validated and
again once the study's code is imported. Writing is the time spent inside
:func:`genlab.io.atomic_path` (serialising, fsync, rename). The CLI logs both beside the stage's
wall time; nothing of it reaches an artifact (wall times are not reproducible).
"""

from __future__ import annotations

import time

_state = {"work_begins": None, "writing": 0.0}


def process_started() -> float:
    """The epoch time this process was created."""
    import psutil  # imported here: only the closing line of a stage needs it

    return psutil.Process().create_time()


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


__all__ = ["add_writing", "process_started", "summary", "work_begins"]
