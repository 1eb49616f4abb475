"""Binary classifiers, as the influence and mislabel-detection studies train them: L2 logistic
regression and a small MLP, one logit each, binary cross entropy, trained to a stationary point
of the regularised objective (1/n) Σ ℓᵢ + (λ/2)‖θ‖² in float64 (:mod:`genlab.train.full_batch`),
so that the influence functions' damping is exactly the L2 coefficient λ.

Their settings are in :mod:`genlab.train.binary_settings` (pydantic only, importable by the
studies' settings modules). Torch is imported inside the functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from genlab.settings import MLPSettings
from genlab.train.binary_settings import BinaryMLPSettings, FitSettings, LogisticSettings, ModelKind

if TYPE_CHECKING:
    from genlab.data.dataset import Dataset


def model_settings(kind: ModelKind, logistic: LogisticSettings, mlp: BinaryMLPSettings):
    """The registry kind and settings that rebuild the model, and its L2 coefficient."""
    from genlab.models.linear import LinearSettings

    if kind == "logistic":
        return "linear", LinearSettings(), logistic.l2
    base = MLPSettings.model_validate(mlp.model_dump(exclude={"l2"}))
    return "mlp", base, mlp.l2


@dataclass
class Problem:
    """A binary problem in float64 tensors: training inputs and the labels trained on (0/1
    floats), test inputs and clean labels."""

    X: Any
    y: Any
    X_test: Any
    y_test: Any

    @classmethod
    def from_dataset(cls, dataset: Dataset, labels: np.ndarray, device: Any) -> Problem:
        import torch

        def tensor(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.asarray(a, dtype=np.float64)).to(device)

        return cls(tensor(dataset.train.x), tensor(labels), tensor(dataset.test.x),
                   tensor(dataset.test.y))


def build(kind: str, settings: Any, input_dim: int, seed: int, device: Any, outputs: int = 1):
    """The seeded model in float64 and eval mode (it has no dropout or batch norm anyway); one
    logit, or ``outputs`` (the multiclass models of the influence_mnist1d study)."""
    import torch

    from genlab.models.registry import build_seeded_model

    return build_seeded_model(kind, settings, input_dim, outputs, seed,
                              device).to(torch.float64).eval()


def fit_settings_kwargs(fit: FitSettings) -> dict[str, Any]:
    return {"grad_tol": fit.grad_tol, "coarse_tol": fit.coarse_tol, "max_lbfgs": fit.max_lbfgs,
            "max_newton": fit.max_newton}


def per_example_losses(model: Any, X: Any, y: Any) -> Any:
    """(n,) binary cross entropies of the logits f(x) against labels y ∈ {0, 1}."""
    import torch
    from torch.nn import functional as F

    with torch.no_grad():
        return F.binary_cross_entropy_with_logits(model(X).reshape(-1), y, reduction="none")


def margins(model: Any, X: Any, y: Any) -> Any:
    """(n,) logit margins (2y − 1)·f(x): positive when classified right (the measurement of
    Park et al. 2023's datamodels)."""
    import torch

    with torch.no_grad():
        return (2 * y - 1) * model(X).reshape(-1)


def accuracy(model: Any, X: Any, y: Any) -> float:
    import torch

    with torch.no_grad():
        return float(((model(X).reshape(-1) > 0).to(y.dtype) == y).to(torch.float64).mean())


__all__ = ["Problem", "accuracy", "build", "fit_settings_kwargs", "margins", "model_settings",
           "per_example_losses"]
