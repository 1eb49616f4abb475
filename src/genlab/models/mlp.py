"""A fully connected network: Linear -> activation, repeated, then a Linear head."""

from __future__ import annotations

import torch
from torch import nn

from genlab.settings import MLPSettings

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
