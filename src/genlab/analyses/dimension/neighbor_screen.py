"""Compiled passes of the symmetric float32 neighbour screen, and exact distances (numba).

:func:`genlab.analyses.dimension.neighbors._symmetric_smallest` computes tiles of squared distances
by matrix products in torch and hands each tile here, where its few entries below their row's
threshold are merged into that row's running m smallest. Written as tensor operations (minima of
column groups, ``nonzero``, a ``topk`` over the merged rows), that merge cost as much as the
matrix products; compiled, each entry is read once or twice in vectorised loops and the few
below a threshold are merged one by one into a max-heap per row (MLE at n = 20k on one core:
the search went from 0.8 s to 0.55 s, of which 0.33 s are the matrix products). The state of
the search, shared by every tile:

- ``values`` (n, m), float32: each row's running m smallest, a max-heap (the largest first);
- ``indices`` (n, m), int64: their columns;
- ``thresholds`` (n,), float32: ``values[:, 0]``, kept contiguous for the column-wise test.

An entry is left out only when it is not below its row's threshold at that time, which never
falls below the row's final m-th smallest: every left-out value is at least the largest kept one,
the guarantee the exactness test of :func:`~genlab.analyses.dimension.neighbors.nearest_neighbors`
relies on. No pass assumes finite values (numba's ``fastmath=True`` would): tiles and thresholds
hold infinities (the masked diagonal, rows not filled yet).

The kernels are compiled on first use (7 s here) and cached on disk (the package's
``__pycache__``, or numba's user-wide cache where that is read-only, or ``NUMBA_CACHE_DIR``), so
later processes load them instead of compiling again; where no such folder can be written, each
process compiles them anew (:func:`_compiled`). The cache is local: DVC ignores ``__pycache__``
(.dvcignore), so numba's pickled cache files never travel through a remote.
"""

from __future__ import annotations

import numba
import numpy as np

GROUP = 16
"""Entries tested together before any of them is read one by one: a row is read as GROUP
slices whose elementwise minima flag the groups to read (:func:`_merge_row`), and the tiles
off the diagonal are tested GROUP rows at a time against their columns' thresholds."""


def _compiled(function=None, **options):
    """``numba.njit(cache=True, nogil=True)``, or without the on-disk cache where numba finds no
    folder it can write it to (it then refuses ``cache=True`` with a RuntimeError at import)."""
    def compile_(function):
        try:
            return numba.njit(cache=True, nogil=True, **options)(function)
        except RuntimeError as error:
            if "no locator available" not in str(error):
                raise
            return numba.njit(nogil=True, **options)(function)

    return compile_ if function is None else compile_(function)


@_compiled
def _replace_largest(heap, ids, value, index):
    """Put (value, index) in place of the largest entry of the max-heap (heap, ids)."""
    m = heap.shape[0]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= m:
            break
        if child + 1 < m and heap[child + 1] > heap[child]:
            child += 1
        if heap[child] <= value:
            break
        heap[i] = heap[child]
        ids[i] = ids[child]
        i = child
    heap[i] = value
    ids[i] = index


@_compiled
def _merge_row(line, row, col0, threshold, values, indices, thresholds, lows):
    """Merge the entries of ``line`` (columns col0.. of row ``row``) below ``threshold`` and
    below the row's running m-th smallest into the row's heap. The row is read as GROUP slices
    of S = len(line) // GROUP columns, ``lows`` holding their minima (:func:`_group_minima`,
    called by the caller, which may need them too); only the groups whose minimum is below the
    threshold, and the last len(line) mod GROUP entries, are read one by one."""
    heap, ids = values[row], indices[row]
    width = line.shape[0]
    stride = lows.shape[0]
    for s in range(stride):
        if lows[s] < threshold:
            for j in range(s, GROUP * stride, stride):
                value = line[j]
                if value < threshold:
                    _replace_largest(heap, ids, value, col0 + j)
                    threshold = min(threshold, heap[0])
    for j in range(GROUP * stride, width):
        value = line[j]
        if value < threshold:
            _replace_largest(heap, ids, value, col0 + j)
            threshold = min(threshold, heap[0])
    thresholds[row] = heap[0]


