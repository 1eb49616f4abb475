"""Exact k nearest neighbours of every row of a point cloud, in blocks: the search behind the
intrinsic-dimension estimators (:mod:`genlab.analyses.dimension.estimators`).

:func:`nearest_neighbors` runs in torch, on the device of its input, in row blocks (and on the CPU
column tiles) of the n×n distance matrix, so neither memory nor time needs more than one block at
once and large n runs on a GPU. Float64 data on the CPU are first screened in float32 by a
symmetric tiled search whose passes are compiled
(:mod:`genlab.analyses.dimension.neighbor_screen`), then re-ranked by exact float64 distances,
with a test that proves the selection exact or searches the row again in float64.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

BLOCK_ENTRIES = 2**24
"""Distances held at once by the blocked searches when ``chunk_size`` is None: 128 MiB in
float64, one block of rows against all n points."""


CPU_TILE = (512, 2048)
"""(rows, columns) of the score tiles of :func:`nearest_neighbors` on the CPU: 4 MiB in
float32, small enough to stay in cache between the matrix product and the pass over it."""

CPU_GROUP = 16
"""Columns per group in the cheap first pass over a tile (see :func:`_tiled_smallest`)."""

CPU_CELL = 1024
"""Rows per block, and columns per tile, of the symmetric float32 search on the CPU
(:func:`_symmetric_smallest`): 4 MiB tiles."""

CPU_FIRST_COLUMNS = 256
"""Columns of the first tile of each row block on the CPU, whose k smallest scores (a full
top-k, the expensive selection) set the rows' first thresholds."""


def _column_tiles(n: int, start: int, first: int, cols: int) -> list[tuple[int, int]]:
    """Column ranges [lo, hi) covering 0..n−1 once: a first one of width ``first`` at ``start``
    (moved left to fit), then on to n and from 0 up to where it began, each as wide as the
    columns already covered, up to ``cols``. Starting at the block's own rows gives data stored
    in a meaningful order (sorted, or grouped by class) tight thresholds from the first tile."""
    first = min(first, n)
    start = max(0, min(start, n - first))
    tiles, covered = [(start, start + first)], first
    for begin, end in ((start + first, n), (0, start)):
        lo = begin
        while lo < end:
            hi = min(end, lo + min(cols, covered))
            tiles.append((lo, hi))
            covered += hi - lo
            lo = hi
    return tiles


def _tiled_smallest(block: Tensor, row_ids: Tensor, X: Tensor, squares: Tensor, k: int,
                    cols: int, first: int) -> tuple[Tensor, Tensor]:
    """The k smallest scores ‖y‖² − 2x·y (the squared distance less ‖x‖², constant along a row)
    of each row x of ``block`` against the rows y of ``X`` (``squares`` = ‖y‖²), column
    ``row_ids[i]`` excluded from row i: (values, indices), unsorted.

    ``X`` is read in column tiles (:func:`_column_tiles`). The first tile's k smallest scores
    per row come from a full top-k and the largest of them is the row's threshold; every later
    tile is only compared with the thresholds, and the few entries below them are merged into
    the running k smallest (:func:`_merge_below`), which lowers the thresholds. A top-k costs
    some 20 times a comparison per entry on the CPU; with the columns in random order, a tile w
    wide after j columns seen holds about k·w/j entries below the thresholds, so tiles grow no
    faster than the columns seen (:func:`_column_tiles`) and a row meets O(k·log(n/first))
    entries to merge in all (243 a row for k = 42, n = 20k on the benchmark's data). Tiles whose
    width is a multiple of :data:`CPU_GROUP` are first reduced to the minima of column groups,
    and only the groups whose minimum is below the threshold are read. An entry is left out only
    when it is not below a threshold, which is at least the final k-th smallest: every left-out
    score is at least the largest kept one.
    """
    n, b = X.shape[0], block.shape[0]
    device, dtype = X.device, X.dtype
    local = torch.arange(b, device=device)
    lowest, highest = int(row_ids.min()), int(row_ids.max())
    tiles = _column_tiles(n, lowest, first, cols)
    widest = max(hi - lo for lo, hi in tiles)
    scores_buffer = torch.empty(b * widest, dtype=dtype, device=device)  # reused by every tile
    state = None  # (best_values, best_indices, thresholds) once the first tile is read
    for lo, hi in tiles:
        width = hi - lo
        scores = torch.addmm(squares[None, lo:hi], block, X[lo:hi].T, alpha=-2,
                             out=scores_buffer[:b * width].view(b, width))
        if lo <= highest and lowest < hi:
            own = row_ids - lo
            inside = (own >= 0) & (own < width)
            scores[local[inside], own[inside]] = math.inf
        if state is None:  # the first tile: width ≥ k, as first ≥ k + 1 or n ≤ first
            best_values, best_indices = scores.topk(k, dim=1, largest=False, sorted=False)
            best_indices += lo
            state = (best_values, best_indices, best_values.amax(dim=1))
            continue
        _merge_below(scores, lo, state)
    return best_values, best_indices


