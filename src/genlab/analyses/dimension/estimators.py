"""Intrinsic dimension of a point cloud, and the label sharpness of a labelled one.

Data in ℝ^D often lie near a manifold of much lower dimension d; d, not D, sets how many
samples a smooth function on the data needs (a nonparametric rate N^(−1/d)), and the intrinsic
dimension of a network's hidden representations tracks its generalisation (Ansuini et al.
2019: low in the last hidden layer of a network that generalises, not of one trained on random
labels). The estimators here read d from nearest-neighbour distances, which on a d-dimensional
manifold with a smooth density behave locally like those of a homogeneous Poisson process in
ℝ^d: the number of points within r of x grows as r^d.

- :class:`TwoNN` (Facco, d'Errico, Rodriguez & Laio 2017): the ratio μ = r₂/r₁ of each point's
  second to first neighbour distance follows a Pareto law F(μ) = 1 − μ^(−d) whatever the density,
  so −log(1 − F(μ)) = d·log μ, a line through the origin fitted to the empirical F.
- :class:`MLE` (Levina & Bickel 2004, with the average of MacKay & Ghahramani 2005): the
  likelihood of the k nearest-neighbour distances of each point under that Poisson process.
- :func:`label_sharpness` (Konz & Mazurowski 2024): K̂_F, the largest label change per unit
  input distance among sampled pairs, a Lipschitz-constant estimate of the labelling function.

The estimators follow scikit-learn's style (settings in the constructor, ``fit(X)`` returns the
estimator, results in attributes ending in ``_``) and run in torch: float64 by default, on the
device of the input tensor (numpy input runs on the CPU), with nearest neighbours found in row
blocks (:func:`genlab.analyses.dimension.neighbors.nearest_neighbors`), so neither memory nor
time needs more than one block of the n×n distance matrix at once and large n runs on a GPU.

Duplicate points have no defined distance ratio (r₁ = 0 makes μ = ∞ and log(T_k/T_j) = ∞):
scikit-dimension 0.5.0 drops such points from TwoNN with a warning and returns an MLE of exactly 0
without one. Here the rule is explicit (``duplicates``): ``"raise"`` (the default) refuses data
with identical rows and says how many there are; ``"drop"`` keeps the first occurrence of each
distinct row (``indices_`` lists the rows used) before any distance is computed. Distinct rows at
distance 0 (their differences underflow in the working dtype) always raise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from genlab.analyses.dimension.neighbors import BLOCK_ENTRIES, nearest_neighbors

Duplicates = Literal["raise", "drop"]
MLEAverage = Literal["inverse", "mean"]


# ------------------------------------------------------------------------------------ helpers


def as_points(X: Tensor | np.ndarray, dtype: torch.dtype = torch.float64) -> Tensor:
    """``X`` as an (n, D) tensor of ``dtype``: a torch tensor stays on its device, anything else
    goes through ``torch.as_tensor`` onto the CPU. Rows must be finite."""
    points = (X.detach() if isinstance(X, Tensor) else torch.as_tensor(np.asarray(X)))
    points = points.to(dtype)
    if points.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {tuple(points.shape)}")
    if not bool(torch.isfinite(points).all()):
        raise ValueError("X holds NaN or infinite values")
    return points


def distinct_rows(X: Tensor) -> Tensor:
    """Indices of the first occurrence of each distinct row of ``X``, ascending, so
    ``X[distinct_rows(X)]`` keeps the data's order. Rows are equal when every entry compares
    equal (so 0.0 and −0.0 match); O(n log n) by sorting, never pairwise."""
    n = X.shape[0]
    if n == 0:
        return torch.zeros(0, dtype=torch.long, device=X.device)
    if _hashes_distinct(X):
        return torch.arange(n, device=X.device)
    _, inverse = torch.unique(X, dim=0, return_inverse=True)
    first = torch.full((int(inverse.max()) + 1,), n, dtype=torch.long, device=X.device)
    first = first.scatter_reduce(0, inverse, torch.arange(n, device=X.device), reduce="amin")
    return first.sort().values


_BITS = {8: torch.int64, 4: torch.int32, 2: torch.int16}


def _multipliers(count: int, device: torch.device) -> Tensor:
    """``count`` fixed odd 64-bit multipliers (SplitMix64's outputs), as int64."""
    values, state = [], 0
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) % 2**64
        z = (state ^ (state >> 30)) * 0xBF58476D1CE4E5B9 % 2**64
        z = (z ^ (z >> 27)) * 0x94D049BB133111EB % 2**64
        z = (z ^ (z >> 31)) | 1
        values.append(z - 2**64 if z >= 2**63 else z)
    return torch.tensor(values, dtype=torch.int64, device=device)


