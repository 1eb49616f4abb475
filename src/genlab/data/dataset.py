"""The in-memory dataset every generator returns, and its Parquet form.

Label corruption is drawn once with the data: every training point carries a uniform draw
``u_corrupt`` and a uniformly drawn class ``y_random``. The labels at corruption level p are
``y_random where u_corrupt < p else y``. Runs at different p therefore share one dataset, the
corrupted sets are nested in p, and which labels were corrupted is recorded, not re-drawn.

Regression data (``n_classes == 0``) stores float64 targets in ``y`` and has no corruption draws.
A split may name a group per point (``group``, e.g. "strong" / "weak_only") when a generator's
test set mixes sub-populations that are scored apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from genlab.io import columns_to_numpy, matrix_column


@dataclass(frozen=True)
class Split:
    x: np.ndarray  # (n, d) float32
    y: np.ndarray  # (n,) int64 clean labels, or float64 targets when n_classes == 0 (regression)
    y_random: np.ndarray | None = None  # (n,) int64, uniformly drawn classes
    u_corrupt: np.ndarray | None = None  # (n,) float64 in [0, 1)
    group: np.ndarray | None = None  # (n,) str, the sub-population each point belongs to

    def __post_init__(self) -> None:
        n = len(self.x)
        for name in ("y", "y_random", "u_corrupt", "group"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise ValueError(f"{name} has {len(value)} rows, x has {n}")


@dataclass(frozen=True)
class Dataset:
    train: Split
    test: Split
    n_classes: int
    info: dict[str, Any] = field(default_factory=dict)  # generator, settings, ground truth


def corrupt_labels(split: Split, p: float) -> tuple[np.ndarray, np.ndarray]:
    """Labels at corruption level ``p`` and the mask of points whose label was replaced.

    A replaced label is a uniform class, so it equals the true one with probability 1/C.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"label corruption must be in [0, 1], got {p}")
    if p == 0.0:
        return split.y.copy(), np.zeros(len(split.y), dtype=bool)
    if split.y_random is None or split.u_corrupt is None:
        raise ValueError("this dataset was generated without label-corruption draws")
    replaced = split.u_corrupt < p
    return np.where(replaced, split.y_random, split.y), replaced


def corruption_draws(rng: np.random.Generator, n: int,
                     n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(u_corrupt, y_random)`` for ``n`` points from one stream: u first, then the classes.

    The same order :mod:`genlab.data.gaussian_mixture` draws them in, so every generator's
    corruption draws mean the same thing.
    """
    u_corrupt = rng.random(n)
    y_random = rng.integers(0, n_classes, size=n).astype(np.int64)
    return u_corrupt, y_random


def _target_dtype(y: np.ndarray) -> type[np.generic]:
    # Float targets (regression) keep their values; anything else is a class index.
    return np.float64 if np.issubdtype(y.dtype, np.floating) else np.int64


def split_to_table(split: Split) -> pa.Table:
    columns: dict[str, pa.Array] = {"x": matrix_column(split.x.astype(np.float32)),
                                    "y": pa.array(split.y.astype(_target_dtype(split.y)))}
    if split.y_random is not None:
        columns["y_random"] = pa.array(split.y_random.astype(np.int64))
    if split.u_corrupt is not None:
        columns["u_corrupt"] = pa.array(split.u_corrupt.astype(np.float64))
    if split.group is not None:
        columns["group"] = pa.array([str(g) for g in split.group], pa.string())
    return pa.table(columns)


def table_to_split(table: pa.Table) -> Split:
    names = set(table.column_names)
    y_type = np.float64 if pa.types.is_floating(table.schema.field("y").type) else np.int64
    return Split(
        x=columns_to_numpy(table, "x").astype(np.float32),
        y=columns_to_numpy(table, "y").astype(y_type),
        y_random=columns_to_numpy(table, "y_random").astype(np.int64)
        if "y_random" in names else None,
        u_corrupt=columns_to_numpy(table, "u_corrupt") if "u_corrupt" in names else None,
        group=np.asarray(table.column("group").to_pylist(), dtype=str)
        if "group" in names else None,
    )


def dataset_to_tables(ds: Dataset) -> tuple[pa.Table, pa.Table]:
    return split_to_table(ds.train), split_to_table(ds.test)


def dataset_from_tables(train: pa.Table, test: pa.Table, info: dict[str, Any]) -> Dataset:
    return Dataset(train=table_to_split(train), test=table_to_split(test),
                   n_classes=int(info["n_classes"]), info=info)
