"""MNIST-1D built by the mnist1d package's generator: the package's own arrays for its defaults,
the global RNGs left alone, seeds, the shuffled variant and bad settings."""

from __future__ import annotations

import random

import numpy as np
import pytest
from pydantic import ValidationError

from genlab.data.dataset import dataset_from_tables, dataset_to_tables
from genlab.data.mnist1d import global_rng_restored, mnist1d
from genlab.data.settings import MNIST1DSettings

mnist1d_data = pytest.importorskip("mnist1d.data")

SMALL = MNIST1DSettings(num_samples=200, seed=7)


@pytest.fixture(scope="module")
def defaults():
    """genlab's dataset for the package's default arguments (seed 42) and the package's own."""
    ours = mnist1d(MNIST1DSettings(seed=42))
    with global_rng_restored():
        theirs = mnist1d_data.make_dataset(mnist1d_data.get_dataset_args())
    return ours, theirs


def test_defaults_equal_the_packages_make_dataset(defaults) -> None:
    ours, theirs = defaults
    assert ours.train.x.shape == (4000, 40) and ours.test.x.shape == (1000, 40)
    np.testing.assert_array_equal(ours.train.x, theirs["x"].astype(np.float32))
    np.testing.assert_array_equal(ours.test.x, theirs["x_test"].astype(np.float32))
    np.testing.assert_array_equal(ours.train.y, theirs["y"])
    np.testing.assert_array_equal(ours.test.y, theirs["y_test"])
    assert ours.train.x.dtype == np.float32 and ours.train.y.dtype == np.int64
    assert ours.n_classes == 10 and ours.info["input_dim"] == 40
    # every field of the package's defaults is ours too (url aside: nothing may download)
    ours_fields = MNIST1DSettings(seed=42).model_dump()
    for name, value in mnist1d_data.get_dataset_args(as_dict=True).items():
        if name != "url":
            assert ours_fields[name] == (tuple(value) if isinstance(value, list) else value), name


def test_standardised_over_both_splits_and_balanced(defaults) -> None:
    ours, _ = defaults
    x = np.concatenate([ours.train.x, ours.test.x]).astype(np.float64)
    assert abs(x.mean()) < 1e-6 and abs(x.std() - 1) < 1e-6
    counts = np.bincount(np.concatenate([ours.train.y, ours.test.y]), minlength=10)
    assert counts.tolist() == [500] * 10  # num_samples // 10 series of each digit


def test_the_callers_global_rngs_are_left_alone() -> None:
    np.random.seed(123)
    random.seed(5)
    numpy_before, python_before = np.random.get_state(), random.getstate()
    mnist1d(SMALL)
    numpy_after = np.random.get_state()
    assert numpy_after[0] == numpy_before[0] and numpy_after[2:] == numpy_before[2:]
    np.testing.assert_array_equal(numpy_after[1], numpy_before[1])
    assert random.getstate() == python_before
    # and the streams go on as if nothing had drawn from them
    np.random.seed(123)
    expected = np.random.rand(3)
    np.random.seed(123)
    mnist1d(SMALL)
    np.testing.assert_array_equal(np.random.rand(3), expected)


def test_seeded_draws() -> None:
    a, b = mnist1d(SMALL), mnist1d(SMALL)
    np.testing.assert_array_equal(a.train.x, b.train.x)
    np.testing.assert_array_equal(a.train.u_corrupt, b.train.u_corrupt)
    c = mnist1d(SMALL.model_copy(update={"seed": 8}))
    assert not np.array_equal(a.train.x, c.train.x)
    assert a.train.y_random is not None and a.test.y_random is None  # test labels stay clean
    assert len(a.train.x) == 160 and len(a.test.x) == 40  # int(200 * 0.8)


def test_shuffled_variant_permutes_the_positions_of_the_same_series() -> None:
    plain = mnist1d(SMALL)
    shuffled = mnist1d(SMALL.model_copy(update={"shuffle_seq": True}))
    np.testing.assert_array_equal(plain.train.y, shuffled.train.y)
    # one permutation for every series: find it from the first, check it on all of them
    order = [int(np.argmin(np.abs(plain.train.x[0] - v))) for v in shuffled.train.x[0]]
    assert sorted(order) == list(range(40)) and order != list(range(40))
    # the standardisation sums the same numbers in another order: equal to float32 rounding
    np.testing.assert_allclose(shuffled.train.x, plain.train.x[:, order], atol=1e-6)
    np.testing.assert_allclose(shuffled.test.x, plain.test.x[:, order], atol=1e-6)


def test_knobs_change_the_data() -> None:
    short = mnist1d(SMALL.model_copy(update={"final_seq_length": 24}))
    assert short.train.x.shape == (160, 24)
    quiet = mnist1d(SMALL.model_copy(update={"iid_noise_scale": 0.0, "corr_noise_scale": 0.0}))
    assert not np.array_equal(quiet.train.x, mnist1d(SMALL).train.x)


def test_parquet_round_trip() -> None:
    ds = mnist1d(SMALL)
    back = dataset_from_tables(*dataset_to_tables(ds), ds.info)
    np.testing.assert_array_equal(back.train.x, ds.train.x)
    np.testing.assert_array_equal(back.train.y_random, ds.train.y_random)


@pytest.mark.parametrize(("update", "message"), [
    ({"num_samples": 205}, "multiple of 10"),
    ({"train_split": 0.001}, "both splits"),
    ({"padding": (60, 36)}, "low exceeds high"),
    ({"max_translation": 100}, "exceeds the dilated"),
    ({"seed": -1}, "greater than or equal"),
])
def test_bad_settings_name_the_problem(update, message) -> None:
    with pytest.raises(ValidationError, match=message):
        MNIST1DSettings.model_validate({**SMALL.model_dump(), **update})
