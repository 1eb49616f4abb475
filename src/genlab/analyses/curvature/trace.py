"""Stochastic trace estimators with standard errors: Girard-Hutchinson and Hutch++.

Both use Rademacher probes g ∈ {±1}^P, for which E[g gᵀ] = I and so E[gᵀ A g] = Tr A.

**Hutchinson** (Girard 1989; Hutchinson 1989). With N probes, t̂ = (1/N) Σₙ gₙᵀ A gₙ. The N terms
are i.i.d. with variance σ² = 2(‖A‖_F² − Σᵢ A_ii²), so the standard error of t̂ is σ/√N,
estimated by SE = s/√N with s the sample standard deviation of the N terms.

**Hutch++** (Meyer, Musco, Musco & Woodruff, SOSA 2021). Split 3N products in three: sketch an
orthonormal Q = orth(A S) from N probes S (N products); take the trace on range(Q) exactly,
Tr(QᵀAQ) (N products); and estimate the trace of the deflated remainder
R = (I − QQᵀ) A (I − QQᵀ) by Hutchinson with N fresh probes G (N products). Given Q, the first term
is a constant and E[t̂ | Q] = Tr(QQᵀA) + Tr((I − QQᵀ)A) = Tr A (cyclic trace, (I − QQᵀ)² = I − QQᵀ)
for every Q. Hence, by the law of total variance,

    Var t̂ = E_Q[Var(t̂ | Q)] + Var_Q(E[t̂ | Q]) = E_Q[Var(t̂ | Q)],

all of it from the Hutchinson part on R, and SE = s_R/√N with s_R the sample standard deviation
of the N deflated terms gₙᵀ R gₙ. It is smaller than Hutchinson's whenever A's spectrum decays
(‖R‖_F ≪ ‖A‖_F), which is why Hutch++ needs O(1/ε) rather than O(1/ε²) products.

Both SEs are plug-in estimates from N i.i.d. terms: (t̂ − Tr A)/SE is close to a standard normal
once N ≳ 30, so |t̂ − Tr A| > 3 SE has probability ≈ 0.3%.

The probes are drawn column by column exactly as ``curvlinops.sampling.rademacher`` draws them
from torch's global generator, so with the same seed these estimates equal
``curvlinops.hutchinson_trace`` and ``curvlinops.hutchpp_trace`` (a test checks it); ours take an
explicit generator and also return the per-probe terms behind the SE.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from genlab.analyses.settings import TraceMethod

MatMat = Callable[[Tensor], Tensor]  # M (P, K) ↦ A M (P, K), A symmetric


@dataclass(frozen=True)
class TraceResult:
    estimate: float
    standard_error: float  # of ``estimate``; see the module docstring for each method
    num_matvecs: int  # products with A actually taken
    method: TraceMethod


def rademacher(dim: int, num: int, generator: torch.Generator, dtype: torch.dtype,
               device: torch.device | str = "cpu") -> Tensor:
    """(dim, num) i.i.d. ±1 entries, drawn on the CPU generator (so the same on every device)."""
    columns = [torch.empty(dim, dtype=dtype).bernoulli_(0.5, generator=generator).mul_(2).sub_(1)
               for _ in range(num)]
    return torch.stack(columns, dim=1).to(device)


def _mean_and_se(terms: Tensor) -> tuple[float, float]:
    return float(terms.mean()), float(terms.std(correction=1)) / math.sqrt(terms.numel())


def hutchinson_trace(matmat: MatMat, dim: int, num_matvecs: int, generator: torch.Generator,
                     dtype: torch.dtype = torch.float64,
                     device: torch.device | str = "cpu") -> TraceResult:
    """Girard-Hutchinson: the mean of gₙᵀ A gₙ over ``num_matvecs`` Rademacher probes."""
    if num_matvecs < 2:
        raise ValueError(f"a standard error needs at least 2 probes, got {num_matvecs}")
    probes = rademacher(dim, num_matvecs, generator, dtype, device)
    terms = (probes * matmat(probes)).sum(dim=0)  # gₙᵀ A gₙ for each column n
    estimate, se = _mean_and_se(terms)
    return TraceResult(estimate, se, num_matvecs, "hutchinson")


def hutchpp_trace(matmat: MatMat, dim: int, num_matvecs: int, generator: torch.Generator,
                  dtype: torch.dtype = torch.float64,
                  device: torch.device | str = "cpu") -> TraceResult:
    """Hutch++: exact trace on a sketched top subspace plus Hutchinson on the rest."""
    if num_matvecs % 3 or num_matvecs < 6:
        raise ValueError(f"Hutch++ splits its products in three thirds of at least 2 each; "
                         f"num_matvecs must be a multiple of 3 and ≥ 6, got {num_matvecs}")
    n = num_matvecs // 3
    sketch = matmat(rademacher(dim, n, generator, dtype, device))
    q, _ = torch.linalg.qr(sketch)  # (P, min(P, n)) orthonormal, even if A S is rank-deficient
    exact_part = torch.einsum("ij,ij->", q, matmat(q))  # Tr(Qᵀ A Q)
    probes = rademacher(dim, n, generator, dtype, device)
    deflated = probes - q @ (q.T @ probes)  # (I − QQᵀ) G
    terms = (deflated * matmat(deflated)).sum(dim=0)  # gₙᵀ R gₙ
    remainder, se = _mean_and_se(terms)
    return TraceResult(float(exact_part) + remainder, se, 2 * n + q.shape[1], "hutchpp")


ESTIMATORS: dict[str, Callable[..., TraceResult]] = {"hutchinson": hutchinson_trace,
                                                     "hutchpp": hutchpp_trace}

__all__ = ["ESTIMATORS", "MatMat", "TraceMethod", "TraceResult", "hutchinson_trace",
           "hutchpp_trace", "rademacher"]
