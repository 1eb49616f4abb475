"""A run's checkpoint folder beside its outputs, for the per-run train stages."""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import shutil
import time
from pathlib import Path

from genlab.io import ArtifactError, read_json, read_safetensors, write_json, write_safetensors
from genlab.train.checkpoint import from_records, to_records
from genlab.train.loop import Checkpointing

log = logging.getLogger("genlab")


class CheckpointFolder:
    """A run's checkpoint beside its outputs: tensors, then the JSON that vouches for them.

    Each save writes its tensors to a new file (``state-<step>-<token>.safetensors``), then
    ``state.json`` naming that file, its sha256 and the stage settings' hash, and only then
    removes the older tensors files: a job killed at any moment leaves the JSON naming a complete
    file, so the last checkpoint is never lost (overwriting one file in place lost it whenever the
    kill fell between the two writes). A checkpoint whose files disagree or whose settings differ
    is not used.
    """

    TENSORS = re.compile(r"state-\d+-[0-9a-f]{8}\.safetensors")

    def __init__(self, folder: Path, settings_sha256: str) -> None:
        self.folder, self.settings_sha256 = folder, settings_sha256

    def load(self, device):  # -> Checkpoint | None
        meta_path = self.folder / "state.json"
        if not meta_path.exists():
            return None
        meta = read_json(meta_path)
        name = str(meta.get("tensors_file", ""))
        tensors = None
        if (meta.get("settings_sha256") == self.settings_sha256 and "tensors_sha256" in meta
                and self.TENSORS.fullmatch(name)):  # a bare name: nothing outside the folder
            with contextlib.suppress(ArtifactError):  # tensors not the ones the JSON vouches for
                tensors = read_safetensors(self.folder / name, meta["tensors_sha256"])
        if tensors is None:
            log.warning("ignoring checkpoint %s: made with other settings or incomplete",
                        self.folder)
            return None
        log.info("resuming from the checkpoint at step %d", meta["step"])
        return from_records(tensors, meta, device)

    def checkpointing(self, minutes: float, device):  # -> Checkpointing
        last = [time.monotonic()]

        def save(ckpt) -> None:
            tensors, meta = to_records(ckpt)
            name = f"state-{ckpt.step}-{secrets.token_hex(4)}.safetensors"
            meta |= {"settings_sha256": self.settings_sha256, "tensors_file": name,
                     "tensors_sha256": write_safetensors(self.folder / name, tensors)}
            write_json(self.folder / "state.json", meta)
            for older in self.folder.glob("state-*.safetensors"):
                if older.name != name:
                    older.unlink(missing_ok=True)
            last[0] = time.monotonic()
            log.info("checkpoint at step %d", ckpt.step)

        return Checkpointing(save=save, due=lambda step: time.monotonic() - last[0] >= minutes * 60,
                             resume=self.load(device))

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
