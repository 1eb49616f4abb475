"""A command run as a dvc.yaml stage (``genlab --stage NAME ...``): its log and its stamp.

Whichever engine runs the command, the stage itself

- writes its log to the path dvc.yaml's ``meta.log`` gives, so ``logs/`` is complete after
  ``dvc repro`` as after ``snakemake``, and the report's wall-time table with it. Run by DVC,
  what the process writes to stdout and stderr goes there as well as to the terminal; run by
  Snakemake, whose rule redirects both streams into that file, it is left to the redirect;
- reads its inputs before it starts and, when it succeeds, stamps its outputs with them
  (:mod:`genlab.workflow.fingerprint`), so both engines judge it by what made its outputs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TextIO

from genlab.workflow import fingerprint


class _Tee:
    """A text stream writing to the terminal's stream and to the log file."""

    def __init__(self, stream: TextIO, log: TextIO) -> None:
        self.stream, self.log = stream, log

    def write(self, text: str) -> int:
        if "\r" not in text:  # a progress bar's redrawn frame is for the terminal only
            self.log.write(text)
            self.log.flush()  # a killed stage leaves its log up to the last line
        return self.stream.write(text)

    def flush(self) -> None:
        self.log.flush()
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def _is_stderr(path: Path) -> bool:
    try:
        ours, theirs = os.fstat(sys.stderr.fileno()), path.stat()
    except (OSError, ValueError, AttributeError):
        return False
    return (ours.st_dev, ours.st_ino) == (theirs.st_dev, theirs.st_ino)


class StageRun:
    def __init__(self, stage: str, root: Path | None = None) -> None:
        self.root = root or Path.cwd()
        self.job = fingerprint.find_job(self.root, stage)
        self.inputs = fingerprint.inputs_of(self.job, fingerprint.Hasher.load(self.root))
        self._log: TextIO | None = None
        self._streams = (sys.stdout, sys.stderr)

    def __enter__(self) -> StageRun:
        path = self.root / self.job.log
        if _is_stderr(path):  # Snakemake's rule already sends everything there
            return self
        path.parent.mkdir(parents=True, exist_ok=True)
        self._log = path.open("w", encoding="utf-8")
        sys.stdout, sys.stderr = _Tee(sys.stdout, self._log), _Tee(sys.stderr, self._log)
        return self

    def succeeded(self) -> None:
        fingerprint.write_stamp(self.root, self.job, self.inputs)

    def __exit__(self, *exc) -> None:
        sys.stdout, sys.stderr = self._streams
        if self._log is not None:
            self._log.close()
