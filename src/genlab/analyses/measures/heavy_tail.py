"""Heavy-tailed self-regularisation: the power-law exponent α of each layer's eigenvalue
spectrum (Martin & Mahoney, JMLR 2021; Nature Communications 2021), as weightwatcher fits it.

The empirical spectral density of a layer W (out × in) is the set of eigenvalues of WᵀW, the
squared singular values. Martin & Mahoney fit its tail with a power law p(λ) ∝ λ^(−α) for
λ ≥ λ_min: α is the continuous maximum-likelihood estimate α = 1 + n / Σ_{λ_i ≥ λ_min}
ln(λ_i/λ_min) over the n eigenvalues in the tail, and λ_min is the eigenvalue whose fit has the
smallest Kolmogorov–Smirnov distance D between the fitted and the empirical tail CDFs (Clauset,
Shalizi & Newman 2009). A smaller α (a heavier tail) is read as a better-trained layer; the
network-level metrics are the mean α over layers and the mean of α log10 λ_max ("alpha
weighted", α̂).

This is weightwatcher 0.7.7's default fit (``WW_powerlaw.WWFit``, no finger fixing, no xmax)
written out in NumPy; the tests compare it with ``weightwatcher.WeightWatcher.analyze`` layer by
layer. Like weightwatcher, eigenvalues ≤ 1e-5 are dropped before the fit. Below 20 eigenvalues
weightwatcher switches to another estimator (a bias-corrected small-sample fit); genlab does not
port it and leaves such a layer out. Only fully connected (Linear) layers are fitted:
weightwatcher slices a convolution's kernel into per-position matrices, which genlab does not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

EIGENVALUE_FLOOR = 1e-5  # weightwatcher's EVALS_THRESH
MIN_EIGENVALUES = 20  # weightwatcher's SMALL_N_CUTOFF: below it, its other estimator


@dataclass(frozen=True)
class PowerLawFit:
    alpha: float
    xmin: float  # λ_min, the tail's start
    ks_distance: float  # D at λ_min
    n_tail: int  # eigenvalues ≥ λ_min
    lambda_max: float  # the layer's largest eigenvalue (‖W‖₂²)

    @property
    def alpha_weighted(self) -> float:
        return self.alpha * float(np.log10(self.lambda_max))


def eigenvalues(weight: torch.Tensor) -> np.ndarray:
    """The ESD of a (out, in) weight: its squared singular values in float64, ascending."""
    singular = torch.linalg.svdvals(weight.detach().to(torch.float64).cpu())
    return np.sort(singular.numpy() ** 2)


def fit_power_law(values: np.ndarray) -> PowerLawFit:
    """The power-law fit of an ESD's tail, λ_min chosen by the smallest KS distance.

    Raises:
        ValueError: fewer than :data:`MIN_EIGENVALUES` eigenvalues above the floor.
    """
    values = np.asarray(values, dtype=np.float64)
    data = np.sort(values[values > EIGENVALUE_FLOOR])
    n_total = len(data)
    if n_total < MIN_EIGENVALUES:
        raise ValueError(f"{n_total} eigenvalues above {EIGENVALUE_FLOOR:g}: the fit needs "
                         f"{MIN_EIGENVALUES}")
    logs = np.log(data)
    tail_log_sums = np.cumsum(logs[::-1])[::-1]  # Σ_{j ≥ i} ln λ_j
    best = (np.inf, 0, np.nan)  # (D, i, α); the first minimum wins, as np.argmin's
    for i in range(n_total - 1):
        n = n_total - i
        alpha = 1 + n / (tail_log_sums[i] - n * logs[i])
        distance = 1.0  # weightwatcher's value where α ≤ 1 (no normalisable power law)
        if alpha > 1:
            fitted_cdf = 1 - (data[i:] / data[i]) ** (1 - alpha)
            distance = float(np.max(np.abs(fitted_cdf - np.arange(n) / n)))
        if distance < best[0]:
            best = (distance, i, alpha)
    distance, i, alpha = best
    return PowerLawFit(alpha=float(alpha), xmin=float(data[i]), ks_distance=distance,
                       n_tail=n_total - i, lambda_max=float(values.max()))


def layer_fits(model: nn.Module) -> list[PowerLawFit]:
    """The fit of every Linear layer with enough eigenvalues, in module order."""
    fits = []
    for module in model.modules():
        if isinstance(module, nn.Linear):
            values = eigenvalues(module.weight)
            if (values > EIGENVALUE_FLOOR).sum() >= MIN_EIGENVALUES:
                fits.append(fit_power_law(values))
    return fits


__all__ = ["EIGENVALUE_FLOOR", "MIN_EIGENVALUES", "PowerLawFit", "eigenvalues", "fit_power_law",
           "layer_fits"]
