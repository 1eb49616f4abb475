"""Progress of a long loop: a tqdm bar on a terminal, plain log lines otherwise.

A stage run by Snakemake writes to its log file, where a bar would be thousands of carriage
returns: there, :func:`progress` logs one line every ``every_s`` seconds (and one at the end)
through genlab's logger. On a terminal (``dvc repro``, a stage run by hand) it draws a tqdm bar
on stderr. Either way the loop pays one clock read per item.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger("genlab")

EVERY_S = 30.0


def progress(items: Iterable[T], desc: str, total: int | None = None,
             unit: str = "it", every_s: float = EVERY_S) -> Iterator[T]:
    """Yield ``items``, reporting how far the loop is."""
    if total is None:
        total = len(items) if hasattr(items, "__len__") else None  # type: ignore[arg-type]
    if sys.stderr.isatty():
        from tqdm import tqdm

        yield from tqdm(items, desc=desc, total=total, unit=unit, leave=False,
                        mininterval=0.5, dynamic_ncols=True)
        return
    start = last = time.monotonic()
    done = 0
    for item in items:
        yield item
        done += 1
        now = time.monotonic()
        if now - last >= every_s:
            last = now
            log.info("%s: %s", desc, _where(done, total, unit, now - start))
    if done and time.monotonic() - start >= every_s:
        log.info("%s: %s", desc, _where(done, total, unit, time.monotonic() - start))


def _where(done: int, total: int | None, unit: str, elapsed: float) -> str:
    if total:
        left = elapsed / done * (total - done)
        return (f"{done}/{total} {unit} ({100 * done / total:.0f}%), {elapsed:.0f} s, "
                f"about {left:.0f} s left")
    return f"{done} {unit}, {elapsed:.0f} s"