def _hashes_distinct(X: Tensor) -> bool:
    """Whether a hash of each row's bits (after −0.0 → 0.0) differs between all rows, which
    proves the rows distinct in O(n·D + n log n); ``torch.unique(X, dim=0)``, the exact test, is
    many times slower. Equal rows have equal bits, hence equal hashes: a collision only sends
    the caller to the exact test."""
    if not X.is_floating_point() or X.element_size() not in _BITS or X.shape[0] < 2:
        return False
    bits = (X + 0.0).contiguous().view(_BITS[X.element_size()]).to(torch.int64)
    mixed = (bits ^ (bits >> 32)) * _multipliers(X.shape[1], X.device)  # int64 products wrap
    mixed ^= mixed >> 29
    hashes = mixed.sum(dim=1)  # a sum of integers: the same whatever the order
    ordered = hashes.sort().values
    return not bool((ordered[1:] == ordered[:-1]).any())


def _deduplicate(X: Tensor, duplicates: Duplicates) -> tuple[Tensor, Tensor, int]:
    """(rows to use, their indices into X, number of rows removed) under the duplicates rule."""
    if duplicates not in ("raise", "drop"):
        raise ValueError(f"duplicates must be 'raise' or 'drop', got {duplicates!r}")
    keep = distinct_rows(X)
    removed = X.shape[0] - keep.numel()
    if removed and duplicates == "raise":
        raise ValueError(
            f"X has {removed} duplicate rows (repeats of {_repeated_rows(X)} distinct points): "
            "their neighbour distance is 0, where the estimators are undefined. Remove them or "
            "pass duplicates='drop' to keep the first occurrence of each distinct row.")
    return (X[keep] if removed else X), keep, removed


def _repeated_rows(X: Tensor) -> int:
    _, counts = torch.unique(X, dim=0, return_counts=True)
    return int((counts > 1).sum())