@_compiled
def _kth_smallest(data, heap, ids):
    """The len(heap)-th smallest entry of ``data`` (heap, ids: scratch of that length)."""
    heap[:] = np.inf
    for value in data:
        if value < heap[0]:
            _replace_largest(heap, ids, value, 0)
    return heap[0]


@_compiled
def _group_minima(line, lows):
    """lows[s] = the minimum of line[s + t·S] over t < GROUP, S = len(lows) (strided groups:
    elementwise minima of whole slices, which vectorise where a minimum of contiguous entries
    would not)."""
    stride = lows.shape[0]
    lows[:] = line[:stride]
    for t in range(1, GROUP):
        base = t * stride
        for s in range(stride):
            value = line[base + s]
            low = lows[s]
            lows[s] = low if low < value else value


@_compiled
def scan_diagonal(tile, row0, values, indices, thresholds):
    """Start the search of rows row0.. from their own cell: ``tile`` (b, b) holds the cell's
    squared distances, its diagonal masked (inf), b ≥ m + 1. Each row's heap is filled from
    nothing with the tile's entries at or below a first threshold just above t, the m-th
    smallest of the minima of GROUP-entry column groups: m groups have their minimum ≤ t, so at
    least m entries are, and only some 3% of the entries (the m-th smallest group minimum is
    about the (m + 4)-th smallest entry) have to be merged. Cells narrower than GROUP·m columns
    merge every entry below the running m-th smallest instead."""
    b = tile.shape[0]
    m = values.shape[1]
    stride = b // GROUP
    lows = np.empty(stride, dtype=tile.dtype)
    heap = np.empty(m, dtype=tile.dtype)
    ids = np.empty(m, dtype=np.int64)
    for i in range(b):
        row = row0 + i
        line = tile[i]
        values[row, :] = np.inf
        indices[row, :] = row0
        _group_minima(line, lows)
        first = np.inf
        if stride >= m:
            first = np.nextafter(_kth_smallest(lows, heap, ids), np.inf)
        _merge_row(line, row, row0, first, values, indices, thresholds, lows)


@_compiled
def scan_both_ways(tile, row0, col0, values, indices, thresholds):
    """Merge the entries of an off-diagonal ``tile`` (rows row0.., columns col0.., every column
    after every row) below their threshold into the heaps of its rows and, transposed, of its
    columns: the two sets of rows are disjoint, so each tile serves both searches. Per block of
    GROUP rows, one vectorised pass per row counts its entries below its threshold and keeps the
    block's column minima; a row is merged where its count is not 0, and a column of the block
    where its minimum is below the column's threshold."""
    b, w = tile.shape
    column_lows = np.empty(w, dtype=tile.dtype)
    lows = np.empty(w // GROUP, dtype=tile.dtype)
    for i0 in range(0, b, GROUP):
        i1 = min(b, i0 + GROUP)
        column_lows[:] = np.inf
        for i in range(i0, i1):
            line = tile[i]
            row = row0 + i
            threshold = thresholds[row]
            count = 0
            for j in range(w):
                value = line[j]
                count += value < threshold
                low = column_lows[j]
                column_lows[j] = low if low < value else value
            if count:
                _group_minima(line, lows)
                _merge_row(line, row, col0, threshold, values, indices, thresholds, lows)
        for j in range(w):
            column = col0 + j
            if column_lows[j] < thresholds[column]:
                heap, ids = values[column], indices[column]
                for i in range(i0, i1):
                    value = tile[i, j]
                    if value < heap[0]:
                        _replace_largest(heap, ids, value, row0 + i)
                thresholds[column] = heap[0]


@_compiled(fastmath={"reassoc", "contract"})
def pair_distances(X, rows, neighbors, out):
    """out[i, q] = ‖X[rows[i]] − X[neighbors[i, q]]‖ from the differences, the squares summed
    in float64. Fast-math here only reorders the sum (so it vectorises) and fuses multiply-adds:
    the result is exact to a few ulps either way; no infinity or NaN assumption is made."""
    b, m = neighbors.shape
    for i in range(b):
        x = X[rows[i]]
        for q in range(m):
            y = X[neighbors[i, q]]
            total = 0.0
            for d in range(x.shape[0]):
                difference = x[d] - y[d]
                total += difference * difference
            out[i, q] = np.sqrt(total)
