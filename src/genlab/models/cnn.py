"""A small convolutional network: [Conv -> activation -> pool] per block, then an MLP head.

Datasets store every example as one flat float32 row, so the network takes ``(B, C*H*W)`` and
views it as ``(B, C, H, W)``: the flat row must be the image in channel-major (C, H, W) order,
torch's own layout (``image.reshape(-1)`` of a ``(C, H, W)`` tensor). A dataset holding
channels-last (H, W, C) arrays must transpose before flattening.

There is no BatchNorm or Dropout: the curvature analyses need a model whose eval-mode output is a
fixed function of its parameters alone, with no running statistics and no randomness.
"""

from __future__ import annotations

from typing import Annotated, Literal

import torch
from pydantic import Field, field_validator
from torch import nn

from genlab.models.mlp import ACTIVATIONS
from genlab.settings import FrozenModel

Dim = Annotated[int, Field(ge=1, le=65_536)]


class CNNSettings(FrozenModel):
    """A stack of same-padded convolution blocks and a fully connected head."""

    image_shape: tuple[Dim, Dim, Dim] = Field(
        description="(channels, height, width) of one image; their product is the input width.")
    channels: tuple[Annotated[int, Field(ge=1, le=4096)], ...] = Field(
        (16, 32), min_length=1, max_length=16, description="Output channels of each conv block.")
    kernel_size: int = Field(3, ge=1, le=31, description="Square kernel side, odd (same padding).")
    activation: Literal["relu", "tanh", "gelu"] = "relu"
    pooling: Literal["max", "avg", "none"] = Field(
        "max", description="2x2 pooling, stride 2, after each block; none keeps full resolution.")
    head_width: int = Field(0, ge=0, le=65_536, description="Hidden width of the head; 0 = a "
                            "single Linear from the flattened features to the logits.")
    bias: bool = True

    @field_validator("kernel_size")
    @classmethod
    def _odd_kernel(cls, value: int) -> int:
        # padding = k // 2 keeps H and W unchanged only for odd k
        if value % 2 == 0:
            raise ValueError(f"kernel_size must be odd, got {value}")
        return value


POOLS: dict[str, type[nn.Module]] = {"max": nn.MaxPool2d, "avg": nn.AvgPool2d}


class ConvBlock(nn.Module):
    """Conv (same padding) -> activation -> optional 2x2 pooling."""

    def __init__(self, settings: CNNSettings, in_channels: int, out_channels: int) -> None:
        super().__init__()
        k = settings.kernel_size
        self.conv = nn.Conv2d(in_channels, out_channels, k, padding=k // 2, bias=settings.bias)
        self.act = ACTIVATIONS[settings.activation]()
        pool = POOLS.get(settings.pooling)
        self.pool = pool(kernel_size=2, stride=2) if pool is not None else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C_in, H, W) -> (B, C_out, H', W')
        return self.pool(self.act(self.conv(x)))


class CNN(nn.Module):
    """Image classifier on flat inputs.

    Args:
        settings: The architecture; ``settings.image_shape`` says how to unflatten a row.
        input_dim: Width of a flat input row; must equal ``C * H * W``.
        output_dim: Number of logits (classes).

    Raises:
        ValueError: If ``input_dim`` does not match ``image_shape``, or pooling would shrink the
            image below one pixel.
    """

    def __init__(self, settings: CNNSettings, input_dim: int, output_dim: int) -> None:
        super().__init__()
        c, h, w = settings.image_shape
        if c * h * w != input_dim:
            raise ValueError(f"image_shape {settings.image_shape} holds {c * h * w} values per "
                             f"example but the input has {input_dim}")
        self.image_shape = (c, h, w)
        blocks: list[nn.Module] = []
        for c_in, c_out in zip((c, *settings.channels[:-1]), settings.channels, strict=True):
            blocks.append(ConvBlock(settings, c_in, c_out))
            if settings.pooling != "none":
                h, w = h // 2, w // 2  # floor, as MaxPool2d/AvgPool2d with stride 2
                if h == 0 or w == 0:
                    raise ValueError(f"{len(settings.channels)} pooled blocks shrink a "
                                     f"{settings.image_shape[1]}x{settings.image_shape[2]} image "
                                     "to nothing; use fewer blocks or pooling='none'")
        self.features = nn.Sequential(*blocks)
        flat = settings.channels[-1] * h * w
        width, bias = settings.head_width, settings.bias
        head: list[nn.Module] = [nn.Linear(flat, output_dim, bias=bias)]
        if width:  # flat -> width -> activation -> logits
            head = [nn.Linear(flat, width, bias=bias), ACTIVATIONS[settings.activation](),
                    nn.Linear(width, output_dim, bias=bias)]
        self.head = nn.Sequential(*head)  # (B, flat) -> (B, output_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C*H*W) -> (B, output_dim)
        # a copy-free view for the usual contiguous batch; reshape also takes strided slices
        x = x.reshape(x.shape[0], *self.image_shape)  # (B, C, H, W)
        x = self.features(x)  # (B, C_last, H', W')
        return self.head(x.flatten(1))  # (B, C_last*H'*W') -> (B, output_dim)
