from __future__ import annotations

from pathlib import Path

import pytest
import torch

from genlab.io import ArtifactError
from genlab.models.registry import (
    build_model,
    count_parameters,
    load_model,
    model_spec,
    save_weights,
)
from genlab.settings import MLPSettings


def test_mlp_shapes_and_parameter_count() -> None:
    model = build_model("mlp", MLPSettings(hidden=(512, 512)), 32, 10)
    assert count_parameters(model) == 32 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10
    assert model(torch.zeros(7, 32)).shape == (7, 10)


def test_save_and_reload_is_exact(tmp_path: Path, tiny_mlp: MLPSettings) -> None:
    torch.manual_seed(0)
    model = build_model("mlp", tiny_mlp, 5, 3)
    save_weights(model, tmp_path / "model.safetensors")
    back = load_model(model_spec("mlp", tiny_mlp, 5, 3), tmp_path / "model.safetensors")
    x = torch.randn(11, 5)
    torch.testing.assert_close(back(x), model(x), rtol=0, atol=0)


def test_float64_weights_reload_in_float64(tmp_path: Path, tiny_mlp: MLPSettings) -> None:
    """A model trained in float64 (the binary influence models) comes back in float64: loading
    into the float32 module build_model makes would round every weight."""
    torch.manual_seed(0)
    model = build_model("mlp", tiny_mlp, 5, 3).double()
    with torch.no_grad():
        model.net[0].weight[0, 0] = 1 + 2**-40  # not representable in float32
    save_weights(model, tmp_path / "model.safetensors")
    back = load_model(model_spec("mlp", tiny_mlp, 5, 3), tmp_path / "model.safetensors")
    assert all(p.dtype == torch.float64 for p in back.parameters())
    assert back.net[0].weight[0, 0].item() == 1 + 2**-40
    x = torch.randn(11, 5, dtype=torch.float64)
    torch.testing.assert_close(back(x), model(x), rtol=0, atol=0)


def test_truncated_checkpoint_is_named(tmp_path: Path, tiny_mlp: MLPSettings) -> None:
    path = tmp_path / "model.safetensors"
    save_weights(build_model("mlp", tiny_mlp, 5, 3), path)
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(ArtifactError, match="model.safetensors"):
        load_model(model_spec("mlp", tiny_mlp, 5, 3), path)


def test_unknown_model_kind() -> None:
    with pytest.raises(ValueError, match="unknown model"):
        build_model("resnet", MLPSettings(hidden=(4,)), 2, 2)
