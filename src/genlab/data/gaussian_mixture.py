"""Gaussian-mixture classification data (the random-labels study of Zhang et al. 2017).

C classes in R^d with means mu_c ~ mean_scale * N(0, I); a point of class y is x = mu_y + N(0, I).
Classes are drawn uniformly. Training points also carry label-corruption draws (see
:mod:`genlab.data.dataset`); test labels are always clean.
"""

from __future__ import annotations

import numpy as np

from genlab.data.dataset import Dataset, Split
from genlab.seeding import numpy_rng
from genlab.settings import GaussianMixtureSettings


def _sample(means: np.ndarray, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n_classes, dim = means.shape
    y = rng.integers(0, n_classes, size=n)
    x = means[y] + rng.standard_normal((n, dim))
    return x.astype(np.float32), y.astype(np.int64)


def gaussian_mixture(settings: GaussianMixtureSettings) -> Dataset:
    """Draw the dataset. Each purpose has its own seeded stream, so n_test never changes train."""
    s = settings
    means = s.mean_scale * numpy_rng(s.seed, "means").standard_normal((s.n_classes, s.dim))
    x_train, y_train = _sample(means, s.n_train, numpy_rng(s.seed, "train"))
    x_test, y_test = _sample(means, s.n_test, numpy_rng(s.seed, "test"))
    corruption = numpy_rng(s.seed, "label-corruption")
    u_corrupt = corruption.random(s.n_train)
    y_random = corruption.integers(0, s.n_classes, size=s.n_train).astype(np.int64)
    # Bayes-optimal accuracy is not closed-form for C > 2; the nearest-mean rule's test accuracy
    # is recorded as a reference ceiling for what a classifier can reach on this data.
    nearest_mean = np.argmin(((x_test[:, None, :] - means[None].astype(np.float32)) ** 2).sum(-1),
                             axis=1)
    info = {
        "generator": "gaussian_mixture",
        "n_classes": s.n_classes,
        "input_dim": s.dim,
        "nearest_mean_test_accuracy": float((nearest_mean == y_test).mean()),
    }
    return Dataset(
        train=Split(x_train, y_train, y_random=y_random, u_corrupt=u_corrupt),
        test=Split(x_test, y_test),
        n_classes=s.n_classes,
        info=info,
    )
