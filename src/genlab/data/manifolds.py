"""Data on a d-dimensional manifold embedded in R^D, labelled by a random teacher on the latent.

A latent z in R^d is drawn from N(0, I_d) or uniformly from the cube [-sqrt(3), sqrt(3)]^d (unit
variance per coordinate, like the Gaussian, so the scales below mean the same for both). It is
embedded in R^D (d <= D) by a fixed random map built from Q, a D x d matrix with orthonormal
columns (the Q factor of a Gaussian matrix, so its column space is uniform on the Grassmannian):

    linear:  x = Q z                                (an isometry: ||x - x'|| = ||z - z'||)
    tanh:    x = tanh(scale * Q z + b),  b ~ N(0, bias_std^2 I_D)

then optionally x += N(0, noise^2 I_D). Both maps are injective (Q has full column rank and tanh is
strictly increasing), so without ambient noise the data lie exactly on a d-dimensional manifold:
a d-plane for the linear map, a curved one for tanh. Labels come from the tanh teacher of
:mod:`genlab.data.teacher_student` applied to z: a smooth function of the intrinsic coordinates.

This is the hidden-manifold / intrinsic-dimension setting: Goldt, Mezard, Krzakala & Zdeborova,
"Modeling the influence of data structure on learning in neural networks: the hidden manifold
model", Phys. Rev. X 10, 2020; and the scaling of learning curves with intrinsic rather than
ambient dimension (Sharma & Kaplan, "Scaling laws from the data manifold dimension", JMLR 23, 2022).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from genlab.data.dataset import Dataset
from genlab.data.settings import ManifoldSettings
from genlab.data.teacher_student import (
    mlp_forward,
    random_tanh_mlp,
    teacher_dataset,
    teacher_targets,
    teacher_widths,
)
from genlab.seeding import numpy_rng


@dataclass(frozen=True)
class ManifoldDraw:
    """The hidden ground truth behind a :func:`manifold` dataset."""

    basis: np.ndarray  # (D, d) Q, orthonormal columns
    bias: np.ndarray  # (D,) b, used by the tanh embedding only
    teacher: list[np.ndarray]  # teacher weights on z, see teacher_student.mlp_forward
    z_train: np.ndarray  # (n_train, d) float64 latents
    z_test: np.ndarray  # (n_test, d) float64 latents


def _latents(s: ManifoldSettings, split: str, n: int) -> np.ndarray:
    rng = numpy_rng(s.seed, f"{split}-latents")
    if s.latent == "gaussian":
        return rng.standard_normal((n, s.intrinsic_dim))
    return latent_cube(rng, n, s.intrinsic_dim)


def orthonormal_basis(rng: np.random.Generator, ambient_dim: int, intrinsic_dim: int
                      ) -> np.ndarray:
    """Q, ``(D, d)`` with orthonormal columns whose span is uniform on the Grassmannian: the Q
    factor of a Gaussian matrix drawn from ``rng``."""
    q, r = np.linalg.qr(rng.standard_normal((ambient_dim, intrinsic_dim)))
    # QR's sign convention is LAPACK's choice; fixing diag(R) > 0 makes Q a well-defined function
    # of the Gaussian draw (and Haar-distributed).
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def latent_cube(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    """``n`` points uniform on [-sqrt(3), sqrt(3)]^dim: unit variance per coordinate."""
    half_width = math.sqrt(3.0)  # U(-a, a) has variance a^2 / 3
    return rng.uniform(-half_width, half_width, (n, dim))


def draw_manifold(settings: ManifoldSettings) -> ManifoldDraw:
    """The embedding, the teacher and the latents, each from its own stream."""
    s = settings
    q = orthonormal_basis(numpy_rng(s.seed, "embedding"), s.ambient_dim, s.intrinsic_dim)
    bias = s.embedding_bias_std * numpy_rng(s.seed, "embedding-bias").standard_normal(
        s.ambient_dim)
    teacher = random_tanh_mlp(teacher_widths(s, s.intrinsic_dim), numpy_rng(s.seed, "teacher"))
    return ManifoldDraw(basis=q, bias=bias, teacher=teacher,
                        z_train=_latents(s, "train", s.n_train),
                        z_test=_latents(s, "test", s.n_test))


def embed(settings: ManifoldSettings, draw: ManifoldDraw, z: np.ndarray) -> np.ndarray:
    """The noise-free points on the manifold, float64 (n, D)."""
    linear = z @ draw.basis.T
    if settings.embedding == "linear":
        return linear
    return np.tanh(settings.embedding_scale * linear + draw.bias)


def _split(s: ManifoldSettings, draw: ManifoldDraw, split: str,
           z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = embed(s, draw, z)
    if s.ambient_noise_std > 0:
        x = x + s.ambient_noise_std * numpy_rng(s.seed, f"{split}-ambient-noise").standard_normal(
            x.shape)
    y = teacher_targets(s, mlp_forward(draw.teacher, z),
                        numpy_rng(s.seed, f"{split}-target-noise"))
    return x.astype(np.float32), y


def manifold(settings: ManifoldSettings) -> Dataset:
    """Draw the dataset. Each purpose has its own seeded stream, so n_test never changes train.

    Args:
        settings: latent law and dimension, embedding, noise, teacher, sizes and seed.

    Returns:
        Inputs x in R^D (float32) labelled by the teacher on the latent z: class indices with
        corruption draws on train, or float64 regression targets (``n_classes == 0``). ``info``
        records the intrinsic and ambient dimensions and the embedding; :func:`draw_manifold`
        re-draws the latents and maps behind it.
    """
    s = settings
    draw = draw_manifold(s)
    info = {
        "generator": "manifold",
        "input_dim": s.ambient_dim,
        "intrinsic_dim": s.intrinsic_dim,
        "ambient_dim": s.ambient_dim,
        "latent": s.latent,
        "embedding": s.embedding,
        "ambient_noise_std": s.ambient_noise_std,
        "teacher_widths": teacher_widths(s, s.intrinsic_dim),
    }
    if s.embedding == "tanh":
        info |= {"embedding_scale": s.embedding_scale,
                 "embedding_bias_std": s.embedding_bias_std}
    # Without ambient noise the embedding is injective, so x determines z and hence the label.
    return teacher_dataset(s, s.seed, _split(s, draw, "train", draw.z_train),
                           _split(s, draw, "test", draw.z_test), info,
                           inputs_determine_labels=s.ambient_noise_std == 0)
