"""A 1-D convolutional network for series: MNIST-1D's ConvBase (Greydanus 2020) by default.

A dataset row is one series; the network reads it as one channel, ``(B, L) -> (B, 1, L)``, runs
each Conv1d -> activation layer (stride and zero padding the same for every layer), flattens the
last layer's ``channels * L'`` features and maps them to the logits with one Linear layer. With
the defaults (25 channels, kernels 5, 3, 3, stride 2, padding 1) a series of 40 points becomes
19, 10 and 5 positions: 125 features, 5,210 parameters, as in the paper's code.
"""

from __future__ import annotations

import torch
from torch import nn

from genlab.models.mlp import ACTIVATIONS
from genlab.settings import Conv1DSettings


def output_length(length: int, kernel: int, stride: int, padding: int) -> int:
    """Positions a Conv1d leaves of ``length`` (torch's formula, dilation 1)."""
    return (length + 2 * padding - kernel) // stride + 1


class Conv1DNet(nn.Module):
    """Series classifier.

    Raises:
        ValueError: the layers shrink a series of ``input_dim`` points to nothing.
    """

    def __init__(self, settings: Conv1DSettings, input_dim: int, output_dim: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        length, c_in = input_dim, 1
        for c_out, kernel in zip(settings.channels, settings.kernel_sizes, strict=True):
            length = output_length(length, kernel, settings.stride, settings.padding)
            if length < 1:
                raise ValueError(f"{len(settings.channels)} conv layers (kernels "
                                 f"{list(settings.kernel_sizes)}, stride {settings.stride}, "
                                 f"padding {settings.padding}) shrink a series of {input_dim} "
                                 "points to nothing")
            layers += [nn.Conv1d(c_in, c_out, kernel, stride=settings.stride,
                                 padding=settings.padding), ACTIVATIONS[settings.activation]()]
            c_in = c_out
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c_in * length, output_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, L) -> (B, output_dim)
        h = self.features(x.reshape(x.shape[0], 1, -1))  # (B, C_last, L')
        return self.head(h.flatten(1))
