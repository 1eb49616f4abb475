"""Neural collapse of the last-layer features (Papyan, Han & Donoho, PNAS 2020).

For last-layer features h_i ∈ ℝᵖ with labels y_i ∈ {0 … C−1}, class means μ_c, the global mean
μ_G = (1/n) Σ_i h_i, and the classifier's rows w_c (logits W h + b):

- Σ_W = (1/n) Σ_i (h_i − μ_{y_i})(h_i − μ_{y_i})ᵀ, Σ_B = (1/C) Σ_c (μ_c − μ_G)(μ_c − μ_G)ᵀ.
- **NC1** = Tr(Σ_W Σ_B†)/C: within-class variability relative to the between-class spread;
  0 when every feature equals its class mean. Σ_B has rank ≤ C − 1; as in Papyan et al.'s code
  the pseudo-inverse keeps its top C − 1 eigenpairs (and drops any below 1e-12·λ_max).
- **NC2** (convergence to a simplex equiangular tight frame): *equinorm*, the coefficient of
  variation std_c/mean_c of ‖μ_c − μ_G‖ (and of ‖w_c‖); *equiangularity*, the std over c ≠ c′
  of cos(μ_c − μ_G, μ_c′ − μ_G); *maximal angle*, the mean over c ≠ c′ of
  |cos(μ_c − μ_G, μ_c′ − μ_G) + 1/(C − 1)|. All three are 0 for a simplex ETF, whose cosines
  all equal −1/(C − 1).
- **NC3** (self-duality) = ‖W/‖W‖_F − M/‖M‖_F‖_F², M the C × p matrix of rows μ_c − μ_G.
- **NC4** = the fraction of examples where the nearest-class-centre classifier
  argmin_c ‖h − μ_c‖ disagrees with the network's prediction argmax_c (W h + b)_c.

Standard deviations are population ones (divisor the count). Computed in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class NeuralCollapse:
    nc1: float  # Tr(Σ_W Σ_B†)/C
    nc2_equinorm: float  # std/mean of ‖μ_c − μ_G‖
    nc2_equinorm_weights: float  # std/mean of ‖w_c‖
    nc2_equiangular: float  # std over c ≠ c′ of the cosines between centred class means
    nc2_max_angle: float  # mean over c ≠ c′ of |cos + 1/(C − 1)|
    mean_cosine: float  # mean over c ≠ c′ of the cosines (→ −1/(C − 1))
    nc3: float  # ‖W/‖W‖_F − M/‖M‖_F‖_F²
    nc4: float  # disagreement rate of the nearest-class-centre classifier with the network


def _cv(x: Tensor) -> float:
    return float(x.std(unbiased=False) / x.mean())


def neural_collapse(features: Tensor, labels: Tensor, weights: Tensor,
                    bias: Tensor | None = None, predictions: Tensor | None = None
                    ) -> NeuralCollapse:
    """NC1-NC4 (module docstring) of ``features`` (n, p) with ``labels`` (n,) in {0 … C−1},
    for the classifier ``weights`` (C, p) and ``bias`` (C,); NC4 compares with ``predictions``
    (n,) when given, else with argmax(features Wᵀ + b).

    Raises:
        ValueError: For mismatched shapes, fewer than 2 classes, or a class without examples.
    """
    h = features.detach().to(torch.float64)
    W = weights.detach().to(torch.float64)
    n, p = h.shape
    C = W.shape[0]
    if labels.shape != (n,) or W.shape[1] != p:
        raise ValueError(f"features {tuple(h.shape)}, labels {tuple(labels.shape)} and weights "
                         f"{tuple(W.shape)} do not match")
    if C < 2:
        raise ValueError("neural collapse needs at least 2 classes")
    counts = torch.bincount(labels, minlength=C)
    if len(counts) > C or bool((counts == 0).any()):
        raise ValueError(f"every one of the {C} classes needs examples, got counts "
                         f"{counts.tolist()}")
    onehot = torch.nn.functional.one_hot(labels, C).to(torch.float64)  # (n, C)
    means = onehot.T @ h / counts[:, None].to(torch.float64)  # (C, p) μ_c
    centred = means - h.mean(dim=0)  # (C, p) μ_c − μ_G
    within = h - means[labels]  # (n, p)
    sigma_w = within.T @ within / n
    sigma_b = centred.T @ centred / C
    values, vectors = torch.linalg.eigh(sigma_b)  # ascending
    keep = values.flip(0)[: min(C - 1, p)]
    keep = keep[keep > 1e-12 * float(values.max())]
    top = vectors.flip(1)[:, : len(keep)]
    pinv = top @ torch.diag(1.0 / keep) @ top.T
    nc1 = float(torch.trace(sigma_w @ pinv)) / C

    norms = torch.linalg.vector_norm(centred, dim=1)
    unit = centred / norms[:, None]
    off = ~torch.eye(C, dtype=torch.bool)
    cosines = (unit @ unit.T)[off]
    nc3 = float(torch.linalg.matrix_norm(W / torch.linalg.matrix_norm(W)
                                         - centred / torch.linalg.matrix_norm(centred)).square())
    if predictions is None:
        logits = h @ W.T + (0.0 if bias is None else bias.detach().to(torch.float64))
        predictions = logits.argmax(dim=1)
    nearest = torch.cdist(h, means).argmin(dim=1)
    return NeuralCollapse(
        nc1=nc1, nc2_equinorm=_cv(norms),
        nc2_equinorm_weights=_cv(torch.linalg.vector_norm(W, dim=1)),
        nc2_equiangular=float(cosines.std(unbiased=False)),
        nc2_max_angle=float((cosines + 1.0 / (C - 1)).abs().mean()),
        mean_cosine=float(cosines.mean()), nc3=nc3,
        nc4=float((nearest != predictions.to(nearest.device)).to(torch.float64).mean()))


__all__ = ["NeuralCollapse", "neural_collapse"]
