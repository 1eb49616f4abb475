"""The logistic-teacher generator: seeded, labels from its logit, exact and recorded flips."""

from __future__ import annotations

import numpy as np
import pydantic
import pytest

from genlab.data.dataset import corrupt_labels, dataset_from_tables, dataset_to_tables
from genlab.data.logistic_teacher import (
    LogisticTeacherSettings,
    feature_scales,
    logistic_teacher,
    stratified_uniforms,
    teacher_logits,
)
from genlab.seeding import numpy_rng


def settings(**changes) -> LogisticTeacherSettings:
    return LogisticTeacherSettings(**({"input_dim": 5, "n_train": 200, "n_test": 50, "seed": 1}
                                      | changes))


def test_seeded_and_each_split_its_own_stream() -> None:
    a, b = logistic_teacher(settings()), logistic_teacher(settings())
    np.testing.assert_array_equal(a.train.x, b.train.x)
    np.testing.assert_array_equal(a.train.y, b.train.y)
    more = logistic_teacher(settings(n_test=80))
    np.testing.assert_array_equal(more.train.x, a.train.x)  # n_test never changes train
    np.testing.assert_array_equal(more.test.x[:50], a.test.x)
    other = logistic_teacher(settings(seed=2))
    assert not np.array_equal(other.train.x, a.train.x)


def test_inputs_are_anisotropic_and_the_logit_has_the_set_spread() -> None:
    s = settings(n_train=20_000, anisotropy=1.0, signal=2.0, bias=0.5)
    data = logistic_teacher(s)
    np.testing.assert_allclose(feature_scales(s)[[0, -1]], [0.1, 10.0])
    np.testing.assert_allclose(data.train.x.std(axis=0), feature_scales(s), rtol=0.03)
    z = teacher_logits(s, data.train.x)
    assert z.std() == pytest.approx(2.0, rel=0.03) and z.mean() == pytest.approx(0.5, abs=0.05)
    # Bernoulli labels: the empirical P(y = 1) follows σ(z) (3 bins, 4 sd tolerance)
    p = 1 / (1 + np.exp(-z))
    for lo, hi in ((0.1, 0.3), (0.4, 0.6), (0.7, 0.9)):
        inside = (p >= lo) & (p < hi)
        assert abs(data.train.y[inside].mean() - p[inside].mean()) < 4 * 0.5 / inside.sum() ** 0.5


def test_sign_labels_are_the_bayes_classifier() -> None:
    data = logistic_teacher(settings(labels="sign"))
    np.testing.assert_array_equal(data.train.y, (teacher_logits(settings(), data.train.x) > 0))
    assert data.info["bayes_test_accuracy"] == 1.0


def test_flips_are_exact_nested_and_recorded() -> None:
    data = logistic_teacher(settings(flip_fraction=0.1))
    assert data.info["n_flipped"] == 20 and data.info["corruption"] == "flip"
    labels, flipped = corrupt_labels(data.train, 0.1)
    assert int(flipped.sum()) == 20
    np.testing.assert_array_equal(labels[flipped], 1 - data.train.y[flipped])  # every one flips
    _, fewer = corrupt_labels(data.train, 0.05)
    assert int(fewer.sum()) == 10 and not (fewer & ~flipped).any()  # nested in p
    # the clean labels are what is stored, and the draws survive the Parquet round trip
    back = dataset_from_tables(*dataset_to_tables(data), data.info)
    np.testing.assert_array_equal(corrupt_labels(back.train, 0.1)[1], flipped)
    # and the draws do not depend on flip_fraction: the set of flips is the same prefix
    more = logistic_teacher(settings(flip_fraction=0.2))
    np.testing.assert_array_equal(more.train.u_corrupt, data.train.u_corrupt)


def test_stratified_uniforms_are_uniform_with_exact_counts() -> None:
    u = stratified_uniforms(numpy_rng(0, "t"), 1000)
    assert ((u >= 0) & (u < 1)).all()
    for p in (0.01, 0.1, 0.37, 0.5):
        assert int((u < p).sum()) == round(p * 1000)
    np.testing.assert_array_equal(np.sort(np.floor(u * 1000)), np.arange(1000))


def test_settings_are_bounded() -> None:
    with pytest.raises(pydantic.ValidationError):
        settings(flip_fraction=1.0)
    with pytest.raises(pydantic.ValidationError):
        settings(labels="noisy")
