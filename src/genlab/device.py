"""The one place that picks a device and sets up torch's runtime for a stage."""

from __future__ import annotations

import fcntl
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

log = logging.getLogger(__name__)

# Open lock files of the GPUs this process has claimed; a claim lasts until the process exits.
_CLAIMS: list[int] = []


def resolve_device(choice: str = "auto") -> torch.device:
    """``auto``: CUDA when present, else CPU. ``cuda`` without a GPU is an error, not a fallback.

    With several GPUs visible, the stage takes one that no other genlab process holds
    (:func:`claim_device`), so that Snakemake's cap of one torch job per device (the Snakefile)
    spreads the jobs over the devices instead of stacking them all on the first.
    """
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice != "cuda":
        return torch.device(choice)
    if not torch.cuda.is_available():
        raise RuntimeError("runtime.device is 'cuda' but torch sees no CUDA device")
    count = torch.cuda.device_count()
    index = 0
    if count > 1:
        uuids = [str(torch.cuda.get_device_properties(i).uuid) for i in range(count)]
        claimed = claim_device(uuids, Path(tempfile.gettempdir()))
        if claimed is None:
            log.warning("all %d CUDA devices are held by other genlab processes; sharing cuda:0",
                        count)
        else:
            index = claimed
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def claim_device(uuids: Sequence[str], lock_dir: Path) -> int | None:
    """Index of the first device in ``uuids`` that no other process has claimed, or None.

    A claim is an exclusive ``flock`` on ``lock_dir/genlab-gpu-<uuid>.lock``, kept until this
    process exits (the kernel drops it even when the process is killed, so nothing stale is left
    to clean up). Locks are keyed by the device's UUID, not its index, because indices are
    relative to each process's CUDA_VISIBLE_DEVICES. The file is opened read-only, so a lock file
    another user created can still be locked.
    """
    for index, uuid in enumerate(uuids):
        fd = os.open(lock_dir / f"genlab-gpu-{uuid}.lock", os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _CLAIMS.append(fd)
        return index
    return None


def release_devices() -> None:
    """Drop this process's device claims (for tests; a stage keeps its claim until it exits)."""
    while _CLAIMS:
        os.close(_CLAIMS.pop())


def configure_torch(threads: int, deterministic: bool = True) -> None:
    """Thread count and determinism for the current process.

    On small models, torch's default of one intra-op thread per core was 25-70x slower than a single
    thread on 2-core machines (DESIGN.md); parallelism comes from running jobs side by side.
    """
    torch.set_num_threads(threads)
    if deterministic:
        _deterministic_algorithms()
        torch.backends.cudnn.benchmark = False
    # TF32 changes float32 results on Ampere+ GPUs; off unless a setting asks for it.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def _deterministic_algorithms() -> None:
    """``torch.use_deterministic_algorithms(True, warn_only=True)`` without its import of
    ``torch._inductor.config`` (1.1 s, a third of a small stage's start-up; genlab compiles
    nothing). Both halves of what the public call sets are set: the global flag, and Inductor's
    own ``deterministic``, through its environment variable when Inductor is imported later (its
    config reads TORCHINDUCTOR_DETERMINISTIC at import) or directly when it is already loaded."""
    os.environ["TORCHINDUCTOR_DETERMINISTIC"] = "1"
    inductor_config = sys.modules.get("torch._inductor.config")
    if inductor_config is not None:
        inductor_config.deterministic = True
    torch._C._set_deterministic_algorithms(True, warn_only=True)


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return "cpu"
