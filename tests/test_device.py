"""Device choice and the per-GPU claims that spread concurrent jobs over several GPUs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from genlab.device import claim_device, release_devices, resolve_device

UUIDS = ["GPU-aaaa", "GPU-bbbb"]


@pytest.fixture(autouse=True)
def _release():
    yield
    release_devices()


def test_each_claim_takes_the_next_free_device_until_none_is_left(tmp_path: Path) -> None:
    assert claim_device(UUIDS, tmp_path) == 0
    assert claim_device(UUIDS, tmp_path) == 1
    assert claim_device(UUIDS, tmp_path) is None
    release_devices()
    assert claim_device(UUIDS, tmp_path) == 0


def test_a_device_held_by_another_process_is_skipped_and_freed_when_it_dies(
        tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom pathlib import Path\n"
         "from genlab.device import claim_device\n"
         f"print(claim_device({UUIDS!r}, Path({str(tmp_path)!r})), flush=True)\n"
         "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "0"
        assert claim_device(UUIDS, tmp_path) == 1
        release_devices()
        holder.kill()  # killed, not exited cleanly: the kernel still drops its lock
        holder.wait(timeout=30)
        assert claim_device(UUIDS, tmp_path) == 0
    finally:
        holder.kill()


def test_locks_are_per_device_uuid_not_index(tmp_path: Path) -> None:
    """Two processes with different CUDA_VISIBLE_DEVICES number the same GPU differently."""
    assert claim_device(["GPU-bbbb"], tmp_path) == 0
    assert claim_device(UUIDS, tmp_path) == 0  # GPU-aaaa is free, whatever its index
    assert claim_device(["GPU-bbbb", "GPU-aaaa"], tmp_path) is None


def test_cpu_and_auto_without_cuda() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(RuntimeError, match="sees no CUDA device"):
        resolve_device("cuda")


def test_cuda_jobs_on_a_several_gpu_machine_take_different_devices(tmp_path, monkeypatch) -> None:
    """torch made to report two GPUs: each resolve_device claims its own and selects it."""
    import tempfile
    from types import SimpleNamespace

    selected = []
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: SimpleNamespace(uuid=UUIDS[i]))
    monkeypatch.setattr(torch.cuda, "set_device", selected.append)
    assert resolve_device("auto") == torch.device("cuda", 0)
    assert resolve_device("cuda") == torch.device("cuda", 1)
    assert resolve_device("cuda") == torch.device("cuda", 0)  # none free: shares the first
    assert selected == [0, 1, 0]


def test_configure_torch_sets_what_the_public_call_sets_without_importing_inductor() -> None:
    """The determinism switch of genlab.device equals ``torch.use_deterministic_algorithms(True,
    warn_only=True)``: the global flag, warn-only, and Inductor's ``deterministic`` once its
    config is imported (after, through the environment, and before, directly); but the call
    itself leaves Inductor unimported (its 1.1 s import was a third of a stage's start-up)."""
    script = (
        "import sys, torch\n"
        "from genlab.device import configure_torch\n"
        "configure_torch(1)\n"
        "assert 'torch._inductor.config' not in sys.modules\n"
        "assert torch.are_deterministic_algorithms_enabled()\n"
        "assert torch.is_deterministic_algorithms_warn_only_enabled()\n"
        "import torch._inductor.config as c\n"
        "assert c.deterministic is True\n"
        "c.deterministic = False\n"
        "configure_torch(1)\n"
        "assert c.deterministic is True\n"
        "print('ok')\n")
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_DETERMINISTIC"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
