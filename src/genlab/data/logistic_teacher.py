"""Binary classification from a logistic teacher, with exactly recorded label flips.

Inputs are x ~ N(0, diag(s)²) with per-feature standard deviations s_j log-spaced over
[10^-a, 10^a] (``anisotropy`` a; a = 0 is isotropic), so the data's curvature differs from the
identity that gradient-dot attribution assumes. The teacher's logit is

    z(x) = β · wᵀx / ‖w ∘ s‖ + b,    w ~ N(0, I_d),

so that β (``signal``) is the standard deviation of z − b over the input distribution. Labels are
y ~ Bernoulli(σ(z)) (``labels: bernoulli``, the logistic model is then well specified: the setting
of Koh & Liang 2017's logistic-regression experiments) or y = 1[z > 0] (``labels: sign``, noise
free).

**Label flips** (for mislabel detection, Koh & Liang §5.4) use the label-corruption draws of
:mod:`genlab.data.dataset` with two differences that make every corruption a genuine flip and its
count exact: ``y_random`` is the *other* class (1 − y, never y itself), and ``u_corrupt`` is
stratified, u = (π + v)/n with π a uniformly random permutation of 0..n−1 and v ~ U[0, 1): each
u is still uniform on [0, 1) and the corrupted sets are still nested in p, but exactly p·n points
have u < p whenever p·n is an integer (⌊p·n⌋ or ⌈p·n⌉ otherwise).
:func:`genlab.data.dataset.corrupt_labels` at p = ``flip_fraction`` gives the training labels and
the mask of flipped points; ``Split.y`` keeps the clean labels, and ``info`` records the fraction
and the count. Test labels are always clean.
"""

from __future__ import annotations

import numpy as np

from genlab.data.dataset import Dataset, Split
from genlab.data.settings import LogisticTeacherSettings
from genlab.seeding import numpy_rng


def feature_scales(settings: LogisticTeacherSettings) -> np.ndarray:
    """The per-feature standard deviations s (d,), log-spaced over [10^-a, 10^a]."""
    a = settings.anisotropy
    return np.logspace(-a, a, settings.input_dim)


def teacher_logits(settings: LogisticTeacherSettings, x: np.ndarray) -> np.ndarray:
    """z(x) = β wᵀx/‖w ∘ s‖ + b, in float64, for a batch x (n, d)."""
    w = numpy_rng(settings.seed, "teacher").standard_normal(settings.input_dim)
    norm = float(np.linalg.norm(w * feature_scales(settings)))
    return settings.signal * (np.asarray(x, dtype=np.float64) @ w) / norm + settings.bias


def _sample(s: LogisticTeacherSettings, split: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = (numpy_rng(s.seed, f"{split}-inputs").standard_normal((n, s.input_dim))
         * feature_scales(s)).astype(np.float32)
    z = teacher_logits(s, x)  # from the stored float32 inputs: re-evaluating reproduces y
    if s.labels == "sign":
        y = (z > 0).astype(np.int64)
    else:
        u = numpy_rng(s.seed, f"{split}-labels").random(n)
        y = (u < 1.0 / (1.0 + np.exp(-z))).astype(np.int64)
    return x, y


def stratified_uniforms(rng: np.random.Generator, n: int) -> np.ndarray:
    """u = (π + v)/n: each uniform on [0, 1), and exactly p·n of them below p when p·n is an
    integer (a random permutation π of 0..n−1, v ~ U[0, 1))."""
    return (rng.permutation(n) + rng.random(n)) / n


def logistic_teacher(settings: LogisticTeacherSettings) -> Dataset:
    """Draw the dataset; each purpose has its own seeded stream, so n_test never changes train.

    Returns:
        A binary dataset (``n_classes == 2``, int64 labels in {0, 1}); the training split carries
        the flip draws (``y_random = 1 − y``, stratified ``u_corrupt``), ``info`` the flip
        fraction and count, the teacher's test accuracy (the Bayes classifier's) and the
        majority-class baseline.
    """
    s = settings
    x_train, y_train = _sample(s, "train", s.n_train)
    x_test, y_test = _sample(s, "test", s.n_test)
    u_corrupt = stratified_uniforms(numpy_rng(s.seed, "label-flips"), s.n_train)
    flipped = u_corrupt < s.flip_fraction
    bayes = (teacher_logits(s, x_test) > 0).astype(np.int64)
    info = {
        "generator": "logistic_teacher",
        "task": "classification",
        "n_classes": 2,
        "input_dim": s.input_dim,
        "feature_scales": feature_scales(s).tolist(),
        "flip_fraction": s.flip_fraction,
        "n_flipped": int(flipped.sum()),
        "corruption": "flip",  # y_random is the other class; u_corrupt is stratified
        "bayes_test_accuracy": float((bayes == y_test).mean()),
        "majority_class_test_accuracy": float((y_test == int(2 * y_train.sum() >= s.n_train))
                                              .mean()),
    }
    return Dataset(
        train=Split(x_train, y_train, y_random=1 - y_train, u_corrupt=u_corrupt),
        test=Split(x_test, y_test),
        n_classes=2,
        info=info,
    )


__all__ = ["LogisticTeacherSettings", "feature_scales", "logistic_teacher",
           "stratified_uniforms", "teacher_logits"]
