"""Fully connected networks: the plain MLP (Linear -> activation, repeated, then a Linear head)
and the residual MLP of MNIST-1D's baselines."""

from __future__ import annotations

import torch
from torch import nn

from genlab.settings import MLPSettings, ResidualMLPSettings

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh, "gelu": nn.GELU}


class MLP(nn.Module):
    def __init__(self, settings: MLPSettings, input_dim: int, output_dim: int) -> None:
        super().__init__()
        widths = [input_dim, *settings.hidden]
        layers: list[nn.Module] = []
        for fan_in, fan_out in zip(widths[:-1], widths[1:], strict=True):
            layers += [nn.Linear(fan_in, fan_out, bias=settings.bias),
                       ACTIVATIONS[settings.activation]()]
        layers.append(nn.Linear(widths[-1], output_dim, bias=settings.bias))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, d) -> (B, C)
        return self.net(x)


class ResidualMLP(nn.Module):
    """h = act(W_0 x + b_0); ``blocks`` times h = h + act(W_k h + b_k); logits = W h + b.

    No ``net`` Sequential: its forward is not a chain, so the layer-wise analyses that walk an
    MLP's ``net`` refuse it rather than read it wrongly."""

    def __init__(self, settings: ResidualMLPSettings, input_dim: int, output_dim: int) -> None:
        super().__init__()
        self.first = nn.Linear(input_dim, settings.width)
        self.blocks = nn.ModuleList(nn.Linear(settings.width, settings.width)
                                    for _ in range(settings.blocks))
        self.head = nn.Linear(settings.width, output_dim)
        self.act = ACTIVATIONS[settings.activation]()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, d) -> (B, C)
        h = self.act(self.first(x))
        for block in self.blocks:
            h = h + self.act(block(h))
        return self.head(h)
