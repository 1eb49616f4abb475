"""Fixtures shared by every test module (helpers for workflow tests live in tests_support)."""

from __future__ import annotations

import pytest

from genlab.settings import GaussianMixtureSettings, MLPSettings, TrainSettings


@pytest.fixture
def tiny_mixture() -> GaussianMixtureSettings:
    return GaussianMixtureSettings(n_classes=3, dim=5, mean_scale=2.0, n_train=60, n_test=90,
                                   seed=3)


@pytest.fixture
def tiny_mlp() -> MLPSettings:
    return MLPSettings(hidden=(16,), activation="tanh")


@pytest.fixture
def tiny_sgd() -> TrainSettings:
    return TrainSettings(lr=0.1, momentum=0.9, batch_size=20, max_steps=400, eval_every=10)
