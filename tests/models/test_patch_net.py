from __future__ import annotations

import pytest
import torch

from genlab.models.patch_net import PatchNet
from genlab.models.registry import build_model, load_model, model_spec, save_weights
from genlab.settings import PatchNetSettings


def reference(filters: torch.Tensor, x: torch.Tensor, n_patches: int) -> torch.Tensor:
    """The formula with explicit loops, in float64."""
    two, m, d = filters.shape
    out = torch.zeros(len(x), dtype=torch.float64)
    for b in range(len(x)):
        for j, sign in ((0, 1.0), (1, -1.0)):
            for r in range(m):
                for p in range(n_patches):
                    z = torch.dot(filters[j, r].double(), x[b, p * d:(p + 1) * d].double())
                    out[b] += sign * torch.relu(z) ** 2 / m
    return out


def test_matches_the_formula() -> None:
    torch.manual_seed(0)
    net = PatchNet(PatchNetSettings(width=4, init_std=0.5), input_dim=3 * 5, output_dim=2)
    x = torch.randn(6, 15)
    torch.testing.assert_close(net(x).double(), reference(net.filters.detach(), x, 3),
                               rtol=1e-5, atol=1e-6)


def test_registered_and_reloads_exactly(tmp_path) -> None:
    settings = PatchNetSettings(width=3)
    torch.manual_seed(1)
    net = build_model("patch_net", settings, 12, 2)
    save_weights(net, tmp_path / "w.safetensors")
    back = load_model(model_spec("patch_net", settings, 12, 2), tmp_path / "w.safetensors")
    x = torch.randn(4, 12)
    assert torch.equal(back(x), net(x))


def test_init_scale() -> None:
    torch.manual_seed(2)
    net = PatchNet(PatchNetSettings(width=64, init_std=0.01), input_dim=3 * 64, output_dim=2)
    # 8192 N(0, 0.01^2) draws: the sample std is within 3% (sd of the estimate ~ 0.8%)
    assert net.filters.std().item() == pytest.approx(0.01, rel=0.03)


def test_rejects_non_binary_or_ragged_inputs() -> None:
    with pytest.raises(ValueError, match="binary"):
        PatchNet(PatchNetSettings(), input_dim=9, output_dim=3)
    with pytest.raises(ValueError, match="patches"):
        PatchNet(PatchNetSettings(), input_dim=10, output_dim=2)
