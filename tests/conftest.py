"""Fixtures shared by every test module (helpers for workflow tests live in tests_support)."""

from __future__ import annotations

import pytest
import torch

from genlab.settings import GaussianMixtureSettings, MLPSettings, TrainSettings

# One intra-op thread, as every stage runs (runtime.threads): on 2 cores torch's default of 2 made
# small models 25-70x slower (DESIGN.md).
torch.set_num_threads(1)


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
