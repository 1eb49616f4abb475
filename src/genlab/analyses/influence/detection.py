"""Ranking training points for inspection (Koh & Liang 2017, §5.4): each method's suspicion
score per training point, and how well a ranking finds the mislabelled ones (ROC AUC, and the
fraction found after checking a fraction of the data)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from scipy.stats import rankdata
from torch import Tensor, nn

from genlab.analyses.influence.exact import (
    LossKind,
    exact_self_influence,
    gradient_self_dot,
    loss_function,
)
from genlab.seeding import torch_generator

METHODS = ("exact", "ekfac", "grad_dot", "loss", "random")
CHECKED = tuple(round(0.05 * k, 2) for k in range(1, 21))  # fractions of the data inspected


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """P(score of a random positive > score of a random negative), ties counted half (the
    Mann-Whitney U statistic over n₊·n₋); NaN without both classes."""
    positive = np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    ranks = rankdata(np.asarray(scores, dtype=np.float64))
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def fraction_found(scores: np.ndarray, positive: np.ndarray,
                   checked: tuple[float, ...] = CHECKED) -> list[float]:
    """The fraction of positives among the top ⌈c·n⌉ scores, for each fraction c checked (ties
    broken by index, stably)."""
    positive = np.asarray(positive, dtype=bool)
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    found = np.cumsum(positive[order])
    n, total = len(order), max(int(positive.sum()), 1)
    return [float(found[max(math.ceil(c * n - 1e-9), 1) - 1] / total) for c in checked]


def self_influence_rankings(model: nn.Module, loss: LossKind, X: Tensor, y: Tensor, l2: float,
                            s: Any, per_example_losses: Callable[[nn.Module, Tensor, Tensor],
                                                                 Tensor], run: str = "",
                            ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Every method's suspicion score per training point (higher = inspect first), and its wall
    time: ``exact``, −I(zᵢ, zᵢ) with the damped GGN (damping = λ = ``l2``); ``ekfac``, the same
    with kronfluence's EK-FAC; ``grad_dot``, ‖∇ℓᵢ‖²; ``loss``, the training loss; ``random``.
    ``s``: the :class:`~genlab.analyses.attribution_settings.SelfInfluenceSettings`. The random
    ranking is drawn per run, from the methods' seed and the run's name (not its seed alone:
    two models of one seed would share one draw of the chance baseline)."""
    from genlab.analyses.influence.kfac import kronfluence_self_influence

    loss_fn = loss_function(loss)
    jobs = {
        "exact": lambda: -exact_self_influence(model, loss_fn, X, y, l2, chunk_size=s.chunk_size,
                                               batch_size=s.chunk_size),
        "ekfac": lambda: -kronfluence_self_influence(
            model, loss, X, y, "ekfac", l2, fisher_samples=s.ekfac_fisher_samples, seed=s.seed,
            batch_size=s.chunk_size),
        "grad_dot": lambda: -gradient_self_dot(model, loss_fn, X, y, chunk_size=s.chunk_size),
        "loss": lambda: per_example_losses(model, X, y),
        "random": lambda: torch.randn(len(X), generator=torch_generator(
            s.seed, "mislabel", "random", run), dtype=torch.float64),
    }
    scores, seconds = {}, {}
    for name, job in jobs.items():
        start = time.perf_counter()
        scores[name] = job().detach().to("cpu", torch.float64).numpy()
        seconds[name] = time.perf_counter() - start
    return scores, seconds


__all__ = ["CHECKED", "METHODS", "fraction_found", "roc_auc", "self_influence_rankings"]
