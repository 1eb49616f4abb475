from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from genlab.data.dataset import dataset_from_tables, dataset_to_tables
from genlab.data.digits import DigitsSettings, digits, digits_from_arrays


@pytest.fixture
def fake_digits() -> tuple[np.ndarray, np.ndarray]:
    """Stand-in arrays with the real layout, so the split logic is tested without scikit-learn."""
    rng = np.random.default_rng(0)
    return rng.integers(0, 17, size=(200, 64)).astype(np.float64), rng.integers(0, 10, size=200)


@pytest.fixture
def tiny_digits() -> DigitsSettings:
    return DigitsSettings(test_fraction=0.25, seed=3)


def _rows_list(x: np.ndarray) -> list[bytes]:
    return [row.tobytes() for row in x]


def _rows(x: np.ndarray) -> set[bytes]:
    return set(_rows_list(x))


def test_same_seed_same_split_other_seed_other_split(fake_digits, tiny_digits) -> None:
    a = digits_from_arrays(*fake_digits, tiny_digits)
    b = digits_from_arrays(*fake_digits, tiny_digits)
    np.testing.assert_array_equal(a.train.x, b.train.x)
    np.testing.assert_array_equal(a.train.u_corrupt, b.train.u_corrupt)
    c = digits_from_arrays(*fake_digits, tiny_digits.model_copy(update={"seed": 4}))
    assert not np.array_equal(a.train.x, c.train.x)


def test_split_partitions_scales_and_keeps_labels(fake_digits, tiny_digits) -> None:
    pixels, labels = fake_digits
    ds = digits_from_arrays(pixels, labels, tiny_digits)
    assert len(ds.test.x) == 50 and len(ds.train.x) == 150  # round(0.25 * 200)
    assert ds.train.x.dtype == np.float32 and ds.train.x.shape[1] == 64
    assert ds.train.y.dtype == np.int64 and ds.n_classes == 10
    # x = count / 16 is exact in float32 (a multiple of 1/16), and each row keeps its label
    source = {row.tobytes(): y for row, y in zip((pixels / 16).astype(np.float32), labels,
                                                 strict=True)}
    for split in (ds.train, ds.test):
        assert all(source[row.tobytes()] == y for row, y in zip(split.x, split.y, strict=True))
    assert not _rows(ds.train.x) & _rows(ds.test.x)
    assert ds.info["input_dim"] == 64 and ds.info["n_classes"] == 10
    assert ds.test.y_random is None and ds.train.y_random.max() < 10
    json.dumps(ds.info, allow_nan=False)  # plain JSON: no numpy scalars, no NaN


def test_larger_test_fraction_only_moves_images_to_test(fake_digits, tiny_digits) -> None:
    small = digits_from_arrays(*fake_digits, tiny_digits)
    large = digits_from_arrays(*fake_digits, tiny_digits.model_copy(update={"test_fraction": 0.5}))
    assert _rows(small.test.x) < _rows(large.test.x)
    # an image left in train keeps its corruption draw
    draw = dict(zip(_rows_list(small.train.x), small.train.u_corrupt, strict=True))
    assert all(draw[row] == u for row, u in zip(_rows_list(large.train.x),
                                                large.train.u_corrupt, strict=True))


def test_bad_arrays_are_rejected(fake_digits, tiny_digits) -> None:
    pixels, labels = fake_digits
    with pytest.raises(ValueError, match="shape"):
        digits_from_arrays(pixels[:, :10], labels, tiny_digits)
    with pytest.raises(ValueError, match="pixel counts"):
        digits_from_arrays(pixels * 2, labels, tiny_digits)
    with pytest.raises(ValueError, match="both splits"):
        digits_from_arrays(pixels[:2], labels[:2], DigitsSettings(test_fraction=0.1, seed=0))


def test_missing_scikit_learn_is_named(monkeypatch, tiny_digits) -> None:
    monkeypatch.setitem(sys.modules, "sklearn", None)  # makes `import sklearn` fail
    with pytest.raises(ImportError, match="scikit-learn"):
        digits(tiny_digits)


def test_bundled_digits(tiny_digits) -> None:
    pytest.importorskip("sklearn")
    ds = digits(tiny_digits)
    assert len(ds.train.x) + len(ds.test.x) == 1797
    assert len(ds.test.x) == round(0.25 * 1797)
    assert ds.train.x.min() == 0.0 and ds.train.x.max() == 1.0
    assert set(np.unique(ds.train.y)) == set(range(10))
    assert ds.info["source"] == "sklearn.datasets.load_digits"
    back = dataset_from_tables(*dataset_to_tables(ds), ds.info)
    for name in ("x", "y", "y_random", "u_corrupt"):
        np.testing.assert_array_equal(getattr(back.train, name), getattr(ds.train, name))


def test_parquet_round_trip_is_exact(fake_digits, tiny_digits) -> None:
    ds = digits_from_arrays(*fake_digits, tiny_digits)
    back = dataset_from_tables(*dataset_to_tables(ds), ds.info)
    for name in ("x", "y", "y_random", "u_corrupt"):
        np.testing.assert_array_equal(getattr(back.train, name), getattr(ds.train, name))
    np.testing.assert_array_equal(back.test.x, ds.test.x)
    assert back.test.y_random is None and back.n_classes == 10