def _symmetric_smallest(X: Tensor, m: int) -> tuple[Tensor, Tensor]:
    """The m smallest float32 squared distances ‖x − y‖² of every row x of ``X`` (float64, on
    the CPU) to the other rows y: (values, indices), each (n, m), in no order within a row.

    Each tile of the distance matrix serves two searches (its rows' and its columns'), so only
    the tiles on and above the diagonal are computed: half the matrix products of a row-by-row
    search. The rows are first put in a spatial order (:func:`_spatial_order`), so that each
    block of :data:`CPU_CELL` consecutive rows is a compact cell of the data holding many of its
    own rows' neighbours, then cut into such blocks (each of at least m + 1 rows). Tiles are
    scored as ‖x‖² + ‖y‖² − 2x·y by one float32 matrix product of the data augmented with their
    squared norms; each diagonal tile (the diagonal masked) starts its rows' running m smallest
    and thresholds, then, for each block in turn, the columns after it, :data:`CPU_CELL` at a
    time, are compared both with their rows' thresholds and (transposed) with their columns',
    and the few entries below them are merged, lowering the thresholds. Those passes are
    compiled (:mod:`genlab.analyses.dimension.neighbor_screen`, which also states the guarantee:
    every left-out value is at least the largest kept one). Memory: the float32 data twice
    (augmented), the running m smallest of every row, and one tile.
    """
    from genlab.analyses.dimension import neighbor_screen  # numba: imported only where it is used

    n = X.shape[0]
    rows = max(CPU_CELL, m + 1)
    X32 = X.to(torch.float32)
    order = _spatial_order(X32, rows)
    X32 = X32.index_select(0, order)
    ones = torch.ones(n, 1, dtype=X32.dtype)
    squares = X32.double().square().sum(dim=1, keepdim=True).float()
    left = torch.cat([X32, squares, ones], dim=1)  # left·right = ‖x‖² + ‖y‖² − 2x·y
    right = torch.cat([X32 * -2, ones, squares], dim=1)
    del X32
    starts = list(range(0, n, rows))
    if len(starts) > 1 and n - starts[-1] < m + 1:
        starts.pop()  # the last block joins the one before it, so every block has m + 1 rows
    bounds = list(zip(starts, starts[1:] + [n], strict=True))
    values = np.empty((n, m), dtype=np.float32)
    indices = np.empty((n, m), dtype=np.int64)
    thresholds = np.empty(n, dtype=np.float32)
    widest = max(hi - lo for lo, hi in bounds)
    buffer = torch.empty(widest * max(widest, rows), dtype=left.dtype)
    for lo, hi in bounds:
        b = hi - lo
        tile = torch.mm(left[lo:hi], right[lo:hi].T, out=buffer[:b * b].view(b, b))
        tile.fill_diagonal_(math.inf)
        neighbor_screen.scan_diagonal(tile.numpy(), lo, values, indices, thresholds)
    for lo, hi in bounds:
        b = hi - lo
        for c_lo in range(hi, n, rows):
            c_hi = min(n, c_lo + rows)
            w = c_hi - c_lo
            tile = torch.mm(left[lo:hi], right[c_lo:c_hi].T, out=buffer[:b * w].view(b, w))
            neighbor_screen.scan_both_ways(tile.numpy(), lo, c_lo, values, indices, thresholds)
    found, candidates = torch.from_numpy(values), torch.from_numpy(indices)
    values = torch.empty_like(found).index_copy_(0, order, found)
    indices = torch.empty_like(candidates).index_copy_(
        0, order, order.index_select(0, candidates.view(-1)).view(n, m))
    return values, indices


