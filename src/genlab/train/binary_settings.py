"""Settings of the binary classifiers of :mod:`genlab.train.binary` (L2 logistic regression and a
small MLP, one logit each, binary cross entropy, trained to a stationary point of the
regularised objective in float64).

A settings module: pydantic only, no torch, numpy or genlab code, so that the influence and
mislabel-detection studies' ``settings.py`` (which share these classes) can import it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from genlab.settings import FrozenModel, MLPSettings

ModelKind = Literal["logistic", "mlp"]
LOSS = "binary_cross_entropy"


class LogisticSettings(FrozenModel):
    """f(x) = wᵀx + b, trained on the binary cross entropy with an L2 penalty."""

    l2: float = Field(gt=0, le=1e3, description="λ of the penalty (λ/2)‖θ‖² (bias included); "
                      "also the influence functions' damping.")


class BinaryMLPSettings(MLPSettings):
    """An MLP with one output logit, trained on the binary cross entropy with an L2 penalty."""

    l2: float = Field(gt=0, le=1e3, description="λ of the penalty (λ/2)‖θ‖² (all parameters); "
                      "also the influence functions' damping.")


class FitSettings(FrozenModel):
    """How far to train: to a stationary point, by L-BFGS then Newton (genlab.train.full_batch)."""

    grad_tol: float = Field(1e-9, gt=0, le=1, description="Trained when max|∇L| is at most this.")
    coarse_tol: float = Field(1e-5, gt=0, le=1, description="Where L-BFGS hands over to Newton.")
    max_lbfgs: int = Field(20_000, ge=1, le=10_000_000, description="L-BFGS iterations per fit.")
    max_newton: int = Field(500, ge=1, le=100_000, description="Newton steps per fit (each a "
                            "gradient; a Hessian is formed only when the old one stops "
                            "working).")


__all__ = ["LOSS", "BinaryMLPSettings", "FitSettings", "LogisticSettings", "ModelKind"]
