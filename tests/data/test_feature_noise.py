from __future__ import annotations

import json

import numpy as np
import pydantic
import pytest

from genlab.data.dataset import dataset_from_tables, dataset_to_tables
from genlab.data.feature_noise import FeatureNoiseSettings, as_patches, feature_noise


@pytest.fixture
def tiny_features() -> FeatureNoiseSettings:
    return FeatureNoiseSettings(patch_dim=8, noise_std=0.05, n_test_strong=30, n_test_weak=20,
                                seed=3)


def test_same_seed_same_data_other_seed_other_data(tiny_features) -> None:
    a, b = feature_noise(tiny_features), feature_noise(tiny_features)
    np.testing.assert_array_equal(a.train.x, b.train.x)
    np.testing.assert_array_equal(a.test.x, b.test.x)
    np.testing.assert_array_equal(a.train.u_corrupt, b.train.u_corrupt)
    c = feature_noise(tiny_features.model_copy(update={"seed": 4}))
    assert not np.array_equal(a.train.x, c.train.x)


def test_test_sizes_do_not_change_training_data(tiny_features) -> None:
    a = feature_noise(tiny_features)
    b = feature_noise(tiny_features.model_copy(update={"n_test_strong": 7, "n_test_weak": 3}))
    np.testing.assert_array_equal(a.train.x, b.train.x)
    np.testing.assert_array_equal(a.train.y, b.train.y)
    np.testing.assert_array_equal(a.train.group, b.train.group)
    # each test group has its own stream: resizing the weak-only set keeps the strong points
    c = feature_noise(tiny_features.model_copy(update={"n_test_weak": 5}))
    np.testing.assert_array_equal(a.test.x[:30], c.test.x[:30])


def test_defaults_shapes_types_and_groups() -> None:
    ds = feature_noise(FeatureNoiseSettings(noise_std=0.02, n_test_strong=5, n_test_weak=4,
                                            seed=0))
    assert ds.train.x.shape == (16, 3 * 64) and ds.train.x.dtype == np.float32
    assert ds.test.x.shape == (9, 3 * 64)
    assert ds.train.y.dtype == np.int64 and set(np.unique(ds.train.y)) <= {0, 1}
    assert ds.n_classes == 2 and ds.info["n_classes"] == 2 and ds.info["input_dim"] == 192
    assert ds.info["label_map"] == {"0": -1, "1": 1}
    weak_only = ds.info["train_weak_only_indices"]
    assert len(weak_only) == 2
    np.testing.assert_array_equal(np.flatnonzero(ds.train.group == "weak_only"), weak_only)
    assert list(ds.test.group) == ["strong"] * 5 + ["weak_only"] * 4
    assert ds.train.y_random is not None and ds.test.y_random is None
    json.dumps(ds.info, allow_nan=False)  # plain JSON: no numpy scalars, no NaN


def test_patches_are_exact_and_noise_has_the_set_std() -> None:
    s = FeatureNoiseSettings(noise_std=0.05, strong_norm=1.0, weak_norm=0.1, n_train=40,
                             n_weak_only=10, n_test_strong=1000, n_test_weak=1000, seed=1)
    ds = feature_noise(s)
    for split in (ds.train, ds.test):
        patches = as_patches(split.x, s.patch_dim)
        np.testing.assert_array_equal(patches.reshape(len(split.x), -1), split.x)
        sign = 2.0 * split.y - 1.0  # the documented map 0 <-> -1, 1 <-> +1
        strong = split.group == "strong"
        u = np.zeros(s.patch_dim, dtype=np.float32)
        u[0] = 1.0
        v = np.zeros(s.patch_dim, dtype=np.float32)
        v[1] = np.float32(0.1)
        # Exact equality: each entry is +-norm or 0, written once and rounded once to float32.
        np.testing.assert_array_equal(patches[strong, 0], sign[strong, None] * u)
        np.testing.assert_array_equal(patches[~strong, 0], 0.0)
        np.testing.assert_array_equal(patches[:, 1], sign[:, None] * v)
        assert np.array_equal(split.x[:, s.patch_dim:2 * s.patch_dim], patches[:, 1])
    noise = as_patches(ds.test.x, s.patch_dim)[:, 2].astype(np.float64)
    # 2000 x 64 = 128,000 N(0, 0.05^2) entries: the sample std has relative sd
    # 1/sqrt(256,000) = 0.002 and the mean has sd 0.05 / sqrt(128,000) = 1.4e-4.
    assert abs(noise.std() / 0.05 - 1) < 0.01
    assert abs(noise.mean()) < 1e-3
    # labels are uniform over {-1, +1}: 2000 points, binomial sd 0.011
    assert abs(ds.test.y.mean() - 0.5) < 0.05
    # The weak patch alone classifies every point: the recorded Bayes accuracy of 1 holds.
    np.testing.assert_array_equal((ds.test.x[:, s.patch_dim + 1] > 0).astype(np.int64), ds.test.y)


def test_weak_only_choice_leaves_labels_and_noise_in_place(tiny_features) -> None:
    a = feature_noise(tiny_features)
    b = feature_noise(tiny_features.model_copy(update={"n_weak_only": 5}))
    np.testing.assert_array_equal(a.train.y, b.train.y)
    d = tiny_features.patch_dim
    np.testing.assert_array_equal(a.train.x[:, d:], b.train.x[:, d:])
    assert (b.train.group == "weak_only").sum() == 5


def test_sizes_are_validated() -> None:
    with pytest.raises(pydantic.ValidationError, match="exceeds n_train"):
        FeatureNoiseSettings(noise_std=0.02, n_train=4, n_weak_only=5, n_test_strong=1,
                             n_test_weak=1, seed=0)
    with pytest.raises(pydantic.ValidationError, match="test set is empty"):
        FeatureNoiseSettings(noise_std=0.02, n_test_strong=0, n_test_weak=0, seed=0)
    only_weak = feature_noise(FeatureNoiseSettings(noise_std=0.02, n_test_strong=0, n_test_weak=3,
                                                   seed=0))
    assert list(only_weak.test.group) == ["weak_only"] * 3


def test_parquet_round_trip_is_exact(tiny_features) -> None:
    ds = feature_noise(tiny_features)
    back = dataset_from_tables(*dataset_to_tables(ds), ds.info)
    for name in ("x", "y", "y_random", "u_corrupt", "group"):
        np.testing.assert_array_equal(getattr(back.train, name), getattr(ds.train, name))
    for name in ("x", "y", "group"):
        np.testing.assert_array_equal(getattr(back.test, name), getattr(ds.test, name))
    assert back.test.y_random is None and back.n_classes == 2
