"""Ground truth for influence scores: leave-one-out retraining and the linear datamodeling score.

Scores follow :mod:`genlab.analyses.influence.exact`'s convention, I[t, i] = I_up,loss(zᵢ, z_t):
positive = upweighting zᵢ raises test loss t, so removing zᵢ changes it by ≈ −I[t, i]/n
(:func:`predicted_loo_change`); negative = helpful, removing it raises the test loss.

A *training function* ``train_fn(mask, warm_start)`` trains on the examples where the boolean
``mask`` (n_train,) is true and returns the measured test quantity per test point (n_test,): the
test loss for leave-one-out, the loss or the margin for LDS. Two requirements make differences
between its calls mean what they should:

- it must be deterministic (same seed, same batch order for every mask), so that a difference
  reflects the data removed and not the training noise;
- for comparing with influence (ε = −1/n), the retrained objective should keep the full-data
  normalisation and regulariser, (1/n) Σ_{j∈mask} ℓⱼ + (λ/2)‖θ‖² with n the full training size:
  re-normalising by 1/(n − 1) also rescales the regulariser relative to the data by (n−1)/n,
  which moves θ by as much as removing one example does and adds an offset common to all i.

``warm_start=True`` asks it to start from the full model's parameters (and train to
convergence): the response that influence functions estimate (Bae et al. 2022, the proximal
Bregman response; notes/science.md finding 0.6). ``warm_start=False`` retrains from the same
initialisation as the full model, the ground truth of LDS (Park et al. 2023). Both coincide for
a strictly convex objective trained to convergence.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from scipy import stats
from torch import Tensor

from genlab.progress import progress
from genlab.seeding import torch_generator

TrainFn = Callable[[Tensor, bool], Tensor]  # (mask (n_train,) bool, warm_start) ↦ (n_test,)


@dataclass(frozen=True)
class LeaveOneOut:
    indices: Tensor  # (K,) the training examples removed, one at a time
    delta: Tensor  # (n_test, K) f_t(trained without indices[k]) − f_t(trained on all)
    baseline: Tensor  # (n_test,) f_t(trained on all), by the same train_fn and warm_start
    warm_start: bool


def leave_one_out(train_fn: TrainFn, indices: Sequence[int] | Tensor, *, n_train: int,
                  warm_start: bool = True) -> LeaveOneOut:
    """Retrain without each of ``indices`` in turn (K + 1 calls of ``train_fn``, the first on
    all ``n_train`` examples as the baseline) and return the change of each test quantity."""
    index = torch.as_tensor(indices, dtype=torch.int64).reshape(-1)
    if len(index) == 0:
        raise ValueError("leave_one_out needs at least one index")
    if bool((index < 0).any()) or bool((index >= n_train).any()):
        raise ValueError(f"indices must lie in [0, {n_train})")
    full = torch.ones(n_train, dtype=torch.bool)
    baseline = torch.as_tensor(train_fn(full, warm_start)).detach().reshape(-1)
    columns = []
    for i in progress(index.tolist(), "leave-one-out retraining", unit="retrain"):
        mask = full.clone()
        mask[i] = False
        measured = torch.as_tensor(train_fn(mask, warm_start)).detach().reshape(-1)
        columns.append(measured.to(baseline) - baseline)
    return LeaveOneOut(indices=index, delta=torch.stack(columns, dim=1), baseline=baseline,
                       warm_start=warm_start)


def predicted_loo_change(scores: Tensor, n_train: int) -> Tensor:
    """−I/n: the first-order change of each test loss when each training example is removed
    (ε = −1/n in Koh & Liang's upweighting), for scores in this module's convention."""
    return -scores / n_train


# ------------------------------------------------------------------------- correlations


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(stats.pearsonr(a, b).statistic)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan  # scipy returns NaN with a ConstantInputWarning; say so without noise
    return float(stats.spearmanr(a, b).statistic)


def _numpy(x: Tensor | np.ndarray) -> np.ndarray:
    if isinstance(x, Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


@dataclass(frozen=True)
class LOOAgreement:
    """How well −I/n predicts the measured leave-one-out changes.

    ``pearson``/``spearman`` pool all (test point, removed example) pairs into one sample (the
    test points' different loss scales weigh in); ``per_test_*`` correlate over the removed
    examples for each test point separately (Koh & Liang's plots are one test point each), NaN
    where either side is constant, and ``mean_per_test_*`` average those that are defined.
    ``slope`` is the least-squares fit of actual on predicted through the origin: 1 when the
    influence's magnitudes are right, not only its ranking."""

    pearson: float
    spearman: float
    per_test_pearson: np.ndarray  # (n_test,)
    per_test_spearman: np.ndarray  # (n_test,)
    mean_per_test_pearson: float
    mean_per_test_spearman: float
    slope: float


def _nanmean(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else math.nan


def compare_with_loo(scores: Tensor, loo: LeaveOneOut, n_train: int) -> LOOAgreement:
    """Correlate the prediction −scores[:, loo.indices]/n with ``loo.delta`` (see
    :class:`LOOAgreement`). Correlations ignore the 1/n scale, not the sign."""
    if scores.ndim != 2 or scores.shape[0] != loo.delta.shape[0]:
        raise ValueError(f"scores must be (n_test={loo.delta.shape[0]}, n_train), got "
                         f"{tuple(scores.shape)}")
    predicted = _numpy(predicted_loo_change(scores[:, loo.indices.to(scores.device)], n_train))
    actual = _numpy(loo.delta)
    per_pearson = np.array([_pearson(p, a) for p, a in zip(predicted, actual, strict=True)])
    per_spearman = np.array([_spearman(p, a) for p, a in zip(predicted, actual, strict=True)])
    norm = float(np.square(predicted).sum())
    return LOOAgreement(
        pearson=_pearson(predicted.ravel(), actual.ravel()),
        spearman=_spearman(predicted.ravel(), actual.ravel()),
        per_test_pearson=per_pearson, per_test_spearman=per_spearman,
        mean_per_test_pearson=_nanmean(per_pearson),
        mean_per_test_spearman=_nanmean(per_spearman),
        slope=float((predicted * actual).sum() / norm) if norm > 0 else math.nan)


# --------------------------------------------------------------------------------- LDS


def random_subsets(n_train: int, num_subsets: int, alpha: float = 0.5,
                   seed: int = 0) -> Tensor:
    """(M, n_train) boolean masks, each holding exactly round(α·n) examples drawn without
    replacement from ``seed``, independently across subsets (Park et al. 2023 use α = 0.5)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if num_subsets < 1:
        raise ValueError(f"num_subsets must be positive, got {num_subsets}")
    size = round(alpha * n_train)
    if not 0 < size < n_train:
        raise ValueError(f"alpha={alpha} of n_train={n_train} leaves an empty or full subset")
    generator = torch_generator(seed, "influence", "lds-subsets")
    masks = torch.zeros(num_subsets, n_train, dtype=torch.bool)
    for m in range(num_subsets):
        masks[m, torch.randperm(n_train, generator=generator)[:size]] = True
    return masks


def datamodel_measurements(train_fn: TrainFn, subsets: Tensor,
                           warm_start: bool = False) -> Tensor:
    """(M, n_test) the measured test quantities of models trained on each subset (by default
    from scratch, as LDS is defined)."""
    rows = [torch.as_tensor(train_fn(mask, warm_start)).detach().reshape(-1)
            for mask in progress(subsets, "LDS retraining", unit="subset")]
    return torch.stack(rows)


@dataclass(frozen=True)
class LDSResult:
    lds: float  # mean over test points of the defined per-test Spearman correlations
    per_test: np.ndarray  # (n_test,) Spearman(g_t(S_·), f_t(S_·)), NaN where a side is constant
    num_undefined: int  # test points whose correlation is undefined (left out of the mean)


def linear_datamodeling_score(scores: Tensor, subsets: Tensor, measured: Tensor,
                              measure: Literal["loss", "margin"] = "loss") -> LDSResult:
    """The linear datamodeling score of Park et al. (ICML 2023, TRAK).

    For each test point t, the additive prediction over the M subsets S_m is
    g_t(S_m) = Σ_{i∈S_m} I[t, i], and LDS_t = Spearman(g_t(S_·), f_t(S_·)) with f_t the
    measured quantity (``measured`` (M, n_test), from :func:`datamodel_measurements`); the LDS is
    the mean over test points. With I in this module's convention (positive = raises the test
    loss; removing the complement R changes the loss by −(1/n)Σ_{i∈R} I = const + (1/n)g_t),
    g_t predicts the test *loss* up to a constant and a positive factor: ``measure="loss"``
    correlates g_t with f_t, and ``measure="margin"`` (or any quantity where higher is better)
    with −g_t. Then a perfect attribution scores 1 and random scores 0 in expectation (standard
    error ≈ 1/√((M − 1)·n_test)). Spearman is scipy.stats.spearmanr (average ranks for ties).
    """
    if measure not in ("loss", "margin"):
        raise ValueError(f"measure must be 'loss' or 'margin', got {measure!r}")
    masks = torch.as_tensor(subsets, dtype=torch.bool)
    if scores.ndim != 2 or masks.ndim != 2 or masks.shape[1] != scores.shape[1]:
        raise ValueError(f"subsets (M, n_train) must match scores (n_test, n_train), got "
                         f"{tuple(masks.shape)} and {tuple(scores.shape)}")
    values = _numpy(measured)
    if values.shape != (masks.shape[0], scores.shape[0]):
        raise ValueError(f"measured must be (M={masks.shape[0]}, n_test={scores.shape[0]}), "
                         f"got {values.shape}")
    predicted = _numpy(masks.to(torch.float64)) @ _numpy(scores).T  # (M, n_test)
    if measure == "margin":
        predicted = -predicted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        per_test = np.array([_spearman(predicted[:, t], values[:, t])
                             for t in range(values.shape[1])])
    undefined = int((~np.isfinite(per_test)).sum())
    return LDSResult(lds=_nanmean(per_test), per_test=per_test, num_undefined=undefined)


__all__ = ["LDSResult", "LOOAgreement", "LeaveOneOut", "TrainFn", "compare_with_loo",
           "datamodel_measurements", "leave_one_out", "linear_datamodeling_score",
           "predicted_loo_change", "random_subsets"]
