"""A linear model f(x) = Wx + b: logistic (or softmax) regression with a cross-entropy loss.

Kept as its own architecture, not an MLP without hidden layers (MLPSettings needs at least one),
so that influence studies can save and rebuild the convex model whose influence functions are
exact up to second order (Koh & Liang 2017).
"""

from __future__ import annotations

import torch
from pydantic import Field
from torch import nn

from genlab.settings import FrozenModel


class LinearSettings(FrozenModel):
    """One affine layer from the inputs to the outputs."""

    bias: bool = Field(True, description="Learn an offset b.")


class Linear(nn.Module):
    def __init__(self, settings: LinearSettings, input_dim: int, output_dim: int) -> None:
        super().__init__()
        # inside a Sequential, like the MLP, so parameter names read net.0.weight, net.0.bias
        self.net = nn.Sequential(nn.Linear(input_dim, output_dim, bias=settings.bias))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, d) -> (B, C)
        return self.net(x)
