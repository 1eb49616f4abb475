from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from torch.func import functional_call, stack_module_state, vmap

from genlab.models.cnn import CNN, CNNSettings
from genlab.models.registry import (
    build_model,
    count_parameters,
    load_model,
    model_spec,
    save_weights,
)

SHAPE = (2, 8, 8)  # (C, H, W)
D = 2 * 8 * 8


@pytest.fixture
def tiny_cnn() -> CNNSettings:
    return CNNSettings(image_shape=SHAPE, channels=(3, 4), kernel_size=3, activation="tanh",
                       pooling="max", head_width=6)


@pytest.mark.parametrize("pooling", ["max", "avg", "none"])
@pytest.mark.parametrize("head_width", [0, 6])
def test_output_shape(pooling: str, head_width: int) -> None:
    settings = CNNSettings(image_shape=SHAPE, channels=(3, 4), pooling=pooling,
                           head_width=head_width)
    model = build_model("cnn", settings, D, 5)
    assert model(torch.randn(7, D)).shape == (7, 5)


def test_parameter_count(tiny_cnn: CNNSettings) -> None:
    model = build_model("cnn", tiny_cnn, D, 5)
    conv = (2 * 3 * 3 * 3 + 3) + (3 * 4 * 3 * 3 + 4)
    flat = 4 * 2 * 2  # two 2x2 poolings: 8x8 -> 2x2
    assert count_parameters(model) == conv + (flat * 6 + 6) + (6 * 5 + 5)

    plain = CNNSettings(image_shape=SHAPE, channels=(3,), kernel_size=5, pooling="none",
                        bias=False)
    assert count_parameters(CNN(plain, D, 5)) == 2 * 3 * 5 * 5 + (3 * 8 * 8) * 5


def test_flat_row_is_channel_major_image() -> None:
    # a row is a (C, H, W) image flattened in torch's order; the first conv must see that image
    settings = CNNSettings(image_shape=(2, 3, 4), channels=(1,), pooling="none")
    model = CNN(settings, 24, 1)
    seen: list[torch.Tensor] = []
    model.features[0].conv.register_forward_pre_hook(lambda _, args: seen.append(args[0]))
    image = torch.arange(2 * 24.0).view(2, 2, 3, 4)  # (B, C, H, W)
    model(image.reshape(2, -1))
    torch.testing.assert_close(seen[0], image, rtol=0, atol=0)


def test_save_and_reload_is_exact(tmp_path: Path, tiny_cnn: CNNSettings) -> None:
    torch.manual_seed(0)
    model = build_model("cnn", tiny_cnn, D, 5)
    save_weights(model, tmp_path / "model.safetensors")
    back = load_model(model_spec("cnn", tiny_cnn, D, 5), tmp_path / "model.safetensors")
    x = torch.randn(11, D)
    torch.testing.assert_close(back(x), model.eval()(x), rtol=0, atol=0)


def test_eval_is_deterministic(tiny_cnn: CNNSettings) -> None:
    model = build_model("cnn", tiny_cnn, D, 5).eval()
    x = torch.randn(9, D)
    torch.testing.assert_close(model(x), model(x), rtol=0, atol=0)


def test_every_parameter_gets_a_gradient(tiny_cnn: CNNSettings) -> None:
    torch.manual_seed(0)
    model = build_model("cnn", tiny_cnn, D, 5)
    model(torch.randn(8, D)).square().sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert p.grad.abs().sum() > 0, name


def test_wrong_input_dim_is_named(tiny_cnn: CNNSettings) -> None:
    with pytest.raises(ValueError, match=r"image_shape \(2, 8, 8\) holds 128 .* has 100"):
        build_model("cnn", tiny_cnn, 100, 5)


def test_too_many_pooled_blocks() -> None:
    settings = CNNSettings(image_shape=(1, 4, 4), channels=(2, 2, 2))
    with pytest.raises(ValueError, match="shrink"):
        CNN(settings, 16, 3)


def test_even_kernel_rejected() -> None:
    with pytest.raises(ValidationError, match="odd"):
        CNNSettings(image_shape=SHAPE, kernel_size=4)


@pytest.mark.parametrize("x_dim", [None, 0])  # one batch for all models / a batch per model
def test_vmap_over_stacked_models_matches_each(tiny_cnn: CNNSettings, x_dim: int | None) -> None:
    torch.manual_seed(0)
    models = [build_model("cnn", tiny_cnn, D, 5).eval() for _ in range(4)]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def call(p: dict, b: dict, x: torch.Tensor) -> torch.Tensor:
        return functional_call(base, (p, b), (x,))

    x = torch.randn(4, 6, D) if x_dim == 0 else torch.randn(6, D)
    out = vmap(call, in_dims=(0, 0, x_dim))(params, buffers, x)  # (4, B, 5)
    expected = torch.stack([m(x[i] if x_dim == 0 else x) for i, m in enumerate(models)])
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)
