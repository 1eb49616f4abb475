"""Fault injection, artifacts: truncated or garbled files, read-only folders, a full disk.

Reading a damaged artifact gives an :class:`ArtifactError` naming the file (the CLI prints it
and exits 2); a write that cannot finish leaves the previous file, or nothing, under the final
name and no temporary file behind.
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pyarrow as pa
import pytest
import torch

from genlab.cli import main
from genlab.io import (
    ArtifactError,
    read_json,
    read_parquet,
    write_json,
    write_parquet,
    write_text,
)
from genlab.models.registry import build_model, load_model, model_spec, save_weights
from genlab.settings import MLPSettings


@pytest.fixture
def artifacts(tmp_path: Path) -> dict[str, Path]:
    """One small, valid file of each format, as the stages write them."""
    write_json(tmp_path / "metrics.json", {"status": "done", "train_acc": [1.0] * 50})
    write_parquet(tmp_path / "history.parquet", pa.table({"step": list(range(200)),
                                                          "loss": [0.5] * 200}))
    settings = MLPSettings(hidden=(8,))
    spec = model_spec("mlp", settings, 4, 3)
    save_weights(build_model("mlp", settings, 4, 3), tmp_path / "model.safetensors")
    write_json(tmp_path / "model.json", spec)
    return {"json": tmp_path / "metrics.json", "parquet": tmp_path / "history.parquet",
            "safetensors": tmp_path / "model.safetensors"}


def read(kind: str, path: Path) -> object:
    if kind == "json":
        return read_json(path)
    if kind == "parquet":
        return read_parquet(path)
    return load_model(read_json(path.parent / "model.json"), path)


FORMATS = ["json", "parquet", "safetensors"]


def test_a_flipped_weight_byte_is_refused_where_model_json_records_the_hash(
        artifacts: dict[str, Path]) -> None:
    """safetensors has no checksum: a flipped byte inside a tensor loads as another number
    unless model.json's weights_sha256 (written by every train stage) is checked."""
    path = artifacts["safetensors"]
    spec = read_json(path.parent / "model.json")
    recorded = {**spec, "weights_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    before = load_model(recorded, path).state_dict()
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x10  # inside the last tensor's data, past the JSON header
    path.write_bytes(bytes(data))
    silently_other = load_model(spec, path).state_dict()  # no hash recorded: nothing to check
    assert any(not torch.equal(before[k], silently_other[k]) for k in before)
    with pytest.raises(ArtifactError, match=f"{path.name}: its sha256 differs"):
        load_model(recorded, path)


@pytest.mark.parametrize("kind", FORMATS)
def test_valid_files_read(artifacts: dict[str, Path], kind: str) -> None:
    read(kind, artifacts[kind])


@pytest.mark.parametrize("keep", [0.0, 0.1, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("kind", FORMATS)
def test_a_truncated_file_is_an_error_naming_it(artifacts: dict[str, Path], kind: str,
                                                keep: float) -> None:
    path = artifacts[kind]
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(ArtifactError, match=path.name):
        read(kind, path)


@pytest.mark.parametrize("kind", FORMATS)
def test_garbage_is_an_error_naming_the_file(artifacts: dict[str, Path], kind: str) -> None:
    path = artifacts[kind]
    path.write_bytes(b"\x80\x04\x95 not what it claims to be" * 10)  # a pickle-like prefix
    with pytest.raises(ArtifactError, match=path.name):
        read(kind, path)


@pytest.mark.parametrize("kind", FORMATS)
def test_a_folder_where_a_file_should_be(tmp_path: Path, artifacts: dict[str, Path],
                                         kind: str) -> None:
    path = artifacts[kind]
    path.unlink()
    path.mkdir()
    with pytest.raises(ArtifactError, match=path.name):
        read(kind, path)


def test_the_cli_reports_a_truncated_input_by_name_and_exits_2(tmp_path: Path, capsys) -> None:
    """`genlab train` over a dataset whose train.parquet was cut short: exit 2, no traceback,
    the file named, nothing written."""
    import yaml

    from tests_support import ci_params_text

    params = tmp_path / "params.yaml"
    params.write_text(ci_params_text())
    run_ = next(iter(yaml.safe_load(params.read_text())["studies"]["random_labels"]["runs"]))
    dataset = tmp_path / "dataset"
    common = ["--params", str(params), "--study", "random_labels"]
    assert main(["synthesize", *common, "--out", str(dataset)]) == 0
    seed = yaml.safe_load(params.read_text())["studies"]["random_labels"]["runs"][run_]["seed"]
    train = dataset / f"s{seed}" / "train.parquet"  # the run's own draw
    train.write_bytes(train.read_bytes()[:100])
    out = tmp_path / "runs" / run_
    code = main(["train", *common, "--run", run_, "--dataset", str(dataset), "--out", str(out)])
    assert code == 2
    assert str(train) in capsys.readouterr().err
    assert not out.exists()


# --------------------------------------------------------------------------------------------
# Writes that cannot finish.
# --------------------------------------------------------------------------------------------

WRITERS = {
    "json": lambda p: write_json(p, {"a": 1}),
    "text": lambda p: write_text(p, "<p>x</p>\n"),
    "parquet": lambda p: write_parquet(p, pa.table({"x": [1, 2]})),
}


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_a_read_only_folder_is_a_clear_error(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "old").write_text("kept\n")
    folder.chmod(0o555)
    try:
        with pytest.raises(ArtifactError, match="read-only"):
            WRITERS[kind](folder / f"artifact.{kind}")
        assert sorted(os.listdir(folder)) == ["old"]
    finally:
        folder.chmod(0o755)


@pytest.mark.parametrize("failure", [errno.EROFS, errno.EACCES])
def test_a_folder_that_refuses_new_files_is_a_clear_error(tmp_path: Path, monkeypatch,
                                                          failure: int) -> None:
    """What a read-only mount does, simulated (the suite may run as root, whom chmod does not
    stop): creating the temporary file fails."""
    import tempfile

    def refuse(*args, **kwargs):
        raise OSError(failure, os.strerror(failure))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(ArtifactError, match=r"metrics\.json: cannot write into .*read-only"):
        write_json(tmp_path / "metrics.json", {"a": 1})
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kind", sorted(WRITERS))
@pytest.mark.parametrize("stage", ["fsync", "replace"])
def test_a_full_disk_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path, monkeypatch,
                                                                kind: str, stage: str) -> None:
    target = tmp_path / f"artifact.{kind}"
    target.write_bytes(b"the previous version\n")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, stage, full)
    with pytest.raises(ArtifactError, match=rf"artifact\.{kind}: writing failed .*No space"):
        WRITERS[kind](target)
    monkeypatch.undo()
    assert target.read_bytes() == b"the previous version\n"
    assert os.listdir(tmp_path) == [target.name]


def test_the_cli_reports_an_unwritable_output_and_exits_2(tmp_path: Path, monkeypatch,
                                                          capsys) -> None:
    import tempfile

    from tests_support import ci_params_text

    params = tmp_path / "params.yaml"
    params.write_text(ci_params_text())

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    out = tmp_path / "dataset"
    code = main(["synthesize", "--params", str(params), "--study", "random_labels",
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "train.parquet: cannot write into" in err and "Read-only file system" in err
