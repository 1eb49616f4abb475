from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from genlab.io import (
    ArtifactError,
    atomic_path,
    read_json,
    read_parquet,
    write_json,
    write_parquet,
)


def test_failed_write_leaves_nothing_and_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "metrics.json"
    write_json(target, {"a": 1})
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert read_json(target) == {"a": 1}
    assert sorted(os.listdir(target.parent)) == ["metrics.json"]


def test_artifacts_get_normal_permissions(tmp_path: Path) -> None:
    write_json(tmp_path / "m.json", {})
    assert (tmp_path / "m.json").stat().st_mode & 0o044 == 0o044  # group/other readable


def test_json_is_canonical(tmp_path: Path) -> None:
    write_json(tmp_path / "a.json", {"b": 1.0, "a": float("nan"), "c": float("inf")})
    write_json(tmp_path / "b.json", {"c": float("inf"), "a": float("nan"), "b": 1.0})
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert read_json(tmp_path / "a.json") == {"a": None, "b": 1.0, "c": "inf"}


def test_parquet_is_byte_stable(tmp_path: Path) -> None:
    table = pa.table({"x": [1.5, 2.5], "n": [1, 2]})
    write_parquet(tmp_path / "a.parquet", table)
    write_parquet(tmp_path / "b.parquet", table)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert read_parquet(tmp_path / "a.parquet").equals(table)


def test_truncated_files_give_errors_naming_them(tmp_path: Path) -> None:
    write_parquet(tmp_path / "t.parquet", pa.table({"x": list(range(100))}))
    data = (tmp_path / "t.parquet").read_bytes()
    (tmp_path / "t.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError, match="t.parquet"):
        read_parquet(tmp_path / "t.parquet")
    (tmp_path / "m.json").write_text('{"a": ')
    with pytest.raises(ArtifactError, match="m.json"):
        read_json(tmp_path / "m.json")
    with pytest.raises(ArtifactError, match="missing"):
        read_json(tmp_path / "nope.json")


def test_a_flipped_byte_in_parquet_is_refused_never_read_as_other_numbers(tmp_path: Path) -> None:
    """Page CRCs: every single-byte flip across the file is an ArtifactError or reads back the
    same table (a flip in bytes the reader ignores); without the CRCs most flips in a data page
    decoded to different numbers without any error."""
    import numpy as np

    table = pa.table({"x": np.random.default_rng(0).normal(size=2000), "y": np.arange(2000)})
    good = tmp_path / "good.parquet"
    write_parquet(good, table)
    data = good.read_bytes()
    bad = tmp_path / "bad.parquet"
    refused = 0
    for pos in range(0, len(data), 37):
        flipped = bytearray(data)
        flipped[pos] ^= 0xFF
        bad.write_bytes(bytes(flipped))
        try:
            assert read_parquet(bad).equals(table), f"byte {pos} flipped read as other data"
        except ArtifactError as exc:
            assert "bad.parquet" in str(exc)
            refused += 1
    assert refused > 0.9 * len(range(0, len(data), 37))


def test_list_columns_read_back_as_one_matrix_or_refuse() -> None:
    import pyarrow as pa

    from genlab.io import ArtifactError, columns_to_numpy

    same = pa.table({"x": pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32()))})
    assert columns_to_numpy(same, "x").tolist() == [[1.0, 2.0], [3.0, 4.0]]
    ragged = pa.table({"x": pa.array([[1.0, 2.0], [3.0]], pa.list_(pa.float32()))})
    with pytest.raises(ArtifactError, match="lengths \\[1, 2\\]"):
        columns_to_numpy(ragged, "x")
