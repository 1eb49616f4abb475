"""The two-layer patch network of Lu et al. 2024 ("benign oscillation").

    f(x) = F₊(x) − F₋(x),   F_j(x) = (1/m) Σ_{r=1..m} Σ_{p=1..P} ReLU(⟨w_{j,r}, x⁽ᵖ⁾⟩)²

a "CNN" whose filters w_{j,r} ∈ R^d are shared across the P patches x⁽ᵖ⁾ of an input, with the
second layer fixed to ±1/m (only the filters train). The squared ReLU makes the gradient vanish
at zero pre-activation and grow with alignment, which is what lets a large step size's
oscillation amplify the weak feature. Weights start at N(0, init_std²) (small initialisation, as
the theory assumes).
"""

from __future__ import annotations

import torch
from torch import nn

from genlab.settings import PatchNetSettings


class PatchNet(nn.Module):
    """Outputs the scalar margin f(x), shape (B,), for binary labels (output_dim must be 2)."""

    def __init__(self, settings: PatchNetSettings, input_dim: int, output_dim: int) -> None:
        super().__init__()
        if output_dim != 2:
            raise ValueError(f"PatchNet is a binary classifier (f = F+ - F-); got {output_dim} "
                             "classes")
        if input_dim % settings.n_patches:
            raise ValueError(f"input_dim {input_dim} is not {settings.n_patches} patches of "
                             "equal size")
        self.n_patches, self.width = settings.n_patches, settings.width
        patch_dim = input_dim // settings.n_patches
        # (2, m, d): filters of F₊ then F₋
        self.filters = nn.Parameter(settings.init_std * torch.randn(2, settings.width, patch_dim))

    def branch_outputs(self, x: torch.Tensor) -> torch.Tensor:
        """(F₊, F₋) per input, shape (B, 2)."""
        patches = x.reshape(len(x), self.n_patches, -1)  # (B, P, d)
        pre = torch.einsum("bpd,jrd->bjrp", patches, self.filters)  # (B, 2, m, P)
        return torch.relu(pre).square().sum(dim=(2, 3)) / self.width

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, P*d) -> (B,)
        out = self.branch_outputs(x)
        return out[:, 0] - out[:, 1]
