"""The benchmarks' ``--json PATH``: the figures a run printed, as one JSON object.

Standard library only, so that a benchmark stays as cheap to import as it was. Numbers are written
at full precision (the printed tables round them); a figure that is not a finite number (a method
that did not reach its target within its cap, an undefined ratio) is written as null, so the file
is strict JSON. The file is written to a temporary name and renamed, so a reader never sees half
of it."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with every float that is not finite replaced by None, tuples as lists, keys as
    strings, and numpy/torch scalars as Python numbers (anything with ``.item()``)."""
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(path: str | Path | None, record: dict[str, Any]) -> None:
    """Write ``record`` to ``path`` (nothing when path is None)."""
    if path is None:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(finite(record), indent=2, ensure_ascii=False,
                                  allow_nan=False) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def add_json_argument(parser: Any) -> None:
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="also write the measured figures to PATH as one JSON object "
                        "(the printed output is unchanged)")
