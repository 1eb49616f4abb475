"""Handwritten 8x8 digits: a small real image dataset that needs no download.

The optical-recognition digits of Alpaydin & Kaynak (UCI ML repository, 1998), as bundled with
scikit-learn (``sklearn.datasets.load_digits`` reads a file inside the sklearn package, so no
network): 1797 images of 8x8 pixels, each pixel the count (0-16) of set bits in a 4x4 block of a
32x32 bitmap, and 10 classes. Pixels are scaled to [0, 1] as x = count / 16 and flattened row-major
to 64 columns. A seeded random fraction of the images is the test set; training points carry
label-corruption draws (see :mod:`genlab.data.dataset`); test labels are always clean.

scikit-learn is imported only when :func:`digits` runs; :func:`digits_from_arrays` does the
splitting and scaling on any arrays and needs no sklearn.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from genlab.data.dataset import Dataset, Split, corruption_draws
from genlab.data.settings import DigitsSettings
from genlab.seeding import numpy_rng

N_CLASSES = 10
IMAGE_SHAPE = (8, 8)
MAX_PIXEL = 16  # pixels count set bits in a 4x4 block


def load_digit_arrays() -> tuple[np.ndarray, np.ndarray, str]:
    """The bundled digits as (pixel counts (1797, 64), labels (1797,), sklearn version)."""
    try:  # imported here: sklearn is optional and slow to import
        import sklearn
        from sklearn.datasets import load_digits
    except ImportError as exc:
        raise ImportError("genlab.data.digits needs scikit-learn (package 'scikit-learn', import "
                          "name 'sklearn'), which bundles the 8x8 digits; it is not installed "
                          "in this environment") from exc
    bunch = load_digits()
    return np.asarray(bunch.data), np.asarray(bunch.target), sklearn.__version__


def digits_from_arrays(pixels: np.ndarray, labels: np.ndarray,
                       settings: DigitsSettings) -> Dataset:
    """Split and scale digit images.

    Args:
        pixels: (n, 64) pixel counts in [0, 16].
        labels: (n,) digit classes in [0, 10).
        settings: the test fraction and the seed.

    Returns:
        x = pixels / 16 as float32 (n, 64), y int64; the first round(test_fraction * n) images of
        a seeded permutation are the test set, so a larger fraction only moves images from train
        to test. Both splits keep the source order.
    """
    pixels, labels = np.asarray(pixels), np.asarray(labels)
    n = len(labels)
    if pixels.shape != (n, IMAGE_SHAPE[0] * IMAGE_SHAPE[1]):
        raise ValueError(f"expected pixels of shape ({n}, 64), got {pixels.shape}")
    if n and (pixels.min() < 0 or pixels.max() > MAX_PIXEL):
        raise ValueError(f"pixel counts must lie in [0, {MAX_PIXEL}]")
    if n and (labels.min() < 0 or labels.max() >= N_CLASSES):
        raise ValueError(f"labels must lie in [0, {N_CLASSES})")
    n_test = round(settings.test_fraction * n)
    if not 1 <= n_test <= n - 1:
        raise ValueError(f"test_fraction {settings.test_fraction} of {n} images gives {n_test} "
                         "test images; both splits need at least one")
    order = numpy_rng(settings.seed, "split").permutation(n)
    test_idx, train_idx = np.sort(order[:n_test]), np.sort(order[n_test:])
    # One draw per image, so an image's corruption draw does not depend on the test fraction.
    u_corrupt, y_random = corruption_draws(numpy_rng(settings.seed, "label-corruption"), n,
                                           N_CLASSES)
    x = (pixels / MAX_PIXEL).astype(np.float32)
    y = labels.astype(np.int64)
    info: dict[str, Any] = {
        "generator": "digits",
        "n_classes": N_CLASSES,
        "input_dim": x.shape[1],
        "image_shape": list(IMAGE_SHAPE),
        "pixel_scale": f"x = count / {MAX_PIXEL}",
        "n_images": n,
        "test_fraction": settings.test_fraction,
        "train_class_counts": np.bincount(y[train_idx], minlength=N_CLASSES).tolist(),
    }
    return Dataset(
        train=Split(x[train_idx], y[train_idx], y_random=y_random[train_idx],
                    u_corrupt=u_corrupt[train_idx]),
        test=Split(x[test_idx], y[test_idx]),
        n_classes=N_CLASSES,
        info=info,
    )


def digits(settings: DigitsSettings) -> Dataset:
    """scikit-learn's bundled digits, split and scaled by :func:`digits_from_arrays`.

    Raises:
        ImportError: scikit-learn is not installed.
    """
    pixels, labels, version = load_digit_arrays()
    ds = digits_from_arrays(pixels, labels, settings)
    info = {**ds.info, "source": "sklearn.datasets.load_digits", "sklearn_version": version}
    return Dataset(train=ds.train, test=ds.test, n_classes=ds.n_classes, info=info)