def _spatial_order(X: Tensor, leaf: int) -> Tensor:
    """A permutation of the rows of ``X`` that puts nearby points close together: the rows are
    split recursively at the median of their projection on the leading principal direction
    (a few power iterations), at a multiple of ``leaf`` rows, until at most ``leaf`` are left,
    so that each block of ``leaf`` consecutive rows is one spatially compact cell."""
    n = X.shape[0]
    order = torch.arange(n, device=X.device)
    segments = [(0, n)]
    while segments:
        lo, hi = segments.pop()
        if hi - lo <= leaf:
            continue
        members = order[lo:hi]
        points = X.index_select(0, members)
        points -= points.mean(dim=0)
        direction = points[int(points.square().sum(dim=1).argmax())]
        for _ in range(3):
            direction = points.T @ (points @ direction)
            direction /= direction.norm().clamp_min(1e-30)
        order[lo:hi] = members.index_select(0, (points @ direction).argsort())
        mid = lo + leaf * math.ceil((hi - lo) / leaf / 2)
        segments += [(lo, mid), (mid, hi)]
    return order


def _merge_below(tile: Tensor, col0: int, state: tuple[Tensor, Tensor, Tensor]) -> None:
    """Merge the entries of ``tile`` (every row, columns col0.. of the scores) below their
    row's threshold into the running smallest of the rows."""
    threshold = state[2]
    b, w = tile.shape
    if w % CPU_GROUP or w < CPU_GROUP:
        hits = torch.lt(tile, threshold[:, None]).nonzero()
        if hits.shape[0]:
            rows, cols = hits.unbind(1)
            _merge_hits(rows, cols + col0, tile[rows, cols], state)
        return
    # the minimum of each group of columns j + t·stride (t < CPU_GROUP); only the rows with a
    # group below their threshold (a third of them in a typical tile) have their groups listed,
    # and only the groups whose minimum is below the row's threshold are read
    stride = w // CPU_GROUP
    lows = torch.amin(tile.view(b, CPU_GROUP, stride), dim=1)  # (b, stride)
    active = torch.lt(lows.amin(dim=1), threshold).nonzero().view(-1)
    if active.numel() == 0:
        return
    groups = torch.lt(lows.index_select(0, active),
                      threshold.index_select(0, active)[:, None]).nonzero()
    group_rows, group_cols = active.index_select(0, groups[:, 0]), groups[:, 1]
    # the members of the passing groups, (groups, CPU_GROUP), read through a view of the tile
    # without building their positions
    read = tile.unflatten(1, (CPU_GROUP, stride))[group_rows, :, group_cols]
    below = read < threshold.index_select(0, group_rows)[:, None]
    which, member = below.nonzero().unbind(1)  # by group, so by row
    _merge_hits(group_rows.index_select(0, which),
                group_cols.index_select(0, which) + member * stride + col0,
                read[which, member], state)


def _merge_hits(rows: Tensor, cols: Tensor, values: Tensor,
                state: tuple[Tensor, Tensor, Tensor]) -> None:
    """Merge the entries (``rows`` ascending, ``cols``, ``values``) of the distance matrix into
    the running smallest (values, indices) of those rows only, and lower their thresholds."""
    best_values, best_indices, thresholds = state
    device = values.device
    targets, inverse, counts = torch.unique_consecutive(rows, return_inverse=True,
                                                        return_counts=True)
    spread = int(counts.max())
    slots = (torch.arange(rows.numel(), device=device)
             + (inverse * spread - (counts.cumsum(0) - counts).index_select(0, inverse)))
    r = targets.numel()
    new_values = torch.full((r * spread,), math.inf, dtype=values.dtype, device=device)
    new_values.index_copy_(0, slots, values)
    new_indices = torch.zeros(r * spread, dtype=torch.long, device=device)
    new_indices.index_copy_(0, slots, cols)
    m = best_values.shape[1]
    merged, keep = torch.cat([best_values.index_select(0, targets),
                              new_values.view(r, spread)], dim=1).topk(
        m, dim=1, largest=False, sorted=False)
    indices = torch.cat([best_indices.index_select(0, targets),
                         new_indices.view(r, spread)], dim=1).gather(1, keep)
    best_values.index_copy_(0, targets, merged)
    best_indices.index_copy_(0, targets, indices)
    thresholds.index_copy_(0, targets, merged.amax(dim=1))


