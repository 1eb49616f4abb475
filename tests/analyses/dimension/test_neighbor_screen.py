"""The compiled passes of the neighbour screen against a sort of the same numbers.

Each pass must leave every touched row's heap holding the m smallest of what it held before
and the entries it was shown (as a multiset: with ties, which equal entry is kept is free),
each index naming an entry of that value, ``thresholds`` equal to the heaps' largest, and the
heaps valid max-heaps. Entries are small integers, so ties are everywhere, and widths and row
counts are no multiples of the group size, so every tail path runs.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from genlab.analyses.dimension.neighbor_screen import GROUP, scan_both_ways, scan_diagonal


def assert_heaps(values: np.ndarray, indices: np.ndarray, thresholds: np.ndarray,
                 rows: np.ndarray, expected: np.ndarray, source: np.ndarray) -> None:
    """Rows ``rows`` of the state hold the m smallest of ``expected`` (len(rows), many), whose
    entry j is ``source`` column j's value (indices name columns of ``source``)."""
    m = values.shape[1]
    np.testing.assert_array_equal(np.sort(values[rows], axis=1),
                                  np.sort(expected, axis=1)[:, :m])
    np.testing.assert_array_equal(np.take_along_axis(source, indices[rows], axis=1),
                                  values[rows])
    np.testing.assert_array_equal(thresholds[rows], values[rows].max(axis=1))
    heaps = values[rows]
    for child in range(1, m):
        assert (heaps[:, (child - 1) // 2] >= heaps[:, child]).all()


@pytest.mark.parametrize(("b", "m"), [(23, 22), (40, 5), (GROUP * 22, 22), (GROUP * 9 + 7, 9)])
def test_diagonal_pass_keeps_each_rows_m_smallest(b: int, m: int) -> None:
    """Cells too narrow for the group-minimum first threshold (b < GROUP·m) and wide enough."""
    rng = np.random.default_rng(b)
    row0, n = 5, b + 12
    tile = rng.integers(0, 30, (b, b)).astype(np.float32)
    np.fill_diagonal(tile, np.inf)
    values = np.full((n, m), -1, np.float32)  # stale contents: the pass must start afresh
    indices = np.full((n, m), -1, np.int64)
    thresholds = np.full(n, -1, np.float32)
    scan_diagonal(tile, row0, values, indices, thresholds)
    rows = np.arange(row0, row0 + b)
    source = np.full((b, n), np.nan, np.float32)
    source[:, rows] = tile
    assert_heaps(values, indices, thresholds, rows, tile, source)
    assert (indices[rows] != rows[:, None]).all()  # the masked diagonal is never kept
    assert (values[:row0] == -1).all() and (values[row0 + b:] == -1).all()


@pytest.mark.parametrize(("b", "w", "m"), [(37, 50, 6), (GROUP, 3 * GROUP, 22), (3, 200, 4)])
def test_both_ways_pass_merges_rows_and_columns(b: int, w: int, m: int) -> None:
    rng = np.random.default_rng(w)
    row0, col0 = 2, 2 + b + 3
    n = col0 + w + 1
    tile = rng.integers(0, 40, (b, w)).astype(np.float32)
    # every row starts with a valid heap of m earlier candidates (a descending array is one),
    # at columns outside the tile, some rows full of values below all the tile's entries
    before = -np.sort(-rng.integers(0, 60, (n, m)).astype(np.float32), axis=1)
    before[::4] = -1
    earlier = n + np.arange(m) + rng.integers(0, n - m, (n, 1))  # distinct within a row
    values, indices = before.copy(), earlier.copy()
    thresholds = values[:, 0].copy()
    scan_both_ways(tile, row0, col0, values, indices, thresholds)

    # the value each (row, column) of the distance matrix holds for this check
    source = np.full((n, 2 * n), np.nan, np.float32)
    np.put_along_axis(source, earlier, before, axis=1)
    rows, columns = np.arange(row0, row0 + b), np.arange(col0, col0 + w)
    source[np.ix_(rows, columns)] = tile
    source[np.ix_(columns, rows)] = tile.T
    assert_heaps(values, indices, thresholds, rows, np.concatenate([before[rows], tile], 1),
                 source[rows])
    assert_heaps(values, indices, thresholds, columns,
                 np.concatenate([before[columns], tile.T], 1), source[columns])
    untouched = np.setdiff1d(np.arange(n), np.concatenate([rows, columns]))
    np.testing.assert_array_equal(values[untouched], before[untouched])
    np.testing.assert_array_equal(indices[untouched], earlier[untouched])


WITHOUT_CACHE = """
import numpy as np, torch
from numba.core.caching import NullCache
from genlab.analyses.dimension import neighbor_screen
from genlab.analyses.dimension.neighbors import nearest_neighbors
assert isinstance(neighbor_screen.scan_diagonal._cache, NullCache)
X = np.random.default_rng(0).standard_normal((300, 5))
distances, _ = nearest_neighbors(torch.as_tensor(X), 3)
full = np.linalg.norm(X[:, None] - X[None], axis=2)
np.fill_diagonal(full, np.inf)
np.testing.assert_allclose(distances.numpy(), np.sort(full, axis=1)[:, :3], rtol=1e-12)
print("ok")
"""


def test_kernels_compile_without_a_writable_cache_folder() -> None:
    """Where numba can write its cache nowhere (a read-only install and HOME; simulated by
    letting it look only where NUMBA_CACHE_DIR points, and setting none), ``cache=True`` raises
    at import: the kernels must then compile per process, not fail."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["NUMBA_CACHE_LOCATOR_CLASSES"] = "numba.core.caching.UserProvidedCacheLocator"
    done = subprocess.run([sys.executable, "-c", WITHOUT_CACHE], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
