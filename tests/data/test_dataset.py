from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from genlab.data.dataset import (
    Dataset,
    Split,
    corrupt_labels,
    corruption_draws,
    dataset_from_tables,
    dataset_to_tables,
    split_to_table,
    table_to_split,
)
from genlab.data.gaussian_mixture import gaussian_mixture
from genlab.seeding import numpy_rng


def test_classification_columns_are_unchanged(tiny_mixture) -> None:
    # Older artifacts have exactly these columns; a split without the new fields writes no more.
    table = split_to_table(gaussian_mixture(tiny_mixture).train)
    assert table.column_names == ["x", "y", "y_random", "u_corrupt"]
    assert table.schema.field("y").type == pa.int64()
    assert table_to_split(table).group is None


def test_regression_targets_round_trip_as_float() -> None:
    rng = np.random.default_rng(0)
    train = Split(rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(5))
    test = Split(rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(4))
    ds = Dataset(train=train, test=test, n_classes=0, info={"n_classes": 0})
    tables = dataset_to_tables(ds)
    assert tables[0].schema.field("y").type == pa.float64()
    back = dataset_from_tables(*tables, ds.info)
    assert back.train.y.dtype == np.float64 and back.n_classes == 0
    np.testing.assert_array_equal(back.train.y, train.y)
    np.testing.assert_array_equal(back.test.y, test.y)
    # p = 0 needs no corruption draws, so regression targets pass through unchanged
    np.testing.assert_array_equal(corrupt_labels(back.train, 0.0)[0], train.y)


def test_group_round_trips_and_is_length_checked() -> None:
    x = np.zeros((3, 2), dtype=np.float32)
    split = Split(x, np.array([0, 1, 0]), group=np.array(["strong", "weak_only", "strong"]))
    back = table_to_split(split_to_table(split))
    np.testing.assert_array_equal(back.group, split.group)
    assert back.y.dtype == np.int64
    with pytest.raises(ValueError, match="group has 2 rows, x has 3"):
        Split(x, np.array([0, 1, 0]), group=np.array(["strong", "strong"]))


def test_corruption_draws_follow_the_gaussian_mixture_convention(tiny_mixture) -> None:
    split = gaussian_mixture(tiny_mixture).train
    u, y_random = corruption_draws(numpy_rng(tiny_mixture.seed, "label-corruption"),
                                   tiny_mixture.n_train, tiny_mixture.n_classes)
    np.testing.assert_array_equal(u, split.u_corrupt)
    np.testing.assert_array_equal(y_random, split.y_random)
