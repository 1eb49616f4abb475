"""The one place that picks a device and sets up torch's runtime for a stage."""

from __future__ import annotations

import torch


def resolve_device(choice: str = "auto") -> torch.device:
    """``auto``: CUDA when present, else CPU. ``cuda`` without a GPU is an error, not a fallback."""
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("runtime.device is 'cuda' but torch sees no CUDA device")
    return torch.device(choice)


def configure_torch(threads: int, deterministic: bool = True) -> None:
    """Thread count and determinism for the current process.

    On small models, torch's default of one intra-op thread per core was 25-70x slower than a single
    thread on 2-core machines (DESIGN.md); parallelism comes from running jobs side by side.
    """
    torch.set_num_threads(threads)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
    # TF32 changes float32 results on Ampere+ GPUs; off unless a setting asks for it.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return "cpu"
