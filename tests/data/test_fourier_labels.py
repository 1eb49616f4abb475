"""The Fourier-label manifold: inputs on a d-plane, labels the sign of the wave sum."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from genlab.data.fourier_labels import fourier_labels, wave_labels
from genlab.data.settings import FourierLabelSettings


def settings(**changes) -> FourierLabelSettings:
    return FourierLabelSettings(**{"intrinsic_dim": 3, "ambient_dim": 12, "frequency": 2.0,
                                   "n_train": 400, "n_test": 200, "seed": 5, **changes})


def test_inputs_lie_on_a_d_plane_and_labels_are_both_classes() -> None:
    ds = fourier_labels(settings())
    x = ds.train.x.astype(np.float64)
    singular = np.linalg.svd(x, compute_uv=False)
    assert singular[2] > 1.0 and singular[3] < 1e-4 * singular[0]  # rank 3 to float32
    assert ds.n_classes == 2 and set(np.unique(ds.train.y)) == {0, 1}
    assert ds.train.x.shape == (400, 12) and ds.test.x.shape == (200, 12)
    assert ds.info["intrinsic_dim"] == 3 and ds.info["frequency"] == 2.0


def test_labels_are_the_sign_of_the_wave_sum() -> None:
    z = np.array([[0.0, 0.0], [1.0, -1.0]])
    amplitudes, waves, phases = np.array([1.0, -2.0]), np.eye(2), np.array([0.0, np.pi / 2])
    # g = cos(w.z) - 2 cos(w2.z + pi/2) = cos(z1) + 2 sin(z2)
    g = np.cos(3 * z[:, 0]) + 2 * np.sin(3 * z[:, 1])
    assert np.array_equal(wave_labels(z, amplitudes, waves, phases, 3.0), (g > 0).astype(int))


def test_seeded_and_the_test_split_does_not_move_the_training_split() -> None:
    a, b = fourier_labels(settings()), fourier_labels(settings(n_test=50))
    assert np.array_equal(a.train.x, b.train.x) and np.array_equal(a.train.y, b.train.y)
    assert not np.array_equal(fourier_labels(settings(seed=6)).train.x, a.train.x)
    # the frequency changes the labels only
    c = fourier_labels(settings(frequency=8.0))
    assert np.array_equal(c.train.x, a.train.x) and not np.array_equal(c.train.y, a.train.y)


def test_intrinsic_dim_above_ambient_is_refused() -> None:
    with pytest.raises(ValidationError, match="intrinsic_dim.*exceeds ambient_dim"):
        settings(intrinsic_dim=13)
