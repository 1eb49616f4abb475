"""Hutchinson and Hutch++ trace estimates and their standard errors, on dense matrices."""

from __future__ import annotations

import curvlinops
import pytest
import torch
from torch import Tensor

from genlab.analyses.curvature.trace import hutchinson_trace, hutchpp_trace

P = 60


def symmetric(eigenvalues: Tensor, seed: int = 0) -> Tensor:
    generator = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(P, P, generator=generator, dtype=torch.float64))
    return u @ torch.diag(eigenvalues) @ u.T


# a decaying spectrum with both signs, like a Hessian's: a few outliers over a bulk near 0
SPECTRUM = torch.cat([torch.tensor([8.0, 5.0, 3.0, -2.0], dtype=torch.float64),
                      0.3 * torch.linspace(-1.0, 1.0, P - 4, dtype=torch.float64)])
A = symmetric(SPECTRUM)


def matmat(M: Tensor) -> Tensor:
    return A @ M


@pytest.mark.parametrize(("ours", "theirs"), [(hutchinson_trace, curvlinops.hutchinson_trace),
                                              (hutchpp_trace, curvlinops.hutchpp_trace)])
def test_same_stream_same_estimate_as_curvlinops(ours, theirs) -> None:
    with torch.random.fork_rng():  # curvlinops draws from the global generator
        torch.manual_seed(11)
        expected = float(theirs(A, 30))
    got = ours(matmat, P, 30, torch.Generator().manual_seed(11))
    assert got.estimate == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("estimator", [hutchinson_trace, hutchpp_trace])
def test_standard_error_is_calibrated(estimator) -> None:
    """Over 400 seeds, (estimate − Tr A)/SE behaves like a standard normal: the SE is neither
    too small (the 3-SE tests elsewhere would fail too often) nor too large (they would be weak).
    Seeds 0-399 are fixed, so the outcome is too; the bounds are ~4σ of the sampling error of
    each statistic from 400 draws, widened for the t tails of an SE estimated from 20 terms
    (Hutch++ with 60 products: P(|t₁₉| > 3) ≈ 0.7%, std √(19/17) ≈ 1.06)."""
    exact = float(SPECTRUM.sum())
    results = [estimator(matmat, P, 60, torch.Generator().manual_seed(s)) for s in range(400)]
    z = torch.tensor([(r.estimate - exact) / r.standard_error for r in results])
    assert abs(float(z.mean())) < 0.25
    assert 0.85 < float(z.std()) < 1.2
    assert float((z.abs() > 3).float().mean()) < 0.02


def test_hutchinson_variance_matches_its_formula() -> None:
    """Var(gᵀAg) = 2(‖A‖_F² − Σᵢ A_ii²) for Rademacher g: the mean squared SE over many seeds
    is that over N."""
    n = 30
    variance = 2 * (float(A.square().sum()) - float(A.diagonal().square().sum()))
    se2 = [hutchinson_trace(matmat, P, n, torch.Generator().manual_seed(s)).standard_error ** 2
           for s in range(400)]
    assert sum(se2) / len(se2) == pytest.approx(variance / n, rel=0.1)


def test_hutchpp_is_exact_when_the_sketch_spans_the_range() -> None:
    low_rank = torch.cat([torch.tensor([4.0, -2.0, 1.0], dtype=torch.float64),
                          torch.zeros(P - 3, dtype=torch.float64)])
    B = symmetric(low_rank, seed=1)
    result = hutchpp_trace(lambda M: B @ M, P, 12, torch.Generator().manual_seed(0))
    assert result.estimate == pytest.approx(3.0, abs=1e-12)
    assert result.standard_error < 1e-12
    assert result.num_matvecs == 12


def test_hutchpp_beats_hutchinson_on_a_decaying_spectrum() -> None:
    plain, plus = (f(matmat, P, 30, torch.Generator().manual_seed(0)).standard_error
                   for f in (hutchinson_trace, hutchpp_trace))
    assert plus < plain / 2


def test_rejects_budgets_without_a_standard_error() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        hutchinson_trace(matmat, P, 1, torch.Generator())
    with pytest.raises(ValueError, match="multiple of 3"):
        hutchpp_trace(matmat, P, 10, torch.Generator())
    with pytest.raises(ValueError, match="multiple of 3"):
        hutchpp_trace(matmat, P, 3, torch.Generator())
