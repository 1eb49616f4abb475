from __future__ import annotations

import json

import numpy as np
import pydantic
import pytest

from genlab.data.dataset import corrupt_labels, dataset_from_tables, dataset_to_tables
from genlab.data.teacher_student import (
    TeacherStudentSettings,
    draw_teacher,
    mlp_forward,
    teacher_student,
)


@pytest.fixture
def tiny_teacher() -> TeacherStudentSettings:
    return TeacherStudentSettings(task="classification", n_classes=3, teacher_hidden=(8, 8),
                                  input_dim=5, n_train=60, n_test=90, seed=3)


@pytest.fixture
def tiny_regression() -> TeacherStudentSettings:
    return TeacherStudentSettings(task="regression", teacher_hidden=(8,), target_noise_std=0.1,
                                  input_dim=5, n_train=60, n_test=90, seed=3)


def _reference_teacher(weights: list[np.ndarray], x: np.ndarray) -> np.ndarray:
    # Written out independently of mlp_forward: tanh hidden layers, linear read-out.
    h = x.astype(np.float64)
    for layer, w in enumerate(weights):
        h = h @ w if layer == len(weights) - 1 else np.tanh(h @ w)
    return h


def test_same_seed_same_data_other_seed_other_data(tiny_teacher) -> None:
    a, b = teacher_student(tiny_teacher), teacher_student(tiny_teacher)
    np.testing.assert_array_equal(a.train.x, b.train.x)
    np.testing.assert_array_equal(a.train.y, b.train.y)
    np.testing.assert_array_equal(a.train.u_corrupt, b.train.u_corrupt)
    c = teacher_student(tiny_teacher.model_copy(update={"seed": 4}))
    assert not np.array_equal(a.train.x, c.train.x)


@pytest.mark.parametrize("name", ["tiny_teacher", "tiny_regression"])
def test_test_size_does_not_change_training_data(name, request) -> None:
    s = request.getfixturevalue(name)
    a, b = teacher_student(s), teacher_student(s.model_copy(update={"n_test": 7}))
    np.testing.assert_array_equal(a.train.x, b.train.x)
    np.testing.assert_array_equal(a.train.y, b.train.y)


def test_classification_shapes_types_and_info(tiny_teacher) -> None:
    ds = teacher_student(tiny_teacher)
    assert ds.train.x.shape == (60, 5) and ds.train.x.dtype == np.float32
    assert ds.test.x.shape == (90, 5)
    assert ds.train.y.dtype == np.int64 and set(np.unique(ds.train.y)) <= {0, 1, 2}
    assert ds.train.y_random is not None and ds.train.u_corrupt is not None
    assert ds.test.y_random is None and ds.n_classes == 3
    assert ds.info["generator"] == "teacher_student" and ds.info["n_classes"] == 3
    assert ds.info["input_dim"] == 5 and ds.info["teacher_widths"] == [5, 8, 8, 3]
    assert sum(ds.info["train_class_counts"]) == 60 and ds.info["bayes_test_accuracy"] == 1.0
    json.dumps(ds.info, allow_nan=False)  # plain JSON: no numpy scalars, no NaN


def test_regression_shapes_types_and_info(tiny_regression) -> None:
    ds = teacher_student(tiny_regression)
    assert ds.n_classes == 0 and ds.info["n_classes"] == 0
    assert ds.train.y.dtype == np.float64 and ds.train.y.shape == (60,)
    assert ds.train.y_random is None and ds.train.u_corrupt is None
    assert ds.info["bayes_test_mse"] == pytest.approx(0.01)


def test_labels_are_the_teacher_on_the_stored_inputs() -> None:
    s = TeacherStudentSettings(task="classification", n_classes=4, teacher_hidden=(16,),
                               input_dim=6, n_train=2000, n_test=500, seed=0)
    ds = teacher_student(s)
    weights = draw_teacher(s)
    assert [w.shape for w in weights] == [(6, 16), (16, 4)]
    for split in (ds.train, ds.test):
        # Exact: the labels were computed from these very float32 inputs. A tie within 1e-13
        # between two outputs could flip an argmax, with probability far below 1e-9 here.
        np.testing.assert_array_equal(_reference_teacher(weights, split.x).argmax(1), split.y)
    assert len(np.unique(ds.train.y)) == 4  # the teacher is not degenerate


