"""Feature-noise patch data with strong and weak features (Lu et al., "benign oscillation").

Lu, Wu, Yang, Zou. "Benign Oscillation of Stochastic Gradient Descent with Large Learning Rates",
ICLR 2024 (arXiv:2310.17074, 2023). A point has a label y in {-1, +1}, drawn uniformly, and three
patches in R^d:

    strong patch  y * u      u = strong_norm * e_1   (all zero for a weak-only point)
    weak patch    y * v      v = weak_norm * e_2     (in every point)
    noise patch   xi         xi ~ N(0, sigma_p^2 I_d)

The strong feature has the larger norm but appears only in some points; the weak feature is small
but always present. The paper's claim: large-learning-rate SGD, whose weights oscillate, learns the
weak feature as well, so it still classifies test points that carry only the weak feature, while
small-learning-rate SGD learns the strong one alone and fails on them.

Layout: the patches are stacked as (n, 3, d) in the order strong, weak, noise and flattened
row-major to x of shape (n, 3d), so columns [k d, (k+1) d) hold patch k; :func:`as_patches`
undoes it. Labels are stored as class indices, 0 for y = -1 and 1 for y = +1. Every split has a
per-point ``group``: "strong" (both features) or "weak_only". The test split holds
``n_test_strong`` strong points followed by ``n_test_weak`` weak-only points, to be scored apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from genlab.data.dataset import Dataset, Split, corruption_draws
from genlab.data.settings import FeatureNoiseSettings
from genlab.seeding import numpy_rng

PATCHES = ("strong", "weak", "noise")
STRONG, WEAK_ONLY = "strong", "weak_only"


def as_patches(x: np.ndarray, patch_dim: int) -> np.ndarray:
    """The (n, 3, d) patch view of a flattened split: [:, 0] strong, [:, 1] weak, [:, 2] noise."""
    return x.reshape(len(x), len(PATCHES), patch_dim)


def _sample(s: FeatureNoiseSettings, stream: str,
            has_strong: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x (n, 3d) float32 and class indices for points whose strong-feature flags are given."""
    n, d = len(has_strong), s.patch_dim
    rng = numpy_rng(s.seed, stream)
    # Labels first, then noise: the draws of one point never depend on its group.
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    patches = np.zeros((n, len(PATCHES), d))
    patches[:, 0, 0] = np.where(has_strong, sign * s.strong_norm, 0.0)
    patches[:, 1, 1] = sign * s.weak_norm
    patches[:, 2, :] = s.noise_std * rng.standard_normal((n, d))
    return patches.reshape(n, len(PATCHES) * d).astype(np.float32), (sign > 0).astype(np.int64)


def feature_noise(settings: FeatureNoiseSettings) -> Dataset:
    """Draw the dataset. Each split has its own seeded stream, so test sizes never change train.

    Args:
        settings: the patch dimension, the feature norms, sigma_p, the sizes and the seed.

    Returns:
        Two-class data (0 <-> y = -1, 1 <-> y = +1) with x of shape (n, 3d); ``group`` marks
        every point "strong" or "weak_only"; training points carry label-corruption draws.
        ``info`` lists the weak-only training indices and the feature vectors.
    """
    s = settings
    # Which training points lack the strong feature: a stream of its own, so changing
    # n_weak_only leaves every label and noise draw in place.
    weak_only = np.sort(numpy_rng(s.seed, "weak-only").permutation(s.n_train)[:s.n_weak_only])
    train_strong = np.ones(s.n_train, dtype=bool)
    train_strong[weak_only] = False
    x_train, y_train = _sample(s, "train", train_strong)
    x_strong, y_strong = _sample(s, "test-strong", np.ones(s.n_test_strong, dtype=bool))
    x_weak, y_weak = _sample(s, "test-weak", np.zeros(s.n_test_weak, dtype=bool))
    u_corrupt, y_random = corruption_draws(numpy_rng(s.seed, "label-corruption"), s.n_train, 2)
    info: dict[str, Any] = {
        "generator": "feature_noise",
        "n_classes": 2,
        "input_dim": len(PATCHES) * s.patch_dim,
        "patch_dim": s.patch_dim,
        "patches": list(PATCHES),
        "label_map": {"0": -1, "1": 1},
        "strong_feature": {"index": 0, "norm": s.strong_norm},  # u = strong_norm * e_1
        "weak_feature": {"index": 1, "norm": s.weak_norm},  # v = weak_norm * e_2
        "noise_std": s.noise_std,
        "train_weak_only_indices": weak_only.tolist(),
        "test_groups": {STRONG: s.n_test_strong, WEAK_ONLY: s.n_test_weak},
        # The weak patch is noise-free, so sign(x_weak[1]) is an exact classifier for every point.
        "bayes_test_accuracy": 1.0,
    }
    return Dataset(
        train=Split(x_train, y_train, y_random=y_random, u_corrupt=u_corrupt,
                    group=np.where(train_strong, STRONG, WEAK_ONLY)),
        test=Split(np.concatenate([x_strong, x_weak]), np.concatenate([y_strong, y_weak]),
                   group=np.array([STRONG] * s.n_test_strong + [WEAK_ONLY] * s.n_test_weak,
                                  dtype=str)),
        n_classes=2,
        info=info,
    )
