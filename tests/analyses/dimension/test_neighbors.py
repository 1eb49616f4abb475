"""The exact k-nearest-neighbour search (genlab.analyses.dimension.neighbors) against brute force:
every row block and chunk size, every path of the CPU search (small tiles, cells and groups
force the thresholded passes, the wrap-around, the float64 redo and the symmetric float32
search's edge cases), and data built to defeat the float32 screen.

Point clouds: standard Gaussian points in ℝ^d embedded in ℝ^100 as tanh(A z), the curved
embedding of test_estimators.py.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from genlab.analyses.dimension import neighbors
from genlab.analyses.dimension.neighbors import nearest_neighbors

AMBIENT = 100


@functools.cache
def embedded(d: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((n, d))
    weights = rng.standard_normal((AMBIENT, d)) / np.sqrt(d)
    return np.tanh(latent @ weights.T)


def brute_force_neighbors(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    distances = np.linalg.norm(X[:, None, :] - X[None, :, :], axis=2)
    np.fill_diagonal(distances, np.inf)
    order = np.argsort(distances, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(distances, order, axis=1), order


@pytest.mark.parametrize("chunk_size", [1, 7, 64, 250, None])
def test_chunked_neighbors_equal_brute_force(chunk_size: int | None) -> None:
    X = embedded(5, n=250, seed=2)
    ref_distances, ref_indices = brute_force_neighbors(X, 6)
    distances, indices = nearest_neighbors(torch.as_tensor(X), 6, chunk_size=chunk_size)
    np.testing.assert_array_equal(indices.numpy(), ref_indices)
    np.testing.assert_allclose(distances.numpy(), ref_distances, rtol=1e-13)


def test_self_is_excluded_by_index_so_a_duplicate_is_a_neighbour_at_zero() -> None:
    X = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.0, 3.0]], dtype=torch.float64)
    distances, indices = nearest_neighbors(X, 2)
    assert indices[0].tolist() == [2, 1] and indices[2].tolist() == [0, 1]
    assert distances[0, 0] == 0 and distances[2, 0] == 0
    assert all(i not in row for i, row in enumerate(indices.tolist()))


@pytest.mark.parametrize(("tile", "first", "group"), [((37, 64), 21, 16), ((16, 160), 48, 8),
                                                       ((5, 13), 3, 16)])
@pytest.mark.parametrize("order", ["random", "sorted", "offset"])
def test_thresholded_tiles_equal_brute_force(monkeypatch, tile, first, group, order) -> None:
    """Small tiles exercise every path of the CPU search: the first tile's top-k, the grouped
    and the plain threshold passes, the wrap-around, and (offset data: half the points moved
    10³ away along every axis, so that even the centred data's float32 scores are too coarse)
    the float64 redo; small cells (32, 80 and m + 1 rows, narrower than the compiled passes'
    GROUP·m) the symmetric float32 search's diagonal without a group-minimum first threshold,
    partial groups of rows and columns, and a last block joined to the one before it."""
    monkeypatch.setattr(neighbors, "CPU_TILE", tile)
    monkeypatch.setattr(neighbors, "CPU_FIRST_COLUMNS", first)
    monkeypatch.setattr(neighbors, "CPU_GROUP", group)
    monkeypatch.setattr(neighbors, "CPU_CELL", tile[1] // 2)  # the symmetric search
    X = embedded(3, n=400, seed=7)
    if order == "sorted":
        X = X[np.argsort(X[:, 0])]
    elif order == "offset":
        X = np.concatenate([X[:200], X[200:] + 1e3])
    for k in (1, 2, 7):
        ref_distances, ref_indices = brute_force_neighbors(X, k)
        distances, indices = nearest_neighbors(torch.as_tensor(X), k)
        np.testing.assert_array_equal(indices.numpy(), ref_indices)
        np.testing.assert_allclose(distances.numpy(), ref_distances, rtol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 20])
def test_symmetric_search_equals_brute_force_across_cells(k: int) -> None:
    """n = 2500 points fill several 1024-row cells of the default symmetric search (spatial
    order, diagonal top-m, thresholded tiles both ways, last block of 452 rows)."""
    X = embedded(5, n=2500, seed=4)
    distances = np.concatenate([np.linalg.norm(X[i:i + 50, None, :] - X[None, :, :], axis=2)
                                for i in range(0, len(X), 50)])  # in slices: 100 MB at a time
    np.fill_diagonal(distances, np.inf)
    ref_indices = np.argsort(distances, axis=1, kind="stable")[:, :k]
    ref_distances = np.take_along_axis(distances, ref_indices, axis=1)
    distances, indices = nearest_neighbors(torch.as_tensor(X), k)
    np.testing.assert_array_equal(indices.numpy(), ref_indices)
    np.testing.assert_allclose(distances.numpy(), ref_distances, rtol=1e-12)


def adversarial(kind: str, n: int = 1500, seed: int = 9) -> np.ndarray:
    """Data that stress the float32 screen and its exactness test: tight clusters far from each
    other and from the origin (float32 cannot resolve the within-cluster distances, so every
    row must fail the test and be redone in float64), an integer lattice (exact ties at every
    rank), and scales from 10⁻³ to 10³ in one cloud."""
    rng = np.random.default_rng(seed)
    if kind == "clusters":
        centres = rng.standard_normal((7, 16)) * 1e3 + 5e3
        return centres[rng.integers(0, 7, n)] + rng.standard_normal((n, 16)) * 1e-3
    if kind == "lattice":
        return rng.integers(0, 4, (n, 6)).astype(np.float64)  # 4096 sites: duplicates too
    scales = 10.0 ** rng.uniform(-3, 3, (n, 1))
    return rng.standard_normal((n, 12)) * scales


@pytest.mark.parametrize("cell", [None, 160])
@pytest.mark.parametrize("kind", ["clusters", "lattice", "scales"])
def test_neighbour_distances_equal_brute_force_on_adversarial_data(monkeypatch, kind: str,
                                                                    cell: int | None) -> None:
    """The k smallest distances of every row are the brute-force ones whatever the data (ties
    make the indices ambiguous, so each returned index is checked to lie at its distance), with
    the default cells and with small ones (n = 1500 is no multiple of either)."""
    if cell is not None:
        monkeypatch.setattr(neighbors, "CPU_CELL", cell)
    X = adversarial(kind)
    distances = np.concatenate([np.linalg.norm(X[i:i + 100, None, :] - X[None, :, :], axis=2)
                                for i in range(0, len(X), 100)])
    np.fill_diagonal(distances, np.inf)
    for k in (1, 2, 20):
        ref = np.sort(distances, axis=1)[:, :k]
        found, indices = nearest_neighbors(torch.as_tensor(X), k)
        np.testing.assert_allclose(found.numpy(), ref, rtol=1e-12, atol=0)
        rows = np.arange(len(X))[:, None]
        np.testing.assert_allclose(distances[rows, indices.numpy()], ref, rtol=1e-12, atol=0)


def test_compile_kernels_compiles_every_kernel_of_the_screen() -> None:
    """``make install`` runs compile_kernels so that no pipeline job compiles: it must reach
    every kernel of the screen that Python calls (a kernel it missed would be compiled by the
    first jobs); the private ones are compiled into their callers."""
    import numba

    from genlab.analyses.dimension import neighbor_screen

    kernels = {name: f for name, f in vars(neighbor_screen).items()
               if isinstance(f, numba.core.registry.CPUDispatcher) and not name.startswith("_")}
    assert set(kernels) == {"scan_diagonal", "scan_both_ways", "pair_distances"}
    neighbors.compile_kernels()
    assert {name for name, f in kernels.items() if not f.signatures} == set()
