from __future__ import annotations

import json

import numpy as np
import pydantic
import pytest

from genlab.data.dataset import dataset_from_tables, dataset_to_tables
from genlab.data.modular import modular
from genlab.data.settings import ModularSettings, is_prime


@pytest.fixture
def tiny_modular() -> ModularSettings:
    return ModularSettings(modulus=13, operation="add", train_fraction=0.4, seed=3)


def _reference(a: int, b: int, p: int, operation: str) -> int:
    # Plain Python integers, written independently of the vectorised table.
    if operation == "add":
        return (a + b) % p
    if operation == "sub":
        return (a - b) % p
    if operation == "mul":
        return (a * b) % p
    return (a * pow(b, -1, p)) % p


def _pairs(x: np.ndarray) -> set[tuple[int, int]]:
    return {(int(a), int(b)) for a, b in x}


def test_same_seed_same_data_other_seed_other_data(tiny_modular) -> None:
    a, b = modular(tiny_modular), modular(tiny_modular)
    np.testing.assert_array_equal(a.train.x, b.train.x)
    np.testing.assert_array_equal(a.train.u_corrupt, b.train.u_corrupt)
    c = modular(tiny_modular.model_copy(update={"seed": 4}))
    assert not np.array_equal(a.train.x, c.train.x)


@pytest.mark.parametrize("operation", ["add", "sub", "mul", "div"])
def test_labels_are_exact_and_the_split_partitions_every_pair(operation) -> None:
    p, fraction = 11, 0.3
    s = ModularSettings(modulus=p, operation=operation, train_fraction=fraction, seed=0)
    ds = modular(s)
    for split in (ds.train, ds.test):
        assert split.x.dtype == np.float32 and split.x.shape[1] == 2
        np.testing.assert_array_equal(split.x, np.round(split.x))  # integer token ids
        expected = [_reference(int(a), int(b), p, operation) for a, b in split.x]
        np.testing.assert_array_equal(split.y, expected)
        assert split.y.dtype == np.int64
    if operation == "div":  # the quotient q satisfies q * b = a (mod p)
        a, b = ds.train.x.astype(np.int64).T
        np.testing.assert_array_equal((ds.train.y * b) % p, a)
    train, test = _pairs(ds.train.x), _pairs(ds.test.x)
    everything = {(a, b) for a in range(p) for b in range(p) if operation != "div" or b != 0}
    assert len(train) == len(ds.train.x) and len(test) == len(ds.test.x)  # no duplicates
    assert not train & test and train | test == everything
    n_pairs = len(everything)
    assert n_pairs == (p * (p - 1) if operation == "div" else p * p)
    # rounding to a whole number of pairs is the only departure from the requested fraction
    assert len(train) == round(fraction * n_pairs)
    assert abs(len(train) / n_pairs - fraction) <= 0.5 / n_pairs
    assert ds.info["realised_train_fraction"] == len(train) / n_pairs


def test_shapes_and_info(tiny_modular) -> None:
    ds = modular(tiny_modular)
    assert ds.n_classes == 13 and ds.info["n_classes"] == 13 and ds.info["input_dim"] == 2
    assert ds.info["generator"] == "modular" and ds.info["input_encoding"] == "tokens"
    assert ds.info["n_pairs"] == 169 and len(ds.train.x) + len(ds.test.x) == 169
    assert ds.train.y_random is not None and ds.train.y_random.max() < 13
    assert ds.test.y_random is None
    json.dumps(ds.info, allow_nan=False)  # plain JSON: no numpy scalars, no NaN


def test_splits_are_nested_in_the_fraction_and_corruption_follows_the_pair(tiny_modular) -> None:
    small = modular(tiny_modular)
    large = modular(tiny_modular.model_copy(update={"train_fraction": 0.7}))
    assert _pairs(small.train.x) < _pairs(large.train.x)
    # each pair keeps its corruption draw whatever the fraction
    draw = {(int(a), int(b)): u for (a, b), u in zip(large.train.x, large.train.u_corrupt,
                                                     strict=True)}
    assert all(draw[(int(a), int(b))] == u
               for (a, b), u in zip(small.train.x, small.train.u_corrupt, strict=True))


def test_division_needs_a_prime_modulus() -> None:
    assert [n for n in range(20) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19]
    with pytest.raises(pydantic.ValidationError, match="12 is not prime.*11, 13"):
        ModularSettings(modulus=12, operation="div", train_fraction=0.5, seed=0)
    ds = modular(ModularSettings(modulus=12, operation="mul", train_fraction=0.5, seed=0))
    assert ds.n_classes == 12  # the other operations accept any modulus
    with pytest.raises(pydantic.ValidationError, match="both splits need at least one"):
        ModularSettings(modulus=2, operation="add", train_fraction=0.1, seed=0)


def test_parquet_round_trip_is_exact(tiny_modular) -> None:
    ds = modular(tiny_modular)
    back = dataset_from_tables(*dataset_to_tables(ds), ds.info)
    for name in ("x", "y", "y_random", "u_corrupt"):
        np.testing.assert_array_equal(getattr(back.train, name), getattr(ds.train, name))
    np.testing.assert_array_equal(back.test.x, ds.test.x)
    assert back.test.y_random is None and back.n_classes == ds.n_classes
