"""Random-features regression: the minimum-norm least-squares fit and its gradient-descent path.

The model is f(x) = φ(x)ᵀθ with φ(x) = relu(W x / √d), W ∈ R^{P×d}, W_ij ~ N(0, 1) fixed, and only
θ ∈ R^P trained. It is the analytically tractable setting of double descent (Advani & Saxe 2017;
Mei & Montanari 2019): as P crosses the number of training points N, the minimum-norm
interpolator's test error peaks, because the smallest non-zero singular value of Φ goes to zero.

Everything is float64 numpy; no iteration is needed: the minimum-norm solution is Φ⁺y, and
gradient descent from θ = 0 with step η has the closed form, in the SVD Φ = U S Vᵀ,

    θ_t = V diag((1 − (1 − η s_i²/N)^t) / s_i) Uᵀ y        (loss (1/2N)‖Φθ − y‖²),

whose t → ∞ limit is the minimum-norm solution (GD from zero stays in the row space of Φ).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ACTIVATIONS = {"relu": lambda z: np.maximum(z, 0.0), "tanh": np.tanh}


def random_feature_weights(n_features: int, input_dim: int,
                           rng: np.random.Generator) -> np.ndarray:
    """W ∈ R^{P×d} with i.i.d. N(0, 1) entries."""
    return rng.standard_normal((n_features, input_dim))


def features(x: np.ndarray, weights: np.ndarray, activation: str = "relu") -> np.ndarray:
    """Φ = act(X Wᵀ / √d), shape (n, P), float64."""
    x = np.asarray(x, dtype=np.float64)
    return ACTIVATIONS[activation](x @ weights.T / np.sqrt(x.shape[1]))


def min_norm_least_squares(phi: np.ndarray, y: np.ndarray,
                           rcond: float | None = None) -> np.ndarray:
    """argmin ‖θ‖ over the minimisers of ‖Φθ − y‖: the pseudo-inverse solution Φ⁺y.

    ``rcond`` cuts singular values below rcond·s_max (numpy's default, machine-eps·max(n, P),
    keeps every numerically non-zero direction: exactly the ill-conditioning double descent is
    about, so do not raise it without saying so).
    """
    theta, *_ = np.linalg.lstsq(phi, y, rcond=rcond)
    return theta


@dataclass(frozen=True)
class GDPath:
    """Gradient descent from zero, evaluated at given steps (closed form, see module docstring)."""

    steps: np.ndarray  # (T,)
    thetas: np.ndarray  # (T, P)


def gradient_descent_path(phi: np.ndarray, y: np.ndarray, lr: float,
                          steps: np.ndarray) -> GDPath:
    """θ_t for each t in ``steps`` for GD on (1/2N)‖Φθ − y‖² from θ_0 = 0 with step ``lr``.

    Stable iff lr < 2N / s_max²; raises otherwise rather than returning a diverging path.
    """
    n = phi.shape[0]
    u, s, vt = np.linalg.svd(phi, full_matrices=False)
    if lr * s.max() ** 2 / n >= 2.0:
        raise ValueError(f"lr {lr} is unstable for this Φ: need lr < 2N/s_max² = "
                         f"{2 * n / s.max() ** 2:.4g}")
    keep = s > s.max() * max(phi.shape) * np.finfo(np.float64).eps
    u, s, vt = u[:, keep], s[keep], vt[keep]
    uy = u.T @ y
    contraction = 1.0 - lr * s**2 / n  # (r,)
    steps = np.asarray(steps)
    gain = (1.0 - contraction[None, :] ** steps[:, None]) / s[None, :]  # (T, r)
    return GDPath(steps=steps, thetas=(gain * uy[None, :]) @ vt)


def mse(phi: np.ndarray, theta: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mean squared error of θ (shape (P,) or (T, P)) on (Φ, y)."""
    residual = phi @ theta.T - (y[:, None] if theta.ndim == 2 else y)
    return np.mean(residual**2, axis=0)
