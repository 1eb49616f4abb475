"""The training losses and the decision rule that goes with each (bottom layer: torch only).

Losses (see :class:`genlab.settings.TrainSettings`): ``cross_entropy``; ``mse``, ½(f − y)² for
regression targets and ½‖f − onehot(y)‖² per example for class labels; ``squared_margin``,
(1 − y f)² with y = ±1 from class indices {0, 1}. The training loop
(:mod:`genlab.train.loop`), the studies and the post-hoc analyses all take their losses from here.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def loss_value(kind: str, output: torch.Tensor, target: torch.Tensor,
               reduction: str = "mean") -> torch.Tensor:
    """The training loss (see :class:`~genlab.settings.TrainSettings`), reduced by ``mean`` or
    ``sum``."""
    if kind == "cross_entropy":
        return F.cross_entropy(output, target, reduction=reduction)
    if kind == "mse" and target.is_floating_point():  # regression: ½(f − y)²
        per_example = 0.5 * (output.reshape(target.shape) - target).square()
    elif kind == "mse":  # ½‖f − onehot(y)‖² per example, as in Cohen et al. 2021
        onehot = F.one_hot(target, output.shape[1]).to(output.dtype)
        per_example = 0.5 * (output - onehot).square().sum(dim=1)
    elif kind == "squared_margin":  # (1 − y f)², y = ±1 from class indices {0, 1}
        per_example = (1.0 - (2.0 * target.to(output.dtype) - 1.0) * output).square()
    else:
        raise ValueError(f"unknown loss {kind!r}")
    return per_example.mean() if reduction == "mean" else per_example.sum()


def correct_count(kind: str, output: torch.Tensor, target: torch.Tensor) -> int:
    """How many outputs predict their target class under the loss ``kind``: the sign of a scalar
    output for ``squared_margin``, the largest logit otherwise."""
    predicted = (output > 0).long() if kind == "squared_margin" else output.argmax(dim=1)
    return int((predicted == target).sum().item())


__all__ = ["correct_count", "loss_value"]