def test_teacher_weights_have_variance_one_over_fan_in() -> None:
    s = TeacherStudentSettings(task="regression", teacher_hidden=(500,), input_dim=20, n_train=1,
                               n_test=1, seed=0)
    first, last = draw_teacher(s)
    # 10,000 N(0, 1/20) entries: the sample std of sqrt(20) W has sd 1/sqrt(20000) = 0.007
    assert abs(first.std() * np.sqrt(20) - 1) < 0.03
    # 500 N(0, 1/500) entries: sd of sqrt(500) W's sample std is 1/sqrt(1000) = 0.032
    assert abs(last.std() * np.sqrt(500) - 1) < 0.15


def test_regression_targets_are_teacher_plus_noise() -> None:
    s = TeacherStudentSettings(task="regression", teacher_hidden=(16,), target_noise_std=0.3,
                               input_dim=4, n_train=4000, n_test=10, seed=2)
    ds = teacher_student(s)
    residual = ds.train.y - mlp_forward(draw_teacher(s), ds.train.x)[:, 0]
    # 4000 N(0, 0.09) draws: the sample std has relative sd 1/sqrt(8000) = 0.011, the mean has
    # sd 0.3 / sqrt(4000) = 0.005
    assert abs(residual.std() / 0.3 - 1) < 0.05
    assert abs(residual.mean()) < 0.025
    clean = teacher_student(s.model_copy(update={"target_noise_std": 0.0}))
    np.testing.assert_allclose(clean.train.y, mlp_forward(draw_teacher(s), clean.train.x)[:, 0],
                               rtol=0, atol=1e-12)


def test_random_inputs_keep_labels_and_drop_their_information() -> None:
    s = TeacherStudentSettings(task="classification", n_classes=2, teacher_hidden=(16,),
                               input_dim=8, n_train=4000, n_test=10, seed=5)
    clean, noise = teacher_student(s), teacher_student(s.model_copy(update={"random_inputs": True}))
    np.testing.assert_array_equal(clean.train.y, noise.train.y)
    assert not np.array_equal(clean.train.x, noise.train.x)
    assert "bayes_test_accuracy" not in noise.info
    # The inputs are fresh N(0, I): standard normal entries (32,000 of them, std sd 0.004).
    assert abs(noise.train.x.std() - 1) < 0.02
    # The teacher read on the new inputs agrees with the labels at chance. Without biases the
    # teacher is odd, so for C = 2 both classes have probability 1/2 and agreement is 1/2
    # (binomial sd 0.008 for 4000 points).
    agree = (mlp_forward(draw_teacher(s), noise.train.x).argmax(1) == noise.train.y).mean()
    assert abs(agree - 0.5) < 0.04


def test_settings_must_match_the_task() -> None:
    common = {"teacher_hidden": (4,), "input_dim": 2, "n_train": 1, "n_test": 1, "seed": 0}
    with pytest.raises(pydantic.ValidationError, match="needs n_classes"):
        TeacherStudentSettings(task="classification", **common)
    with pytest.raises(pydantic.ValidationError, match="omit n_classes"):
        TeacherStudentSettings(task="regression", n_classes=3, **common)
    with pytest.raises(pydantic.ValidationError, match="regression only"):
        TeacherStudentSettings(task="classification", n_classes=3, target_noise_std=0.1, **common)
    linear = teacher_student(TeacherStudentSettings(task="regression", **common | {
        "teacher_hidden": ()}))
    assert linear.info["teacher_widths"] == [2, 1]


def test_corruption_draws_are_usable(tiny_teacher) -> None:
    split = teacher_student(tiny_teacher).train
    _, replaced = corrupt_labels(split, 1.0)
    assert replaced.all() and split.y_random.max() < 3


@pytest.mark.parametrize("name", ["tiny_teacher", "tiny_regression"])
def test_parquet_round_trip_is_exact(name, request) -> None:
    ds = teacher_student(request.getfixturevalue(name))
    back = dataset_from_tables(*dataset_to_tables(ds), ds.info)
    for column in ("x", "y", "y_random", "u_corrupt"):
        a, b = getattr(back.train, column), getattr(ds.train, column)
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype
    np.testing.assert_array_equal(back.test.y, ds.test.y)
    assert back.n_classes == ds.n_classes
