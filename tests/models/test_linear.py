from __future__ import annotations

from pathlib import Path

import torch

from genlab.models.linear import LinearSettings
from genlab.models.registry import (
    build_model,
    count_parameters,
    load_model,
    model_spec,
    save_weights,
)


def test_linear_model_shapes_and_round_trip(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = build_model("linear", LinearSettings(), 7, 1)
    assert count_parameters(model) == 8 and model(torch.zeros(3, 7)).shape == (3, 1)
    assert count_parameters(build_model("linear", LinearSettings(bias=False), 7, 3)) == 21
    save_weights(model, tmp_path / "model.safetensors")
    back = load_model(model_spec("linear", LinearSettings(), 7, 1), tmp_path / "model.safetensors")
    x = torch.randn(5, 7)
    torch.testing.assert_close(back(x), model(x), rtol=0, atol=0)
