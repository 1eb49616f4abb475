"""What every artifact's sidecar records about how it was made.

Only facts that determine the bytes belong here (settings and their hash, code version, library
versions, device, seed). Wall time and host names go to the stage's log instead: recording them in
an artifact would make identical reruns differ and make DVC recompute everything downstream. (The
report reads the wall times back from the logs: genlab.report.collect.stage_times.)
"""

from __future__ import annotations

import platform
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

from genlab import __version__


@cache
def git_commit(cwd: str | None = None) -> str:
    """HEAD's sha, with ``-dirty`` when tracked files differ from it; ``unknown`` outside git."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=cwd, capture_output=True, text=True, check=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{sha}-dirty" if dirty else sha


def library_versions() -> dict[str, str]:
    import numpy
    import pyarrow
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__,
            "numpy": numpy.__version__, "pyarrow": pyarrow.__version__}


def provenance(settings: dict[str, Any], settings_sha256: str, device: str,
               seed: int | None = None, root: Path | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "settings": settings,
        "settings_sha256": settings_sha256,
        "genlab_version": __version__,
        "git_commit": git_commit(str(root) if root else None),
        "versions": library_versions(),
        "device": device,
    }
    if seed is not None:
        record["seed"] = seed
    return record
