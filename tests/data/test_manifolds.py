from __future__ import annotations

import json
import math

import numpy as np
import pydantic
import pytest

from genlab.data.dataset import dataset_from_tables, dataset_to_tables
from genlab.data.manifolds import ManifoldSettings, draw_manifold, embed, manifold
from genlab.data.teacher_student import mlp_forward


@pytest.fixture
def tiny_manifold() -> ManifoldSettings:
    return ManifoldSettings(task="classification", n_classes=3, teacher_hidden=(8,),
                            intrinsic_dim=3, ambient_dim=12, embedding="tanh", n_train=60,
                            n_test=90, seed=3)


def _pairwise(a: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64)
    return np.sqrt(((a[:, None, :] - a[None, :, :]) ** 2).sum(-1))


def test_same_seed_same_data_other_seed_other_data(tiny_manifold) -> None:
    a, b = manifold(tiny_manifold), manifold(tiny_manifold)
    np.testing.assert_array_equal(a.train.x, b.train.x)
    np.testing.assert_array_equal(a.train.y, b.train.y)
    np.testing.assert_array_equal(a.train.u_corrupt, b.train.u_corrupt)
    c = manifold(tiny_manifold.model_copy(update={"seed": 4}))
    assert not np.array_equal(a.train.x, c.train.x)


def test_test_size_does_not_change_training_data(tiny_manifold) -> None:
    a = manifold(tiny_manifold)
    b = manifold(tiny_manifold.model_copy(update={"n_test": 7}))
    np.testing.assert_array_equal(a.train.x, b.train.x)
    np.testing.assert_array_equal(a.train.y, b.train.y)


def test_shapes_types_and_info(tiny_manifold) -> None:
    ds = manifold(tiny_manifold)
    assert ds.train.x.shape == (60, 12) and ds.train.x.dtype == np.float32
    assert ds.test.x.shape == (90, 12)
    assert ds.train.y.dtype == np.int64 and ds.n_classes == 3
    assert ds.info["generator"] == "manifold" and ds.info["n_classes"] == 3
    assert ds.info["input_dim"] == ds.info["ambient_dim"] == 12
    assert ds.info["intrinsic_dim"] == 3 and ds.info["embedding"] == "tanh"
    assert ds.train.y_random is not None and ds.test.y_random is None
    json.dumps(ds.info, allow_nan=False)  # plain JSON: no numpy scalars, no NaN


def test_linear_embedding_is_an_isometry_onto_a_d_plane() -> None:
    s = ManifoldSettings(task="regression", teacher_hidden=(8,), intrinsic_dim=4, ambient_dim=30,
                         embedding="linear", n_train=200, n_test=10, seed=0)
    ds, draw = manifold(s), draw_manifold(s)
    np.testing.assert_allclose(draw.basis.T @ draw.basis, np.eye(4), atol=1e-12)
    # x is Q z rounded once to float32: entries are O(1), so the error is below 1e-6, and a
    # distance between points of norm ~ sqrt(d) moves by less than 1e-5.
    np.testing.assert_allclose(ds.train.x, draw.z_train @ draw.basis.T, rtol=0, atol=1e-6)
    np.testing.assert_allclose(_pairwise(ds.train.x), _pairwise(draw.z_train), rtol=0, atol=1e-5)
    # Intrinsic dimension: x = Q z spans exactly d directions; the other singular values are
    # float32 rounding, ~1e-7 of the largest.
    sv = np.linalg.svd(ds.train.x.astype(np.float64), compute_uv=False)
    assert sv[3] / sv[0] > 0.1 and sv[4] / sv[0] < 1e-5


def test_tanh_embedding_matches_its_formula() -> None:
    s = ManifoldSettings(task="classification", n_classes=2, teacher_hidden=(8,),
                         intrinsic_dim=2, ambient_dim=10, embedding="tanh", embedding_scale=2.0,
                         embedding_bias_std=0.5, n_train=300, n_test=10, seed=1)
    ds, draw = manifold(s), draw_manifold(s)
    expected = np.tanh(2.0 * draw.z_train @ draw.basis.T + draw.bias)
    np.testing.assert_allclose(ds.train.x, expected, rtol=0, atol=1e-6)  # float32 rounding
    assert np.all(np.abs(ds.train.x) <= 1)
    # The map is curved: the data are not confined to a 2-plane (a linear map would leave the
    # third singular value at float32 rounding, ~1e-7 of the first).
    sv = np.linalg.svd(ds.train.x - ds.train.x.mean(0), compute_uv=False)
    assert sv[2] / sv[0] > 1e-2
    # the same Gaussian draw makes Q for both embeddings
    linear = draw_manifold(s.model_copy(update={"embedding": "linear"}))
    np.testing.assert_array_equal(linear.basis, draw.basis)


def test_labels_are_the_teacher_on_the_latents(tiny_manifold) -> None:
    ds, draw = manifold(tiny_manifold), draw_manifold(tiny_manifold)
    assert [w.shape for w in draw.teacher] == [(3, 8), (8, 3)]
    # Exact: the same float64 computation on the same latents.
    np.testing.assert_array_equal(mlp_forward(draw.teacher, draw.z_train).argmax(1), ds.train.y)
    np.testing.assert_array_equal(mlp_forward(draw.teacher, draw.z_test).argmax(1), ds.test.y)
    regression = ManifoldSettings.model_validate(tiny_manifold.model_dump()
                                                 | {"task": "regression", "n_classes": None})
    reg = manifold(regression)
    assert reg.n_classes == 0 and reg.info["n_classes"] == 0 and reg.train.y.dtype == np.float64
    np.testing.assert_allclose(reg.train.y, mlp_forward(draw_manifold(regression).teacher,
                                                        draw.z_train)[:, 0], rtol=0, atol=1e-12)


def test_uniform_latents_and_ambient_noise() -> None:
    s = ManifoldSettings(task="regression", teacher_hidden=(4,), intrinsic_dim=4, ambient_dim=30,
                         latent="uniform", embedding="linear", ambient_noise_std=0.1,
                         n_train=500, n_test=10, seed=2)
    ds, draw = manifold(s), draw_manifold(s)
    z = draw.z_train
    assert np.all(np.abs(z) <= math.sqrt(3))
    # 2000 U(-sqrt 3, sqrt 3) values: variance 1 with sd sqrt(0.8 / 2000) = 0.02
    assert abs(z.var() - 1) < 0.1
    noise = ds.train.x - embed(s, draw, z)
    # 15,000 N(0, 0.01) entries: the sample std has relative sd 1/sqrt(30,000) = 0.006
    assert abs(noise.std() / 0.1 - 1) < 0.03
    assert "bayes_test_mse" not in ds.info  # noise blurs which latent a point came from


def test_dimensions_are_validated() -> None:
    with pytest.raises(pydantic.ValidationError, match="exceeds ambient_dim"):
        ManifoldSettings(task="classification", n_classes=2, teacher_hidden=(), intrinsic_dim=5,
                         ambient_dim=4, embedding="linear", n_train=1, n_test=1, seed=0)


def test_parquet_round_trip_is_exact(tiny_manifold) -> None:
    ds = manifold(tiny_manifold)
    back = dataset_from_tables(*dataset_to_tables(ds), ds.info)
    for name in ("x", "y", "y_random", "u_corrupt"):
        np.testing.assert_array_equal(getattr(back.train, name), getattr(ds.train, name))
    np.testing.assert_array_equal(back.test.x, ds.test.x)
    assert back.test.y_random is None and back.n_classes == ds.n_classes
