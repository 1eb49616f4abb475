"""MNIST-1D: ten digit templates in one dimension, randomly padded, scaled, shifted, sheared and
noised (Greydanus, "Scaling down deep learning", 2020; https://github.com/greydanus/mnist1d).

Built offline by the ``mnist1d`` package's own procedural generator, ``mnist1d.data.
make_dataset``, never its ``get_dataset`` (which downloads a pickle, or unpickles a local file).
The package draws everything from NumPy's and Python's global RNGs after seeding them with
``args.seed``; :func:`mnist1d` saves both states and restores them afterwards, so building a
dataset leaves the caller's random streams as they were and the result depends on the settings
alone. With the default settings and ``seed=42`` the arrays are exactly the package's
``make_dataset(get_dataset_args())`` (a test holds it), in float32.

The package standardises the whole set (train and test together) to mean 0, std 1, and takes
the first ``int(num_samples * train_split)`` series of a shuffled order for training. The
spatially shuffled variant (``shuffle_seq``) permutes the positions of every series by one
permutation drawn after the series, so the shuffled and plain sets of one seed hold the same
series, their positions permuted. Training points carry label-corruption draws from genlab's
own stream (``label-corruption``), as every generator's do; test labels are clean.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from typing import Any

import numpy as np

from genlab.data.dataset import Dataset, Split, corruption_draws
from genlab.data.settings import MNIST1DSettings
from genlab.seeding import numpy_rng

N_CLASSES = 10


@contextmanager
def global_rng_restored() -> Iterator[None]:
    """Run a block that seeds and draws from NumPy's and Python's global RNGs, then put both
    back exactly as they were."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    try:
        yield
    finally:
        np.random.set_state(numpy_state)
        random.setstate(python_state)


def package_args(settings: MNIST1DSettings) -> Any:
    """The settings as the package's ``args`` object (its ``get_dataset_args()`` with our
    values), without the download URL."""
    from mnist1d.data import get_dataset_args

    args = get_dataset_args()
    fields = settings.model_dump()
    fields["padding"] = list(settings.padding)
    for name, value in fields.items():
        setattr(args, name, value)
    del args.url  # never used: make_dataset builds; nothing here may download
    return args


def mnist1d(settings: MNIST1DSettings) -> Dataset:
    """MNIST-1D as the package builds it from ``settings``.

    Returns:
        x float32 (n, final_seq_length), y int64 digits; train: the package's training split
        with label-corruption draws; test: its test split.

    Raises:
        ImportError: the ``mnist1d`` package is not installed.
    """
    try:  # imported here: only this generator needs it
        from mnist1d.data import make_dataset
    except ImportError as exc:
        raise ImportError("genlab.data.mnist1d needs the 'mnist1d' package (pip install "
                          "mnist1d), which builds MNIST-1D procedurally") from exc
    with global_rng_restored():
        data = make_dataset(package_args(settings))
    x_train = np.asarray(data["x"], dtype=np.float32)
    x_test = np.asarray(data["x_test"], dtype=np.float32)
    y_train = np.asarray(data["y"], dtype=np.int64)
    y_test = np.asarray(data["y_test"], dtype=np.int64)
    u_corrupt, y_random = corruption_draws(numpy_rng(settings.seed, "label-corruption"),
                                           len(y_train), N_CLASSES)
    info: dict[str, Any] = {
        "generator": "mnist1d",
        "source": "mnist1d.data.make_dataset",
        "mnist1d_version": version("mnist1d"),
        "n_classes": N_CLASSES,
        "input_dim": x_train.shape[1],
        "shuffle_seq": settings.shuffle_seq,
        "train_class_counts": np.bincount(y_train, minlength=N_CLASSES).tolist(),
    }
    return Dataset(train=Split(x_train, y_train, y_random=y_random, u_corrupt=u_corrupt),
                   test=Split(x_test, y_test), n_classes=N_CLASSES, info=info)


__all__ = ["N_CLASSES", "global_rng_restored", "mnist1d", "package_args"]