def _block_rows(n: int, width: int, chunk_size: int | None) -> int:
    if chunk_size is None:
        return max(1, min(n, BLOCK_ENTRIES // max(width, 1)))
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    return chunk_size


def _require_positive(distances: Tensor) -> None:
    zero = int((distances <= 0).any(dim=1).sum())
    if zero:
        raise ValueError(
            f"{zero} points have a neighbour at distance 0 although no two rows are identical: "
            "their differences underflow in this dtype. Rescale the data or use float64.")


# ------------------------------------------------------------------------------------- TwoNN


def twonn_fit(log_mu: Tensor, discard_fraction: float) -> tuple[float, Tensor, Tensor, int]:
    """Facco et al.'s line fit, on the ratios' logarithms ``log_mu`` (one per point, any order).

    With the N ratios sorted, μ₍₁₎ ≤ … ≤ μ₍N₎, the empirical distribution is F(μ₍ᵢ₎) = i/N; the
    largest ``discard_fraction`` of the ratios (the ones most affected by noise and by the
    density varying between r₁ and r₂) are dropped, keeping n_keep = int(N·(1 − fraction)), and
    d is the least-squares slope through the origin of yᵢ = −log(1 − i/N) on xᵢ = log μ₍ᵢ₎:
    d = Σ xᵢyᵢ / Σ xᵢ². This is scikit-dimension 0.5.0's ``TwoNN(method="linear")`` exactly:
    the same F (i/N with N counting the discarded points too) and the same n_keep, computed
    with the same Python float arithmetic. Returns (d, x, y, n_keep); ``log_mu`` may carry
    leading batch dimensions (one fit per row, over the last one).
    """
    if not 0 <= discard_fraction < 1:
        raise ValueError(f"discard_fraction must be in [0, 1), got {discard_fraction}")
    N = log_mu.shape[-1]
    n_keep = int(N * (1 - discard_fraction))
    if n_keep >= N:
        raise ValueError(
            f"discard_fraction={discard_fraction} keeps all {N} ratios, and the largest has "
            "F = N/N = 1, where −log(1 − F) is infinite: discard at least one (Facco et al. "
            "use 0.1)")
    if n_keep < 2:
        raise ValueError(f"discard_fraction={discard_fraction} leaves {n_keep} of {N} ratios; "
                         "the fit needs at least 2")
    x = log_mu.sort(dim=-1).values[..., :n_keep]
    ranks = torch.arange(1, n_keep + 1, dtype=log_mu.dtype, device=log_mu.device)
    y = -torch.log1p(-ranks / N)
    denominator = x.square().sum(dim=-1)
    if bool((denominator <= 0).any()):
        raise ValueError("every kept ratio r₂/r₁ is 1 (all first and second neighbours tie): "
                         "the TwoNN slope is undefined")
    slope = (x * y).sum(dim=-1) / denominator
    return (float(slope) if slope.ndim == 0 else slope), x, y, n_keep


class TwoNN:
    """TwoNN intrinsic dimension (Facco, d'Errico, Rodriguez & Laio, Sci. Rep. 2017).

    For each point, r₁ and r₂ are the distances to its first and second nearest neighbours and
    μ = r₂/r₁. If the density is constant over the scale of r₂ and the data are locally
    d-dimensional, μ follows the Pareto law F(μ) = 1 − μ^(−d) on [1, ∞), independently of the
    density's value, so −log(1 − F(μ)) = d·log μ; :func:`twonn_fit` fits that line through the
    origin to the empirical F after discarding the largest ``discard_fraction`` of the ratios,
    matching scikit-dimension 0.5.0's ``skdim.id.TwoNN`` (method "linear") to rounding on data
    without duplicates.

    Because only two neighbours are used, TwoNN probes the smallest scale of the data (robust to
    curvature and density changes, sensitive to noise there); it is biased low for large d at
    fixed n (about 17 for d = 20 at n = 2000, notes/science.md §4).

    Attributes after :meth:`fit`: ``dimension_``; ``mu_`` (n,) the ratios, ``distances_`` (n, 2)
    r₁ and r₂, both in the order of ``indices_`` (the input rows used, see ``duplicates`` in the
    module docstring); ``x_``/``y_`` the fitted log μ₍ᵢ₎ and −log(1 − i/N); ``n_keep_``;
    ``n_duplicates_``. One ratio is no dimension estimate, so per-point estimates
    (``dimension_pw_``) come from :meth:`fit_pw`, TwoNN on each point's neighbourhood.
    """

    def __init__(self, discard_fraction: float = 0.1, *, duplicates: Duplicates = "raise",
                 dtype: torch.dtype = torch.float64, chunk_size: int | None = None) -> None:
        self.discard_fraction = discard_fraction
        self.duplicates = duplicates
        self.dtype = dtype
        self.chunk_size = chunk_size

    def __repr__(self) -> str:
        return (f"TwoNN(discard_fraction={self.discard_fraction}, duplicates={self.duplicates!r},"
                f" dtype={self.dtype}, chunk_size={self.chunk_size})")

    def _prepare(self, X: Tensor | np.ndarray, minimum: int) -> Tensor:
        points = as_points(X, self.dtype)
        points, self.indices_, self.n_duplicates_ = _deduplicate(points, self.duplicates)
        if points.shape[0] < minimum:
            raise ValueError(f"need at least {minimum} distinct points, got {points.shape[0]}")
        return points

    def fit(self, X: Tensor | np.ndarray, y: object = None) -> TwoNN:
        """Estimate the dimension of the rows of ``X`` (n, D); ``y`` is ignored."""
        points = self._prepare(X, 3)
        distances, _ = nearest_neighbors(points, 2, self.chunk_size)
        _require_positive(distances)
        mu = distances[:, 1] / distances[:, 0]
        self.distances_, self.mu_ = distances, mu
        self.dimension_, self.x_, self.y_, self.n_keep_ = twonn_fit(torch.log(mu),
                                                                    self.discard_fraction)
        return self

    def fit_pw(self, X: Tensor | np.ndarray, n_neighbors: int = 100) -> TwoNN:
        """Per-point estimates ``dimension_pw_``: TwoNN (with this ``discard_fraction``) on the
        ``n_neighbors`` nearest neighbours of each point, the point itself not included, which
        is scikit-dimension's ``GlobalEstimator.fit_pw`` convention. Each neighbourhood's ratios
        use distances within the neighbourhood only. Sets ``indices_`` and ``n_duplicates_`` as
        :meth:`fit` does, not ``dimension_``."""
        points = self._prepare(X, n_neighbors + 1)
        if n_neighbors < 3:
            raise ValueError(f"a neighbourhood needs at least 3 points, got {n_neighbors}")
        _, neighbors = nearest_neighbors(points, n_neighbors, self.chunk_size)
        n, width = points.shape
        rows = max(1, BLOCK_ENTRIES // (n_neighbors * max(n_neighbors, width)))
        if self.chunk_size is not None:
            rows = min(rows, self.chunk_size)
        estimates = []
        eye = torch.eye(n_neighbors, dtype=torch.bool, device=points.device)
        for start in range(0, n, rows):
            hood = points[neighbors[start:start + rows]]  # (b, m, D)
            # no matrix-product shortcut: neighbourhoods are small and their distances are small
            pairwise = torch.cdist(hood, hood, compute_mode="donot_use_mm_for_euclid_dist")
            pairwise.masked_fill_(eye, math.inf)
            r = pairwise.topk(2, dim=-1, largest=False, sorted=True).values  # (b, m, 2)
            _require_positive(r.reshape(-1, 2))
            slopes, _, _, _ = twonn_fit(torch.log(r[..., 1] / r[..., 0]), self.discard_fraction)
            estimates.append(slopes)
        self.dimension_pw_ = torch.cat(estimates)
        return self


# --------------------------------------------------------------------------------------- MLE


class MLE:
    """Maximum-likelihood intrinsic dimension (Levina & Bickel, NeurIPS 2004), averaged over
    points as MacKay & Ghahramani (2005) propose.

    Let T_j(x) be the distance from x to its j-th nearest neighbour (x itself excluded) and

        S_k(x) = Σ_{j=1}^{k−1} log(T_k(x)/T_j(x)).

    Under a Poisson process of constant rate in a d-dimensional ball around x, the k − 1 values
    d·log(T_k/T_j) are i.i.d. standard exponentials given T_k, so S_k ~ Gamma(k − 1, rate d):

    - m̂(x) = (k − 1)/S_k(x) is the maximum-likelihood estimate at x (Levina & Bickel's m̂_k(x)).
      Because E[1/S_k] = d/(k − 2), it is biased high by (k − 1)/(k − 2); (k − 2)/S_k(x) is
      unbiased, the normalisation Levina & Bickel recommend for their arithmetic mean over
      points (``average="mean"``).
    - E[S_k/(k − 1)] = 1/d exactly, so MacKay & Ghahramani average the inverse instead:

          m̂ = [ (1/N) Σᵢ S_k(xᵢ)/(k − 1) ]⁻¹ = (k − 1) / mean S_k,

      the harmonic mean of the per-point MLEs (``average="inverse"``, the default). Its inverse
      is unbiased for 1/d and the estimate is consistent; it is also the joint MLE of one d
      from the N neighbourhoods treated as independent. Dividing by k − 2 here instead, as Pope
      et al.'s code does (``ppope/dimensions``), mixes the two conventions and multiplies the
      estimate by (k − 2)/(k − 1): 0.95 at k = 20, 0.5 at k = 3 (notes/science.md finding 0.2).

    ``dimension_pw_`` holds the per-point estimates whose average is ``dimension_``:
    (k − 1)/S_k(x) for "inverse" (the harmonic mean of these is ``dimension_``), (k − 2)/S_k(x)
    for "mean". A point whose k neighbours are equidistant has S_k = 0 and a per-point estimate
    of ∞; the "inverse" average stays finite (it averages S_k), "mean" then raises.

    Both match scikit-dimension 0.5.0 ``skdim.id.MLE`` (no noise model), whose neighbourhoods
    also exclude the point: ``MLE().fit(X, n_neighbors=k)`` (``unbiased=False``, ``comb="mle"``)
    is ``average="inverse"``; ``MLE(unbiased=True).fit(X, n_neighbors=k, comb="mean")`` is
    ``average="mean"``.

    Other attributes after :meth:`fit`: ``log_ratio_sums_`` (S_k per point), ``distances_`` (n, k)
    T_1..T_k, both in the order of ``indices_``; ``n_duplicates_``.
    """

    def __init__(self, k: int = 20, *, average: MLEAverage = "inverse",
                 duplicates: Duplicates = "raise", dtype: torch.dtype = torch.float64,
                 chunk_size: int | None = None) -> None:
        self.k = k
        self.average = average
        self.duplicates = duplicates
        self.dtype = dtype
        self.chunk_size = chunk_size

    def __repr__(self) -> str:
        return (f"MLE(k={self.k}, average={self.average!r}, duplicates={self.duplicates!r}, "
                f"dtype={self.dtype}, chunk_size={self.chunk_size})")

    @property
    def divisor(self) -> int:
        """k − 1 for the inverse average, k − 2 for the arithmetic mean (see the class doc)."""
        return self.k - 1 if self.average == "inverse" else self.k - 2

    def fit(self, X: Tensor | np.ndarray, y: object = None) -> MLE:
        """Estimate the dimension of the rows of ``X`` (n, D); ``y`` is ignored."""
        if self.average not in ("inverse", "mean"):
            raise ValueError(f"average must be 'inverse' or 'mean', got {self.average!r}")
        if self.k < (2 if self.average == "inverse" else 3):
            raise ValueError(f"k={self.k} is too small for average={self.average!r}")
        points = as_points(X, self.dtype)
        points, self.indices_, self.n_duplicates_ = _deduplicate(points, self.duplicates)
        if points.shape[0] <= self.k:
            raise ValueError(f"k={self.k} neighbours need more than k distinct points, got "
                             f"{points.shape[0]}")
        distances, _ = nearest_neighbors(points, self.k, self.chunk_size)
        _require_positive(distances)
        sums = torch.log(distances[:, -1:] / distances[:, :-1]).sum(dim=1)
        self.distances_, self.log_ratio_sums_ = distances, sums
        self.dimension_pw_ = self.divisor / sums  # ∞ where S_k = 0
        if self.average == "inverse":
            mean_sum = float(sums.mean())
            if not mean_sum > 0:
                raise ValueError("every point's k neighbours are equidistant (S_k = 0)")
            self.dimension_ = self.divisor / mean_sum
        else:
            if not bool(torch.isfinite(self.dimension_pw_).all()):
                raise ValueError(f"{int((sums <= 0).sum())} points have k equidistant "
                                 "neighbours (S_k = 0): use average='inverse'")
            self.dimension_ = float(self.dimension_pw_.mean())
        return self


# --------------------------------------------------------------------------- label sharpness


@dataclass(frozen=True)
class LabelSharpness:
    """K̂_F of Konz & Mazurowski (2024) and what it depends on.

    K̂_F is in units of 1/(input units): it scales as 1/c when the inputs are multiplied by c, and
    for images it changes with resolution (more pixels, larger distances), so two values are
    comparable only with the same normalisation and the same ``num_features``; the value range
    and RMS entry of the sampled inputs are recorded for that check.
    """

    value: float  # K̂_F = max over sampled pairs of 1{y_j ≠ y_k}/‖x_j − x_k‖₂; ∞ on a conflict
    num_samples: int  # M, the points sampled (all of them when fewer than requested)
    num_pairs: int  # M(M − 1)/2 unordered pairs compared
    num_features: int  # entries per input (C·H·W for images: the resolution)
    input_min: float  # smallest entry of the sampled inputs
    input_max: float  # largest entry
    input_rms: float  # root mean square entry
    pair: tuple[int, int] | None  # rows of X attaining the max (None when all labels agree)
    distance: float | None  # ‖x_j − x_k‖₂ of that pair


def label_sharpness(X: Tensor | np.ndarray, y: Tensor | np.ndarray, num_samples: int = 1000,
                    generator: torch.Generator | None = None, *,
                    dtype: torch.dtype = torch.float64,
                    chunk_size: int | None = None) -> LabelSharpness:
    """Label sharpness K̂_F (Konz & Mazurowski, "The effect of intrinsic dataset properties on
    generalization", ICLR 2024, Sec. 3.2): a lower bound on the Lipschitz constant of the
    labelling function,

        K̂_F = max_{j ≠ k} 1{y_j ≠ y_k} / ‖x_j − x_k‖₂,

    over all pairs of M = ``num_samples`` points drawn without replacement with ``generator``
    (all points, in order, when n ≤ M; a generator is required otherwise). For binary labels
    in {0, 1} the numerator is the paper's |y_j − y_k|; for more classes it is 1{y_j ≠ y_k},
    which is what a Lipschitz bound on the labelling needs. The authors' code
    (``mazurowski-lab/intrinsic-properties``, ``datasetproperties.py``) uses 1{y_j = y_k} for
    multiclass data, which measures how close same-class points are instead (notes/science.md
    finding 0.3). In the version read (commit 107847b) its multiclass test,
    ``all(s[1] in [0, 1] for s in enumerate(dataset))``, looks at (x, y) tuples rather than
    labels, so it is False for binary data too and the inverted numerator is always used. That
    code also compares only random matchings of its two shuffled loaders (M²/batchsize pairs,
    2000 for M = 1000); this takes the max over every pair, so it is never smaller.

    Inputs of any shape (M, ...) are flattened per sample. Distances come from the
    matrix-product form of ``torch.cdist`` in blocks of rows, the closest differently labelled
    partner of each row is then recomputed exactly from the difference, and the max taken over
    those. Identical inputs with different labels give K̂_F = ∞ (the labelling is not Lipschitz
    at the data's resolution), with that pair and distance 0 reported; if every sampled label
    is the same, K̂_F = 0 and there is no pair.
    """
    points = (X.detach() if isinstance(X, Tensor) else torch.as_tensor(np.asarray(X)))
    points = points.reshape(points.shape[0], -1).to(dtype)
    labels = (y.detach() if isinstance(y, Tensor) else torch.as_tensor(np.asarray(y)))
    labels = labels.reshape(-1).to(points.device)
    n = points.shape[0]
    if labels.numel() != n:
        raise ValueError(f"X has {n} samples and y {labels.numel()} labels")
    if labels.is_floating_point() and not bool((labels == labels.round()).all()):
        raise ValueError("labels must be class indices (integers or bools)")
    if not bool(torch.isfinite(points).all()):
        raise ValueError("X holds NaN or infinite values")
    if num_samples < 2 or n < 2:
        raise ValueError(f"need at least 2 samples, got num_samples={num_samples}, n={n}")
    if n > num_samples:
        if generator is None:
            raise ValueError(f"sampling {num_samples} of {n} points needs a generator")
        chosen = torch.randperm(n, generator=generator, device=generator.device)[:num_samples]
        chosen = chosen.to(points.device)
    else:
        chosen = torch.arange(n, device=points.device)
    sample, sample_labels = points[chosen], labels[chosen]
    M = sample.shape[0]
    best_value, best_pair, best_distance = 0.0, None, None
    rows = _block_rows(M, M, chunk_size)
    for start in range(0, M, rows):
        block = sample[start:start + rows]
        distances = torch.cdist(block, sample)
        same = sample_labels[start:start + rows, None] == sample_labels[None, :]
        distances.masked_fill_(same, math.inf)  # also masks j = k
        nearest, partner = distances.min(dim=1)
        rows_with_partner = torch.isfinite(nearest).nonzero().reshape(-1)
        if rows_with_partner.numel() == 0:
            continue
        partner = partner[rows_with_partner]
        exact = torch.linalg.vector_norm(block[rows_with_partner] - sample[partner], dim=1)
        position = int(exact.argmin())
        distance = float(exact[position])
        value = math.inf if distance == 0 else 1.0 / distance
        if best_pair is None or value > best_value:
            j = start + int(rows_with_partner[position])
            best_value, best_distance = value, distance
            best_pair = (int(chosen[j]), int(chosen[partner[position]]))
    return LabelSharpness(
        value=best_value, num_samples=M, num_pairs=M * (M - 1) // 2,
        num_features=sample.shape[1], input_min=float(sample.min()),
        input_max=float(sample.max()), input_rms=float(sample.square().mean().sqrt()),
        pair=best_pair, distance=best_distance)


__all__ = ["MLE", "Duplicates", "LabelSharpness", "MLEAverage", "TwoNN", "as_points",
           "distinct_rows", "label_sharpness", "twonn_fit"]
