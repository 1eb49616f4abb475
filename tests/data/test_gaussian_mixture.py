from __future__ import annotations

import numpy as np
import pytest

from genlab.data.dataset import corrupt_labels, dataset_from_tables, dataset_to_tables
from genlab.data.gaussian_mixture import gaussian_mixture
from genlab.settings import GaussianMixtureSettings


def test_same_seed_same_data_other_seed_other_data(tiny_mixture) -> None:
    a, b = gaussian_mixture(tiny_mixture), gaussian_mixture(tiny_mixture)
    np.testing.assert_array_equal(a.train.x, b.train.x)
    np.testing.assert_array_equal(a.train.u_corrupt, b.train.u_corrupt)
    c = gaussian_mixture(tiny_mixture.model_copy(update={"seed": 4}))
    assert not np.array_equal(a.train.x, c.train.x)


def test_test_size_does_not_change_training_data(tiny_mixture) -> None:
    a = gaussian_mixture(tiny_mixture)
    b = gaussian_mixture(tiny_mixture.model_copy(update={"n_test": 7}))
    np.testing.assert_array_equal(a.train.x, b.train.x)
    np.testing.assert_array_equal(a.train.y, b.train.y)


def test_shapes_types_and_class_structure() -> None:
    s = GaussianMixtureSettings(n_classes=4, dim=3, mean_scale=3.0, n_train=4000, n_test=10,
                                seed=0)
    ds = gaussian_mixture(s)
    assert ds.train.x.shape == (4000, 3) and ds.train.x.dtype == np.float32
    assert set(np.unique(ds.train.y)) == {0, 1, 2, 3}
    # x = mu_y + N(0, I): within-class covariance is the identity (to sampling error ~ 1/sqrt(1000))
    within = np.concatenate([ds.train.x[ds.train.y == c] - ds.train.x[ds.train.y == c].mean(0)
                             for c in range(4)])
    np.testing.assert_allclose(np.cov(within.T), np.eye(3), atol=0.1)


def test_corruption_rate_and_nesting() -> None:
    s = GaussianMixtureSettings(n_classes=10, dim=2, mean_scale=1.0, n_train=20000, n_test=10,
                                seed=1)
    split = gaussian_mixture(s).train
    y0, r0 = corrupt_labels(split, 0.0)
    np.testing.assert_array_equal(y0, split.y)
    assert not r0.any()
    _, r_half = corrupt_labels(split, 0.5)
    y1, r1 = corrupt_labels(split, 1.0)
    assert r1.all()
    assert abs(r_half.mean() - 0.5) < 0.02  # binomial sd 0.0035
    assert np.all(r1[r_half])  # the corrupted set at p = 0.5 is inside the one at p = 1
    # fully random labels agree with the truth at chance rate 1/C (sd 0.002)
    assert abs((y1 == split.y).mean() - 0.1) < 0.01


def test_corruption_rejects_out_of_range(tiny_mixture) -> None:
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        corrupt_labels(gaussian_mixture(tiny_mixture).train, 1.5)


def test_parquet_round_trip_is_exact(tiny_mixture) -> None:
    ds = gaussian_mixture(tiny_mixture)
    back = dataset_from_tables(*dataset_to_tables(ds), ds.info)
    for name in ("x", "y", "y_random", "u_corrupt"):
        np.testing.assert_array_equal(getattr(back.train, name), getattr(ds.train, name))
    np.testing.assert_array_equal(back.test.x, ds.test.x)
    assert back.test.y_random is None and back.n_classes == ds.n_classes