def _screen_width(k: int) -> int:
    """Candidates kept per row by the float32 screen of :func:`nearest_neighbors`: k plus a
    margin (an eighth of k, at least 2) for the exactness test to pass on. On centred data the
    float32 error bound is some 10⁻⁴ of the squared neighbour distances, so the (k + 2)-th
    candidate is nearly always beyond the k-th by more (1 row of the benchmark's 20k at k = 20
    fails the test and is searched again, at a small fraction of the time a wider screen would
    cost: every extra candidate adds screen merges and exact distances)."""
    return k + max(2, k // 8)


def nearest_neighbors(X: Tensor, k: int, chunk_size: int | None = None) -> tuple[Tensor, Tensor]:
    """The k nearest neighbours of every row of ``X`` among the other rows.

    Returns (distances, indices), each (n, k), sorted by increasing distance; a point is never
    its own neighbour (excluded by index, so an exact duplicate is a neighbour at distance 0).
    Rows are processed ``chunk_size`` at a time (None: 512 on the CPU, elsewhere as many as keep
    a block of them against all rows at :data:`BLOCK_ENTRIES` distances), against column tiles of
    the data (:data:`CPU_TILE` on the CPU, all rows elsewhere): each tile's scores ‖y‖² − 2x·y
    (the matrix-product form of the squared distance, less the row's constant ‖x‖²), the row's
    own index masked, its k smallest merged into a running top k (on the CPU only the entries
    below the row's running k-th smallest are merged, see :func:`_tiled_smallest`; a full top-k
    per tile cost 70% of the time). The product form is fast but
    loses relative precision at small distances, so the k selected distances are then recomputed
    as ‖x − y‖ from the differences and re-sorted: the distances are exact to rounding, and the
    selection can differ from the exact one only between neighbours whose distances differ by
    less than the product form's rounding.

    Float64 data on the CPU are first screened in float32 (twice the matrix-product speed): the
    m = k + max(2, ⌊k/8⌋) smallest float32 squared distances of each row are kept
    (:func:`_screen_width`; with ``chunk_size`` None by the symmetric search
    :func:`_symmetric_smallest`, which computes each distance tile once for two rows' searches,
    otherwise row block by row block as above), their distances recomputed in float64 from the
    differences, and the k nearest of them are accepted only if the k-th is provably closer than
    any point left out: every left-out value is at least the largest kept one, and a float32
    value is within 2(D + 12)·2⁻²⁴·(‖x‖ + max‖y‖)² of the exact one, the norms those of the data
    less their mean, on which the screen runs (input rounding plus a length-(D + 2) dot
    product's rounding, with a factor 2 to spare), so the accepted set is the
    exact k nearest up to float64 rounding. Rows that fail the test (near ties at the boundary,
    duplicates, data beyond float32's range) are searched again in float64 as above.
    """
    n = X.shape[0]
    if not 1 <= k < n:
        raise ValueError(f"need 1 ≤ k < n_samples, got k={k} with n_samples={n}")
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    cpu = X.device.type == "cpu"
    rows, cols = CPU_TILE if cpu else (max(1, BLOCK_ENTRIES // n), n)
    if chunk_size is not None:
        rows = chunk_size
    cols = max(1, min(n, cols))
    first = CPU_FIRST_COLUMNS if cpu else cols
    squares = X.square().sum(dim=1)
    screen = cpu and X.dtype == torch.float64
    if screen:
        # the float32 screen works on centred data: distances are unchanged, and its error
        # bound, which grows with the squared norms, shrinks (by 3.6 on the benchmark's data)
        centred = X - X.mean(dim=0)
        centred_squares = centred.square().sum(dim=1)
        norms = centred_squares.sqrt()
        radius = float(norms.max())
        screen = 2.0**-40 < radius < 2.0**40
    if screen:
        m = min(n - 1, _screen_width(k))
        slack32 = 2 * (X.shape[1] + 12) * 2.0**-24
        slack64 = 8 * (X.shape[1] + 10) * 2.0**-53
    symmetric = screen and chunk_size is None
    X32 = squares32 = None
    if symmetric:  # every row's candidates at once, each distance tile serving two rows' search
        all_values, all_candidates = _symmetric_smallest(centred, m)
    gather_buffer = None if cpu else torch.empty(  # reused by every row block
        min(rows, n) * (m if screen else k) * X.shape[1], dtype=X.dtype, device=X.device)
    all_distances, all_indices = [], []
    for start in range(0, n, rows):
        block = X[start:start + rows]
        row_ids = torch.arange(start, start + block.shape[0], device=X.device)
        if screen:
            own = slice(start, start + block.shape[0])
            if symmetric:  # values: squared distances
                values, indices = all_values[own], all_candidates[own]
                left_out = values.max(dim=1).values.double()
            else:  # values: squared distances less the row's squared norm
                if X32 is None:
                    X32 = centred.to(torch.float32)
                    squares32 = X32.double().square().sum(dim=1).float()
                values, indices = _tiled_smallest(X32[own], row_ids, X32, squares32, m, cols,
                                                  max(first, m + 1))
                left_out = centred_squares[own] + values.max(dim=1).values.double()
            exact = _distances(X, row_ids, indices, gather_buffer)
            kth = exact.kthvalue(k, dim=1).values
            left_out = left_out - slack32 * (norms[own] + radius) ** 2 - 2.0**-100
            unsafe = ~(kth.square() * (1 + slack64) < left_out)  # NaN counts as unsafe
            if bool(unsafe.any()):
                redo = unsafe.nonzero().reshape(-1)
                # in float64 on the centred data too: the product form loses less precision
                # to the norms there (it can still swap neighbours closer than its rounding)
                _, again = _tiled_smallest(centred[own][redo], row_ids[redo], centred,
                                           centred_squares, m, cols, max(first, m + 1))
                indices[redo] = again
                exact[redo] = _distances(X, row_ids[redo], again, gather_buffer)
        else:
            values, indices = _tiled_smallest(block, row_ids, X, squares, k, cols,
                                              max(first, k + 1))
            exact = _distances(X, row_ids, indices, gather_buffer)
        exact, order = exact.sort(dim=1, stable=True)
        all_distances.append(exact[:, :k])
        all_indices.append(indices.gather(1, order[:, :k]))
    return torch.cat(all_distances), torch.cat(all_indices)


def _distances(X: Tensor, row_ids: Tensor, indices: Tensor, buffer: Tensor | None) -> Tensor:
    """‖x − y‖ for each row x = X[row_ids[i]] and the rows y of ``X`` listed in row i of
    ``indices`` (b, m), from the differences: on the CPU by a compiled loop that reads the rows
    in place (:func:`genlab.analyses.dimension.neighbor_screen.pair_distances`), elsewhere from a
    gathered copy of the neighbours in ``buffer`` (at least b·m·D entries)."""
    if X.device.type == "cpu":
        from genlab.analyses.dimension import neighbor_screen

        points = X.numpy(force=True)
        distances = np.empty(tuple(indices.shape), dtype=points.dtype)
        neighbor_screen.pair_distances(points, row_ids.numpy(), indices.numpy(), distances)
        return torch.from_numpy(distances)
    b, m = indices.shape
    gathered = torch.index_select(X, 0, indices.reshape(-1),
                                  out=buffer[:b * m * X.shape[1]].view(b * m, X.shape[1]))
    return torch.linalg.vector_norm(gathered.view(b, m, -1).sub_(X[row_ids][:, None, :]), dim=2)


def compile_kernels() -> None:
    """Compile (or load from numba's on-disk cache) every kernel the CPU search uses, on a small
    float64 problem with more than one row block (both kinds of tile): ``make install`` runs it
    once, so that the first jobs of a pipeline do not each spend ~7 s compiling the same
    kernels side by side."""
    generator = torch.Generator().manual_seed(0)
    nearest_neighbors(torch.randn(CPU_CELL + 64, 3, generator=generator, dtype=torch.float64), 2)


__all__ = ["BLOCK_ENTRIES", "compile_kernels", "nearest_neighbors"]
