from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from torch.func import functional_call, stack_module_state, vmap

from genlab.models.registry import (
    build_model,
    count_parameters,
    load_model,
    model_spec,
    save_weights,
)
from genlab.models.transformer import Transformer, TransformerSettings

V, T, K = 7, 4, 5  # vocab, sequence length (input_dim), classes (output_dim)


@pytest.fixture
def tiny_tf() -> TransformerSettings:
    return TransformerSettings(vocab_size=V, max_len=T, d_model=8, n_heads=2, n_layers=2,
                               d_mlp=16, activation="gelu")


def tokens(n: int, seed: int = 0) -> torch.Tensor:
    """Token ids as the datasets store them: float32, shape (n, T)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (n, T), generator=g).float()


def test_output_shapes(tiny_tf: TransformerSettings) -> None:
    model = build_model("transformer", tiny_tf, T, K)
    assert model(tokens(7)).shape == (7, K)
    assert model.all_logits(tokens(7)).shape == (7, T, K)
    assert model(tokens(7)[:, :2]).shape == (7, K)  # shorter sequences are fine
    assert model(tokens(7).long()).shape == (7, K)  # so are integer ids


def test_last_position_logits_are_forward(tiny_tf: TransformerSettings) -> None:
    model = build_model("transformer", tiny_tf, T, K).eval()
    x = tokens(5)
    torch.testing.assert_close(model(x), model.all_logits(x)[:, -1])


def test_parameter_count(tiny_tf: TransformerSettings) -> None:
    d, m, L, n = 8, 16, T, 2
    block = 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d + (d * m + m) + (m * d + d)
    expected = V * d + L * d + n * block + 2 * d + (d * K + K)
    assert count_parameters(build_model("transformer", tiny_tf, T, K)) == expected

    bare = tiny_tf.model_copy(update={"layer_norm": False, "bias": False, "max_len": 9})
    block = d * 3 * d + d * d + d * m + m * d
    assert count_parameters(Transformer(bare, T, K)) == V * d + 9 * d + n * block + d * K


def test_save_and_reload_is_exact(tmp_path: Path, tiny_tf: TransformerSettings) -> None:
    torch.manual_seed(0)
    model = build_model("transformer", tiny_tf, T, K)
    save_weights(model, tmp_path / "model.safetensors")
    back = load_model(model_spec("transformer", tiny_tf, T, K), tmp_path / "model.safetensors")
    x = tokens(11)
    torch.testing.assert_close(back(x), model.eval()(x), rtol=0, atol=0)


def test_eval_is_deterministic(tiny_tf: TransformerSettings) -> None:
    model = build_model("transformer", tiny_tf, T, K).eval()
    x = tokens(9)
    torch.testing.assert_close(model.all_logits(x), model.all_logits(x), rtol=0, atol=0)


@pytest.mark.parametrize("t", range(T))
def test_causal(tiny_tf: TransformerSettings, t: int) -> None:
    torch.manual_seed(0)
    model = build_model("transformer", tiny_tf, T, K).eval()
    x = tokens(6)
    changed = x.clone()
    changed[:, t] = (changed[:, t] + 1) % V
    before, after = model.all_logits(x), model.all_logits(changed)
    torch.testing.assert_close(after[:, :t], before[:, :t], rtol=0, atol=0)
    # and the change is seen from position t on, so the test above can fail
    assert not torch.allclose(after[:, t:], before[:, t:])


@pytest.mark.parametrize("layer_norm", [True, False])
def test_every_parameter_gets_a_gradient(tiny_tf: TransformerSettings, layer_norm: bool) -> None:
    torch.manual_seed(0)
    model = build_model("transformer", tiny_tf.model_copy(update={"layer_norm": layer_norm}),
                        T, K)
    model(tokens(8)).square().sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert p.grad.abs().sum() > 0, name


def test_sequence_longer_than_max_len(tiny_tf: TransformerSettings) -> None:
    with pytest.raises(ValueError, match=r"input_dim\) 5 must be in \[1, max_len=4\]"):
        build_model("transformer", tiny_tf, T + 1, K)
    model = build_model("transformer", tiny_tf, T, K)
    with pytest.raises(ValueError, match="exceeds max_len"):
        model(torch.zeros(2, T + 1))


@pytest.mark.parametrize(("bad", "message"), [(V, r"\[0, 7\), got \[0, 7\]"),
                                              (-1, r"\[0, 7\), got \[-1, 6\]"),
                                              (1.5, "whole numbers")])
def test_bad_token_ids(tiny_tf: TransformerSettings, bad: float, message: str) -> None:
    model = build_model("transformer", tiny_tf, T, K)
    x = torch.full((3, T), float(V - 1))
    x[0, 0] = 0
    x[1, 2] = bad
    with pytest.raises(ValueError, match=message):
        model(x)


def test_heads_must_divide_width() -> None:
    with pytest.raises(ValidationError, match="must divide"):
        TransformerSettings(vocab_size=V, max_len=T, d_model=10, n_heads=4)


# CPU SDPA has no vmap batching rule yet: torch loops over the models (correct, slower) and warns
@pytest.mark.filterwarnings("ignore:There is a performance drop:UserWarning")
@pytest.mark.parametrize("x_dim", [None, 0])  # one batch for all models / a batch per model
def test_vmap_over_stacked_models_matches_each(tiny_tf: TransformerSettings,
                                               x_dim: int | None) -> None:
    torch.manual_seed(0)
    models = [build_model("transformer", tiny_tf, T, K).eval() for _ in range(4)]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def call(p: dict, b: dict, x: torch.Tensor) -> torch.Tensor:
        return functional_call(base, (p, b), (x,))

    x = tokens(4 * 6).view(4, 6, T) if x_dim == 0 else tokens(6)
    out = vmap(call, in_dims=(0, 0, x_dim))(params, buffers, x)  # (4, B, K)
    expected = torch.stack([m(x[i] if x_dim == 0 else x) for i, m in enumerate(models)])
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)
