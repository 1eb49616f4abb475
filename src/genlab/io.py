"""Artifact I/O. Every write goes to a temporary name in the target folder, then is renamed.

A killed job therefore leaves either the previous file or nothing under the final name, never a
half-written artifact a later run would trust. Formats: JSON (small metrics and sidecars), Parquet
(tables), safetensors (tensors), CSV (only the small plot exports DVC reads: it cannot read
Parquet). Nothing here unpickles.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from genlab import timing


class ArtifactError(RuntimeError):
    """An artifact is missing, truncated or not what its reader expects, or cannot be written
    (read-only folder, disk full); the message names it."""


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it to ``path``, else delete it.

    An OS error on the way (read-only folder, disk full) becomes an :class:`ArtifactError` naming
    ``path``; the previous file under that name, if any, is left as it was.
    """
    path, t0 = Path(path), time.perf_counter()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot write into {path.parent} ({exc.strerror or exc}); "
                            "is the folder read-only?") from exc
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        # mkstemp makes 0600; artifacts get normal modes
        os.chmod(tmp_path, 0o666 & ~current_umask())
        yield tmp_path
        with open(tmp_path, "rb+") as fh:  # data on disk before the rename makes it visible
            os.fsync(fh.fileno())
        os.replace(tmp_path, path)
        timing.add_writing(time.perf_counter() - t0)
    except OSError as exc:
        tmp_path.unlink(missing_ok=True)
        raise ArtifactError(f"{path}: writing failed ({exc.strerror or exc}); nothing was "
                            "written under this name") from exc
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def current_umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def dumps_json(data: Mapping[str, Any]) -> str:
    """Canonical JSON (sorted keys, NaN as null): same data, same bytes."""
    return json.dumps(_jsonable(data), sort_keys=True, indent=2, allow_nan=False) + "\n"


def write_json(path: str | Path, data: Mapping[str, Any]) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(dumps_json(data), encoding="utf-8")


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def read_json(path: str | Path) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtifactError(f"{path}: missing") from None
    except OSError as exc:  # a folder, no permission
        raise ArtifactError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{path}: not valid JSON ({exc}); the file is corrupt or truncated; "
                            "delete it and rerun the stage that makes it") from None


def write_parquet(path: str | Path, table: pa.Table) -> None:
    with atomic_path(path) as tmp:
        # Fixed writer settings so the same table always gives the same bytes. Page CRCs:
        # without them a flipped byte in a data page read back as silently wrong numbers (387
        # of 409 single-byte flips in an 18 kB table); with them every one is refused.
        pq.write_table(table, tmp, compression="zstd", use_dictionary=False,
                       write_statistics=False, store_schema=True, write_page_checksum=True)


def write_csv(path: str | Path, table: pa.Table) -> None:
    """A table as CSV with a header row. Python's own formatting (shortest round-trip floats,
    ``\n`` line ends, null as an empty cell) so the same table always gives the same bytes."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.column_names)
    columns = [table.column(name).to_pylist() for name in table.column_names]
    writer.writerows(zip(*columns, strict=True))
    write_text(path, buffer.getvalue())


def read_parquet(path: str | Path) -> pa.Table:
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path}: missing")
    if not path.is_file():  # pyarrow would read a folder as a (possibly empty) dataset
        raise ArtifactError(f"{path}: not a file")
    try:
        # one file, read as such: read_table goes through pyarrow.dataset, whose import (and
        # pandas' with it) cost ~0.35 s of every stage's start-up
        with pq.ParquetFile(path, page_checksum_verification=True) as parquet:
            return parquet.read()
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArtifactError(f"{path}: not a readable Parquet file ({exc}); it is corrupt or "
                            "truncated; delete it and rerun the stage that makes it") from None


def write_with(path: str | Path, writer: Callable[[Path], None]) -> None:
    """Atomic write through a library's own ``writer(path)`` (e.g. safetensors' save_file)."""
    with atomic_path(path) as tmp:
        writer(tmp)


def write_safetensors(path: str | Path, tensors: Mapping[str, Any]) -> str:
    """Write ``tensors`` (name -> torch tensor) atomically and return the file's sha256.

    safetensors has no checksum of its own (a flipped byte in a tensor loads as another number),
    so the JSON written beside the file records this hash and :func:`read_safetensors` checks it.
    """
    from safetensors.torch import save_file

    write_with(path, lambda tmp: save_file(dict(tensors), str(tmp)))
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_safetensors(path: str | Path, sha256: str | None) -> dict[str, Any]:
    """The tensors of a safetensors file, read once; refused (:class:`ArtifactError` naming the
    file) when unreadable or, where ``sha256`` is given, when its bytes do not hash to it."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ArtifactError(f"{path}: not a readable safetensors file ({exc})") from None
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ArtifactError(f"{path}: its sha256 differs from the one recorded beside it: damaged "
                            "or replaced (`genlab verify-cache --repair`, or rerun the stage that "
                            "wrote it)")
    try:
        return load(data)
    except SafetensorError as exc:
        raise ArtifactError(f"{path}: not a readable safetensors file ({exc})") from None


def columns_to_numpy(table: pa.Table, name: str) -> np.ndarray:
    """A column as numpy; a column of fixed-size lists, or of variable-length lists that all
    have one length, becomes a 2-D array (n, width)."""
    column = table.column(name).combine_chunks()
    if pa.types.is_fixed_size_list(column.type):
        width = column.type.list_size
        return column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), width)
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        lengths = set(pc.list_value_length(column).to_pylist())
        if len(lengths) > 1:
            raise ArtifactError(f"column {name!r} holds lists of lengths {sorted(lengths)}: "
                                "not one matrix")
        width = lengths.pop() if lengths else 0
        return column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), width)
    return column.to_numpy(zero_copy_only=False)


def matrix_column(x: np.ndarray) -> pa.FixedSizeListArray:
    """A 2-D array as one Parquet column of fixed-size lists (one row per example)."""
    x = np.ascontiguousarray(x)
    return pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), x.shape[1])
