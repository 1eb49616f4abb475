"""Lanczos with full reorthogonalisation against dense float64 eigendecompositions."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from genlab.analyses.curvature.lanczos import lanczos, quadrature, ritz_pairs

P = 80


def symmetric(eigenvalues: Tensor, seed: int = 0) -> Tensor:
    """U diag(λ) Uᵀ with a random orthogonal U: a matrix whose spectrum we choose."""
    generator = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(len(eigenvalues), len(eigenvalues), generator=generator,
                                       dtype=torch.float64))
    return u @ torch.diag(eigenvalues) @ u.T


def clustered_spectrum() -> Tensor:
    """Five top eigenvalues 1e-3 apart above a bulk in [−1, 1]: the case where Lanczos without
    reorthogonalisation returns ghost copies of λ₁ instead of λ₂ … λ₅."""
    top = torch.tensor([10.0, 9.999, 9.998, 9.997, 9.996], dtype=torch.float64)
    return torch.cat([top, torch.linspace(-1.0, 1.0, P - 5, dtype=torch.float64)])


def start(seed: int = 1, runs: int | None = None) -> Tensor:
    generator = torch.Generator().manual_seed(seed)
    shape = (P,) if runs is None else (P, runs)
    return torch.randn(*shape, generator=generator, dtype=torch.float64)


def test_clustered_top_eigenvalues_without_ghosts() -> None:
    A = symmetric(clustered_spectrum())
    t = lanczos(lambda M: A @ M, start(), 60)
    basis = t.basis[0]
    # full reorthogonalisation keeps the basis orthonormal to rounding after 60 steps ...
    torch.testing.assert_close(basis @ basis.T, torch.eye(60, dtype=torch.float64), rtol=0,
                               atol=1e-13)
    # ... so T = QᵀAQ, and A Q = Q T + β_m q_{m+1} e_mᵀ leaves only the last column's residual
    torch.testing.assert_close(t.matrix()[0], basis @ A @ basis.T, rtol=0, atol=1e-12)
    # ... and the top five Ritz values are the five distinct eigenvalues, not λ₁ five times
    values, vectors, residuals = ritz_pairs(t, 5)
    torch.testing.assert_close(values[0], clustered_spectrum()[:5], rtol=1e-10, atol=0)
    actual = torch.linalg.vector_norm(A @ vectors[0].T - vectors[0].T * values[0], dim=0)
    torch.testing.assert_close(residuals[0], actual, rtol=0, atol=1e-12)


def test_early_stop_at_tolerance() -> None:
    spectrum = torch.cat([torch.tensor([5.0, 3.0], dtype=torch.float64),
                          torch.linspace(0.0, 1.0, P - 2, dtype=torch.float64)])
    A = symmetric(spectrum, seed=2)
    t = lanczos(lambda M: A @ M, start(), 60, tol=1e-8, k=2)
    assert t.steps < 60
    values, vectors, residuals = ritz_pairs(t, 2)
    assert float(residuals.max()) <= 1e-8 * 5.0
    # an eigenvalue lies within residual²/gap of each converged Ritz value
    torch.testing.assert_close(values[0], spectrum[:2], rtol=1e-12, atol=0)
    # unit eigenvectors with the sign convention: largest-magnitude entry positive
    v = vectors[0]
    assert bool((v.gather(1, v.abs().argmax(1, keepdim=True)) > 0).all())


def test_invariant_subspace_restarts_with_weightless_nodes() -> None:
    """Three distinct eigenvalues: the Krylov space of any start is invariant after 3 steps."""
    spectrum = torch.tensor([2.0, 1.0, -1.0], dtype=torch.float64).repeat_interleave(
        torch.tensor([10, 30, 40]))
    A = symmetric(spectrum, seed=3)
    q = start(seed=4)
    t = lanczos(lambda M: A @ M, q, 10, generator=torch.Generator().manual_seed(0))
    # after step 3 the residual is rounding noise (~1e-15): either it is below the breakdown
    # threshold and the run restarts with coupling 0, or the noise, orthogonalised and
    # normalised, serves as the new direction; both keep T = QᵀAQ with a negligible coupling
    assert t.steps == 10 and float(t.betas[0, 2]) < 1e-13
    basis = t.basis[0]
    torch.testing.assert_close(basis @ basis.T, torch.eye(10, dtype=torch.float64), rtol=0,
                               atol=1e-13)
    torch.testing.assert_close(t.matrix()[0], basis @ A @ basis.T, rtol=0, atol=1e-12)
    nodes, weights = quadrature(t)
    # the quadrature is exact: weight on each distinct eigenvalue = |projection of q̂ onto its
    # eigenspace|², nothing on the restarted block's nodes
    q = q / torch.linalg.vector_norm(q)
    values, vectors = torch.linalg.eigh(A)
    for value in (2.0, 1.0, -1.0):
        space = vectors[:, (values - value).abs() < 1e-8]
        expected = float(torch.linalg.vector_norm(space.T @ q) ** 2)
        got = float(weights[0][(nodes[0] - value).abs() < 1e-8].sum())
        assert got == pytest.approx(expected, abs=1e-12)
    assert float(weights.sum()) == pytest.approx(1.0, abs=1e-12)


def test_exact_breakdown_restarts() -> None:
    """An exact eigenvector of a diagonal matrix leaves a residual of exactly 0: the run must
    restart from a fresh orthogonal vector (coupling 0) rather than divide by zero."""
    spectrum = torch.linspace(1.0, 2.0, P, dtype=torch.float64)
    A = torch.diag(spectrum)
    e = torch.zeros(P, dtype=torch.float64)
    e[5] = 1.0
    t = lanczos(lambda M: A @ M, e, 6, generator=torch.Generator().manual_seed(0))
    assert t.steps == 6 and float(t.betas[0, 0]) == 0.0
    assert bool(torch.isfinite(t.basis).all())
    basis = t.basis[0]
    torch.testing.assert_close(basis @ basis.T, torch.eye(6, dtype=torch.float64), rtol=0,
                               atol=1e-13)
    torch.testing.assert_close(t.matrix()[0], basis @ A @ basis.T, rtol=0, atol=1e-12)
    nodes, weights = quadrature(t)  # all the weight on the start's own eigenvalue
    assert float(weights[0][(nodes[0] - spectrum[5]).abs() < 1e-12].sum()) == pytest.approx(1.0)
    # with a tolerance, the invariant start counts as converged after its one step
    assert lanczos(lambda M: A @ M, e, 6, tol=1e-8).steps == 1


def test_full_quadrature_is_exact() -> None:
    """P steps span ℝ^P: Σ τ f(θ) = q̂ᵀ f(A) q̂ for any f, here exp."""
    spectrum = torch.linspace(-2.0, 3.0, P, dtype=torch.float64)
    A = symmetric(spectrum, seed=5)
    q = start(seed=6)
    nodes, weights = quadrature(lanczos(lambda M: A @ M, q, P))
    torch.testing.assert_close(nodes[0], spectrum, rtol=0, atol=1e-10)
    q = q / torch.linalg.vector_norm(q)
    expected = q @ torch.linalg.matrix_exp(A) @ q
    torch.testing.assert_close((weights[0] * nodes[0].exp()).sum(), expected, rtol=1e-10, atol=0)


def test_batched_runs_equal_separate_runs() -> None:
    A = symmetric(clustered_spectrum(), seed=7)
    block = start(seed=8, runs=3)
    together = lanczos(lambda M: A @ M, block, 25)
    for r in range(3):
        alone = lanczos(lambda M: A @ M, block[:, r], 25)
        torch.testing.assert_close(together.alphas[r], alone.alphas[0], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(together.betas[r], alone.betas[0], rtol=1e-10, atol=1e-12)


def test_zero_matrix_and_bad_inputs() -> None:
    t = lanczos(lambda M: torch.zeros_like(M), start(), 20, tol=1e-6)
    assert t.steps == 1  # invariant at once; its Ritz value is exact
    values, _, residuals = ritz_pairs(t, 1)
    assert float(values[0, 0]) == 0.0 and float(residuals[0, 0]) == 0.0
    with pytest.raises(ValueError, match="nonzero"):
        lanczos(lambda M: M, torch.zeros(P, dtype=torch.float64), 5)
    with pytest.raises(ValueError, match="k=6"):
        lanczos(lambda M: M, start(), 5, k=6)
