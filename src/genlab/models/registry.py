"""Build a model from its settings, save it, and load it back exactly.

A checkpoint is two files: ``model.safetensors`` (the state dict, no pickle) and ``model.json``
(which architecture, its settings and the in/out widths), enough to rebuild the module before
loading the tensors into it. A train stage's model.json also records the weights file's sha256
(:func:`genlab.io.write_safetensors`), and :func:`load_model` refuses weights that do not match it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel
from torch import nn

from genlab.io import read_safetensors, write_safetensors
from genlab.models.cnn import CNN, CNNSettings
from genlab.models.conv1d import Conv1DNet
from genlab.models.linear import Linear, LinearSettings
from genlab.models.mlp import MLP, ResidualMLP
from genlab.models.patch_net import PatchNet
from genlab.models.transformer import Transformer, TransformerSettings
from genlab.settings import Conv1DSettings, MLPSettings, PatchNetSettings, ResidualMLPSettings

Builder = Callable[[Any, int, int], nn.Module]

MODELS: dict[str, tuple[type[BaseModel], Builder]] = {
    "mlp": (MLPSettings, MLP),
    "cnn": (CNNSettings, CNN),
    "transformer": (TransformerSettings, Transformer),
    "patch_net": (PatchNetSettings, PatchNet),
    "linear": (LinearSettings, Linear),
    "residual_mlp": (ResidualMLPSettings, ResidualMLP),
    "conv1d": (Conv1DSettings, Conv1DNet),
}


def build_model(kind: str, settings: BaseModel, input_dim: int, output_dim: int) -> nn.Module:
    if kind not in MODELS:
        raise ValueError(f"unknown model {kind!r}; known: {sorted(MODELS)}")
    settings_cls, builder = MODELS[kind]
    if not isinstance(settings, settings_cls):
        raise TypeError(f"model {kind!r} takes {settings_cls.__name__}, got "
                        f"{type(settings).__name__}")
    return builder(settings, input_dim, output_dim)


def build_seeded_model(kind: str, settings: BaseModel, input_dim: int, output_dim: int,
                       seed: int, device: torch.device | str = "cpu") -> nn.Module:
    """Build with weights initialised from ``seed`` (its "init" stream), then move to ``device``.

    Initialised on the CPU inside a forked RNG: the same seed gives the same initial weights on
    any device, and the caller's global RNG state is untouched.
    """
    from genlab.seeding import derive_seed

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "init"))
        model = build_model(kind, settings, input_dim, output_dim)
    return model.to(device)


def glorot_uniform_(model: nn.Module, seed: int) -> nn.Module:
    """Re-initialise every linear and convolution kernel of ``model`` in place with Glorot &
    Bengio's uniform rule, U(±√(6 / (fan_in + fan_out))), and every bias to zero: Keras'
    defaults (``glorot_uniform``, ``zeros``), the initialisation of papers run in Keras, where
    PyTorch's default draws kernels with variance 1 / (3 fan_in). Seeded from ``seed``'s own
    "glorot-init" stream in a forked RNG, on the CPU: the same seed gives the same weights on any
    device; returns ``model``."""
    from genlab.seeding import derive_seed

    generator = torch.Generator().manual_seed(derive_seed(seed, "glorot-init") % 2**63)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear | nn.Conv1d | nn.Conv2d):
                weight = torch.empty(module.weight.shape, dtype=module.weight.dtype)
                nn.init.xavier_uniform_(weight, generator=generator)
                module.weight.copy_(weight)
                if module.bias is not None:
                    module.bias.zero_()
    return model


def model_spec(kind: str, settings: BaseModel, input_dim: int, output_dim: int) -> dict[str, Any]:
    """What model.json records to rebuild the module."""
    return {"kind": kind, "settings": settings.model_dump(mode="json"),
            "input_dim": input_dim, "output_dim": output_dim}


def state_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict as contiguous CPU tensors: safetensors stores raw bytes, so the saved file
    is the same whichever device trained the model."""
    return {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}


def save_weights(model: nn.Module, path: str | Path) -> None:
    write_safetensors(path, state_tensors(model))


def _spec_args(spec: dict[str, Any]) -> tuple[str, BaseModel, int, int]:
    """(kind, settings, input_dim, output_dim) of a model.json dict, as build_model takes them."""
    settings_cls, _ = MODELS[spec["kind"]]
    return (spec["kind"], settings_cls.model_validate(spec["settings"]), int(spec["input_dim"]),
            int(spec["output_dim"]))


def seeded_model_from_spec(spec: dict[str, Any], seed: int,
                           device: torch.device | str = "cpu") -> nn.Module:
    """The model of a model.json dict as :func:`build_seeded_model` initialised it from
    ``seed``: a run's untrained model, rebuilt without stored weights."""
    return build_seeded_model(*_spec_args(spec), seed, device)


def load_model(spec: dict[str, Any], weights: str | Path) -> nn.Module:
    """Rebuild from a model.json dict and load the safetensors weights (strict: every key),
    after checking them against the spec's ``weights_sha256`` where it records one. The module
    takes the weights' floating dtype (a model trained in float64 is not rounded to float32)."""
    model = build_model(*_spec_args(spec))
    state = read_safetensors(weights, spec.get("weights_sha256"))
    dtypes = {t.dtype for t in state.values() if t.is_floating_point()}
    if len(dtypes) == 1:
        model = model.to(dtypes.pop())
    model.load_state_dict(state, strict=True)
    return model.eval()


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


__all__ = ["MODELS", "build_model", "build_seeded_model", "count_parameters", "load_model",
           "model_spec", "save_weights", "seeded_model_from_spec", "state_tensors"]
