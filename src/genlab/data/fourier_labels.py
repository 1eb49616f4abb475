"""Binary labels of controlled sharpness on a manifold of known dimension.

A latent z is uniform on the cube [-sqrt(3), sqrt(3)]^d and embedded isometrically in R^D,
x = Q z (Q with orthonormal columns, :func:`genlab.data.manifolds.orthonormal_basis`), so the
inputs lie exactly on a d-plane and distances between inputs are distances between latents. The
label is the sign of a random sum of plane waves,

    y = 1[ g(z) > 0 ],   g(z) = sum_k a_k cos(omega w_k . z + phi_k),
    a_k ~ N(0, 1),  w_k ~ N(0, I_d / d),  phi_k ~ U[0, 2 pi),

a stationary random function whose zero set (the class boundary) has a density proportional to
omega: the larger the frequency, the closer differently labelled points come, and the larger the
label sharpness K_F of Konz & Mazurowski (2024), the Lipschitz constant of the labelling. The
dimension d and the frequency omega are separate settings, so datasets can vary one at a fixed
value of the other. Given z (and hence x) the label is determined: the Bayes error is 0.
"""

from __future__ import annotations

import math

import numpy as np

from genlab.data.dataset import Dataset, Split, corruption_draws
from genlab.data.manifolds import latent_cube, orthonormal_basis
from genlab.data.settings import FourierLabelSettings
from genlab.seeding import numpy_rng


def wave_labels(z: np.ndarray, amplitudes: np.ndarray, waves: np.ndarray, phases: np.ndarray,
                frequency: float) -> np.ndarray:
    """1[sum_k a_k cos(frequency * w_k . z + phi_k) > 0] for each row of ``z``, int64."""
    g = np.cos(frequency * (z @ waves.T) + phases) @ amplitudes  # (n, K) -> (n,)
    return (g > 0).astype(np.int64)


def fourier_labels(settings: FourierLabelSettings) -> Dataset:
    """Draw the dataset; each part from its own seeded stream, so n_test never changes train.

    Returns:
        x in R^D (float32) on a d-plane, binary labels; training points carry label-corruption
        draws. ``info`` holds d, D, the frequency and the class balance.
    """
    s = settings
    basis = orthonormal_basis(numpy_rng(s.seed, "embedding"), s.ambient_dim, s.intrinsic_dim)
    rng = numpy_rng(s.seed, "waves")
    amplitudes = rng.standard_normal(s.n_waves)
    waves = rng.standard_normal((s.n_waves, s.intrinsic_dim)) / math.sqrt(s.intrinsic_dim)
    phases = rng.uniform(0.0, 2.0 * math.pi, s.n_waves)

    def split(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        z = latent_cube(numpy_rng(s.seed, f"{name}-latents"), n, s.intrinsic_dim)
        return (z @ basis.T).astype(np.float32), wave_labels(z, amplitudes, waves, phases,
                                                             s.frequency)

    (x_train, y_train), (x_test, y_test) = split("train", s.n_train), split("test", s.n_test)
    u_corrupt, y_random = corruption_draws(numpy_rng(s.seed, "label-corruption"), s.n_train, 2)
    info = {"generator": "fourier_labels", "input_dim": s.ambient_dim,
            "intrinsic_dim": s.intrinsic_dim, "ambient_dim": s.ambient_dim,
            "frequency": s.frequency, "n_waves": s.n_waves, "n_classes": 2,
            "train_class_counts": np.bincount(y_train, minlength=2).tolist(),
            "bayes_test_accuracy": 1.0}
    return Dataset(train=Split(x_train, y_train, y_random=y_random, u_corrupt=u_corrupt),
                   test=Split(x_test, y_test), n_classes=2, info=info)
