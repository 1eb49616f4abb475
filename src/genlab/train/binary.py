"""Binary classifiers, as the influence and mislabel-detection studies train them: L2 logistic
regression and a small MLP, one logit each, binary cross entropy (or, for the MNIST-1D studies,
ten logits and the cross entropy), trained to a stationary point
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
    """A classification problem in tensors: float64 training inputs and the labels trained on,
    test inputs and clean labels; labels are 0/1 floats for a one-logit model, class indices
    (int64) for a multiclass one."""

    X: Any
    y: Any
    X_test: Any
    y_test: Any

    @classmethod
    def from_dataset(cls, dataset: Dataset, labels: np.ndarray, device: Any,
                     multiclass: bool = False) -> Problem:
        import torch

        def tensor(a: np.ndarray, dtype: Any = np.float64) -> torch.Tensor:
            return torch.from_numpy(np.asarray(a, dtype=dtype)).to(device)

        label_dtype = np.int64 if multiclass else np.float64
        return cls(tensor(dataset.train.x), tensor(labels, label_dtype), tensor(dataset.test.x),
                   tensor(dataset.test.y, label_dtype))


@dataclass
class Fitted:
    """A model fitted by :func:`fit_classifier`: the model at the fit's end, its registry kind
    and settings, λ, the initial parameters θ₀ and the fit's result and wall time."""

    model: Any
    kind: str
    settings: Any
    l2: float
    theta0: Any
    result: Any  # genlab.train.full_batch.FitResult
    seconds: float

    def record(self) -> dict[str, Any]:
        """The fit's convergence, as the studies' metrics hold it."""
        r = self.result
        return {"grad_max": r.grad_max, "lbfgs_iterations": r.lbfgs_iterations,
                "newton_steps": r.newton_steps}


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


def fit_classifier(model_kind: ModelKind, logistic: LogisticSettings, mlp: BinaryMLPSettings,
                   fit_settings: FitSettings, problem: Problem, loss_fn: Any, seed: int,
                   device: Any, outputs: int = 1) -> Fitted:
    """The seeded model of ``model_kind`` (one logit, or ``outputs``) fitted to a stationary
    point of (1/n) Σ ℓᵢ + (λ/2)‖θ‖² on the problem's training labels, ``loss_fn`` the mean loss
    ℓ, from its initialisation θ₀."""
    import time

    from genlab.train.full_batch import RegularisedObjective, fit, flat_parameters, load_flat

    kind, settings, l2 = model_settings(model_kind, logistic, mlp)
    model = build(kind, settings, problem.X.shape[1], seed, device, outputs)
    theta0 = flat_parameters(model)
    start = time.perf_counter()
    result = fit(RegularisedObjective(model, loss_fn, problem.X, problem.y, l2), theta0,
                 **fit_settings_kwargs(fit_settings))
    load_flat(model, result.theta)
    return Fitted(model, kind, settings, l2, theta0, result, time.perf_counter() - start)


def per_example_losses(model: Any, X: Any, y: Any) -> Any:
    """(n,) cross entropies: binary, of one logit f(x) against labels y ∈ {0, 1}; of the
    logits against class indices for a multiclass model (integer labels)."""
    import torch
    from torch.nn import functional as F

    with torch.no_grad():
        if y.dtype == torch.int64:
            return F.cross_entropy(model(X), y, reduction="none")
        return F.binary_cross_entropy_with_logits(model(X).reshape(-1), y, reduction="none")


def margins(model: Any, X: Any, y: Any) -> Any:
    """(n,) logit margins (2y − 1)·f(x): positive when classified right (the measurement of
    Park et al. 2023's datamodels)."""
    import torch

    with torch.no_grad():
        return (2 * y - 1) * model(X).reshape(-1)


def accuracy(model: Any, X: Any, y: Any) -> float:
    """The fraction of points classified right: the logit's sign against 0/1 labels, the
    largest logit against integer class labels."""
    import torch

    with torch.no_grad():
        if y.dtype == torch.int64:
            return float((model(X).argmax(dim=1) == y).to(torch.float64).mean())
        return float(((model(X).reshape(-1) > 0).to(y.dtype) == y).to(torch.float64).mean())


__all__ = ["Fitted", "Problem", "accuracy", "build", "fit_classifier", "fit_settings_kwargs",
           "margins", "model_settings", "per_example_losses"]
