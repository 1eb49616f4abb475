"""Teacher-student data: Gaussian inputs labelled by a fixed random tanh network.

Inputs are x ~ N(0, I_d). The teacher is an MLP with widths (d, h_1, ..., h_L, k), weights
W_l ~ N(0, 1/fan_in) entrywise, no biases, tanh on every hidden layer and a linear output:

    f(x) = W_{L+1}^T tanh(W_L^T ... tanh(W_1^T x)).

Classification (k = C) labels a point y = argmax_c f_c(x); regression (k = 1) gives the target
y = f(x) + eps, eps ~ N(0, sigma^2). This is the student-teacher setting of the statistical
mechanics of learning (Gardner & Derrida, J. Phys. A 22, 1989; Seung, Sompolinsky & Tishby,
Phys. Rev. A 45, 1992): the target is exactly realisable by a network, so the Bayes risk is known
(zero error for classification, sigma^2 MSE for regression).

With ``random_inputs`` each input is, after labelling, replaced by fresh N(0, I) noise drawn
independently of its label: the "Gaussian" random-inputs variant of Zhang et al., "Understanding
deep learning requires rethinking generalization", ICLR 2017. Labels keep their marginal
distribution but carry no information about the stored inputs, on train and test alike.

Training points of a classification set also carry label-corruption draws (see
:mod:`genlab.data.dataset`); test labels are always clean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from genlab.data.dataset import Dataset, Split, corruption_draws
from genlab.data.settings import TeacherSettings, TeacherStudentSettings
from genlab.seeding import numpy_rng


def random_tanh_mlp(widths: Sequence[int], rng: np.random.Generator) -> list[np.ndarray]:
    """MLP weights for the given layer widths: W_l of shape (fan_in, fan_out), N(0, 1/fan_in).

    The 1/fan_in variance keeps every pre-activation O(1) whatever the widths (LeCun scaling), so
    the tanh layers neither saturate nor collapse to linear as d grows.
    """
    return [rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)
            for n_in, n_out in zip(widths[:-1], widths[1:], strict=True)]


def mlp_forward(weights: Sequence[np.ndarray], x: np.ndarray) -> np.ndarray:
    """f(x) = W_{L+1}^T tanh(... tanh(W_1^T x)), in float64, for a batch x of shape (n, fan_in)."""
    h = np.asarray(x, dtype=np.float64)
    for w in weights[:-1]:
        h = np.tanh(h @ w)
    return h @ weights[-1]


def teacher_widths(settings: TeacherSettings, input_dim: int) -> list[int]:
    return [input_dim, *settings.teacher_hidden, settings.n_outputs]


def teacher_targets(settings: TeacherSettings, outputs: np.ndarray,
                    noise: np.random.Generator) -> np.ndarray:
    """Labels (int64 argmax) or targets (float64 output + sigma * N(0, 1)) from teacher outputs.

    ``noise`` is drawn from only for regression, so it must be a stream of its own.
    """
    if settings.task == "classification":
        return outputs.argmax(axis=1).astype(np.int64)
    return outputs[:, 0] + settings.target_noise_std * noise.standard_normal(len(outputs))


def draw_teacher(settings: TeacherStudentSettings) -> list[np.ndarray]:
    """The teacher's weights; re-evaluate it with :func:`mlp_forward`."""
    return random_tanh_mlp(teacher_widths(settings, settings.input_dim),
                           numpy_rng(settings.seed, "teacher"))


def _sample(s: TeacherStudentSettings, weights: Sequence[np.ndarray], split: str,
            n: int) -> tuple[np.ndarray, np.ndarray]:
    x = numpy_rng(s.seed, f"{split}-inputs").standard_normal((n, s.input_dim)).astype(np.float32)
    # The teacher reads the stored float32 inputs, not their float64 draws, so re-evaluating it on
    # Split.x reproduces every label exactly (no argmax flips from rounding).
    y = teacher_targets(s, mlp_forward(weights, x), numpy_rng(s.seed, f"{split}-target-noise"))
    if s.random_inputs:
        x = numpy_rng(s.seed, f"{split}-random-inputs").standard_normal(
            (n, s.input_dim)).astype(np.float32)
    return x, y


def teacher_dataset(settings: TeacherSettings, seed: int, train: tuple[np.ndarray, np.ndarray],
                    test: tuple[np.ndarray, np.ndarray], info: dict[str, Any],
                    inputs_determine_labels: bool) -> Dataset:
    """Assemble a teacher-labelled dataset: corruption draws, Bayes risk and baselines in ``info``.

    Args:
        settings: the teacher.
        seed: the dataset's base seed (its "label-corruption" stream is drawn here).
        train: (x, y) of the training split.
        test: (x, y) of the test split.
        info: the generator's own ground truth; the task's entries are added to a copy.
        inputs_determine_labels: whether the clean teacher output is a function of the stored
            inputs, which makes the Bayes risk known (0 error, or sigma^2 MSE).
    """
    (x_train, y_train), (x_test, y_test) = train, test
    n_classes = settings.dataset_classes
    info = {**info, "task": settings.task, "n_classes": n_classes, "teacher_activation": "tanh"}
    if settings.task == "classification":
        u_corrupt, y_random = corruption_draws(numpy_rng(seed, "label-corruption"), len(y_train),
                                               n_classes)
        train_split = Split(x_train, y_train, y_random=y_random, u_corrupt=u_corrupt)
        train_counts = np.bincount(y_train, minlength=n_classes)
        info["train_class_counts"] = train_counts.tolist()
        # The chance baseline (and, when the inputs carry no label information, about the best
        # any classifier can do): predict the training set's majority class.
        info["majority_class_test_accuracy"] = float((y_test == train_counts.argmax()).mean())
        if inputs_determine_labels:
            info["bayes_test_accuracy"] = 1.0
    else:
        train_split = Split(x_train, y_train)
        info["target_noise_std"] = settings.target_noise_std
        # The MSE of predicting the mean: the trivial baseline, and about the best possible when
        # the inputs carry no information. Otherwise only the target noise is irreducible.
        info["test_target_variance"] = float(y_test.var())
        if inputs_determine_labels:
            info["bayes_test_mse"] = settings.target_noise_std ** 2
    return Dataset(train=train_split, test=Split(x_test, y_test), n_classes=n_classes, info=info)


def teacher_student(settings: TeacherStudentSettings) -> Dataset:
    """Draw the dataset. Each purpose has its own seeded stream, so n_test never changes train.

    Args:
        settings: the teacher, the input dimension, the sizes and the seed.

    Returns:
        A classification dataset (int64 labels, corruption draws on train) or a regression one
        (float64 targets in ``y``, ``n_classes == 0``). ``info`` records the teacher's widths,
        the baselines and, unless the inputs are random, the Bayes risk.
    """
    s = settings
    weights = draw_teacher(s)
    info = {
        "generator": "teacher_student",
        "input_dim": s.input_dim,
        "teacher_widths": teacher_widths(s, s.input_dim),
        "random_inputs": s.random_inputs,
    }
    return teacher_dataset(s, s.seed, _sample(s, weights, "train", s.n_train),
                           _sample(s, weights, "test", s.n_test), info,
                           inputs_determine_labels=not s.random_inputs)
