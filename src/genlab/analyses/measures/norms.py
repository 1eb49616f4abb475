"""Norm, margin and path-norm quantities of a trained network (Jiang et al., ICLR 2020, App. C).

Notation of Jiang, Neyshabur, Mobahi, Krishnan & Bengio, "Fantastic generalization measures and
where to find them" (ICLR 2020): the network has d layers with weight matrices W₁ … W_d (here:
the ``weight`` of every ``nn.Linear`` and ``nn.Conv*`` module in ``model.modules()`` order, a
convolution kernel reshaped to (out, in·k…), the approximation of Yoshida & Miyato 2017 that
Jiang et al. and Dziugaite et al. 2020 also use for its spectral norm; biases are not layers),
W_i⁰ the same matrices at initialisation, and γ the margin. Every quantity is computed in
float64 on detached copies; the caller's model is left untouched.

- ``‖W‖_F`` and ``‖W‖₂`` (the largest singular value, ``torch.linalg.matrix_norm(ord=2)``).
- The output margin of an example (x, y) is f(x)[y] − max_{j≠y} f(x)[j]; γ is its
  ``quantile`` (0.1: the 10th percentile) over the training set, Jiang et al.'s robust surrogate
  for the minimum margin, with linear interpolation between order statistics (``torch.quantile``).
- The path norm (Neyshabur, Tomioka & Srebro 2015, Jiang et al. eq. 44) is the sum over every
  input-to-output path of the product of its squared weights, Σ_paths Π w², which for a
  ReLU network is f_{w²}(𝟏) summed over outputs (every parameter squared, all-ones input). It
  depends only on the weights, not on the activation, so here it is computed by that linear
  recursion, v₀ = 𝟏, v_l = (W_l ∘ W_l) v_{l−1} + b_l ∘ b_l, Σ v_d: biases are paths that start
  at a bias unit, as they are in f_{w²}(𝟏). For other networks of linear layers and
  activations (a CNN) it is that network with squared parameters and no activations on 𝟏.
- Layer rotation (Carbonnelle & De Vleeschouwer, ICML 2019 workshop / arXiv 1806.01603):
  1 − cos(w_l, w_l⁰) per layer, w_l the flattened weights of layer l.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from genlab.analyses.curvature.hessian import as_dtype, curvature_model
from genlab.analyses.dimension.representations import ACTIVATION_TYPES

LAYER_TYPES = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)


def layer_weights(model: nn.Module) -> list[Tensor]:
    """W₁ … W_d: the weight of every Linear/Conv module, as a float64 (out, rest) matrix."""
    return [m.weight.detach().to(torch.float64).reshape(m.weight.shape[0], -1)
            for m in model.modules() if isinstance(m, LAYER_TYPES)]


@dataclass(frozen=True)
class LayerNorms:
    """Squared per-layer norms, each (d,) float64: the quantities every norm measure combines."""

    fro: Tensor  # ‖W_i‖_F²
    spec: Tensor  # ‖W_i‖₂²
    dist_fro: Tensor | None  # ‖W_i − W_i⁰‖_F² (None without the model at initialisation)
    dist_spec: Tensor | None  # ‖W_i − W_i⁰‖₂²

    @property
    def depth(self) -> int:
        return len(self.fro)


def layer_norms(model: nn.Module, init_model: nn.Module | None = None) -> LayerNorms:
    """Squared Frobenius and spectral norms of every layer, and of its distance from init.

    Raises:
        ValueError: For a model without Linear/Conv layers, or an init model whose layers do
            not have the same shapes.
    """
    weights = layer_weights(model)
    if not weights:
        raise ValueError(f"{type(model).__name__} has no Linear or Conv layers")
    fro = torch.stack([torch.linalg.matrix_norm(w).square() for w in weights])
    spec = torch.stack([torch.linalg.matrix_norm(w, ord=2).square() for w in weights])
    if init_model is None:
        return LayerNorms(fro, spec, None, None)
    init = layer_weights(init_model)
    if [w.shape for w in init] != [w.shape for w in weights]:
        raise ValueError("the model and its initialisation have different layers")
    diffs = [w - w0 for w, w0 in zip(weights, init, strict=True)]
    return LayerNorms(fro, spec,
                      torch.stack([torch.linalg.matrix_norm(d).square() for d in diffs]),
                      torch.stack([torch.linalg.matrix_norm(d, ord=2).square() for d in diffs]))


def parameter_vector(model: nn.Module) -> Tensor:
    """Every trainable parameter, flattened in ``model.parameters()`` order, float64."""
    return torch.cat([p.detach().to(torch.float64).reshape(-1)
                      for p in model.parameters() if p.requires_grad])


@torch.no_grad()
def margins(model: nn.Module, X: Tensor, y: Tensor) -> Tensor:
    """(n,) f(x)[y] − max_{j≠y} f(x)[j], in float64 and eval mode (train flags restored)."""
    if y.is_floating_point():
        raise ValueError("margins need class labels (an integer y)")
    with curvature_model(model, torch.float64) as net:
        logits = net(as_dtype(X, torch.float64))  # (n, C)
    if logits.ndim != 2 or logits.shape[1] < 2:
        raise ValueError(f"margins need (n, C ≥ 2) logits, got {tuple(logits.shape)}")
    rows = torch.arange(len(y))
    correct = logits[rows, y]
    others = logits.clone()
    others[rows, y] = -torch.inf
    return correct - others.max(dim=1).values


def margin_quantile(model: nn.Module, X: Tensor, y: Tensor, quantile: float = 0.1) -> float:
    """γ: the ``quantile`` of the training margins (Jiang et al.: the 10th percentile)."""
    return float(torch.quantile(margins(model, X, y), quantile))


def linear_chain(model: nn.Module) -> list[nn.Linear] | None:
    """The Linear layers of a sequential fully connected model (an ``nn.Linear``, an
    ``nn.Sequential``, or a model whose ``net`` is one, as :class:`genlab.models.mlp.MLP`),
    input to output; None for any other architecture."""
    if isinstance(model, nn.Linear):
        return [model]
    net = getattr(model, "net", model)
    if not isinstance(net, nn.Sequential) or not all(
            isinstance(m, (nn.Linear, *ACTIVATION_TYPES, nn.Identity)) for m in net):
        return None
    layers = [m for m in net if isinstance(m, nn.Linear)]
    return layers or None


PATH_NORM_MODULES = (*LAYER_TYPES, *ACTIVATION_TYPES, nn.Identity, nn.Flatten, nn.Sequential)
"""Modules a network may be built from for :func:`path_norm` with an input shape: linear maps
(whose squared-weight versions carry the path sums) and elementwise activations."""


def path_norm(model: nn.Module, input_shape: tuple[int, ...] | None = None) -> float:
    """Σ over input-to-output paths of Π w² (module docstring), by the recursion
    v ← (W∘W) v + b∘b from v = 𝟏.

    A sequential fully connected model needs no ``input_shape``. Any other network built from
    Linear/Conv layers and elementwise activations (a 1-D CNN) needs the shape of one input: the
    recursion is then the network itself with every parameter squared and every activation
    removed, applied to an all-ones input (a convolution's zero padding starts no path), whose
    outputs are summed, f_{w²}(𝟏) as Jiang et al. compute it.

    Raises:
        ValueError: For a model that is neither, or a network without ``input_shape``.
    """
    chain = linear_chain(model)
    if chain is None:
        return _path_norm_of_network(model, input_shape)
    v = torch.ones(chain[0].in_features, dtype=torch.float64)
    for layer in chain:
        v = layer.weight.detach().to(torch.float64).square() @ v
        if layer.bias is not None:
            v = v + layer.bias.detach().to(torch.float64).square()
    return float(v.sum())


def _path_norm_of_network(model: nn.Module, input_shape: tuple[int, ...] | None) -> float:
    """f_{w²}(𝟏) summed over outputs for a network of linear layers and activations."""
    import copy

    others = sorted({type(m).__name__ for m in model.modules()
                     if not isinstance(m, PATH_NORM_MODULES) and next(m.children(), None) is None})
    if others or input_shape is None:
        raise ValueError(f"the path norm is implemented for networks of Linear/Conv layers and "
                         f"activations given an input shape, not {type(model).__name__}"
                         + (f" (it has {', '.join(others)})" if others else " without one"))
    squared = copy.deepcopy(model).to(torch.float64)
    for name, module in list(squared.named_modules()):
        if isinstance(module, ACTIVATION_TYPES):
            parent = squared.get_submodule(name.rpartition(".")[0]) if "." in name else squared
            setattr(parent, name.rpartition(".")[2], nn.Identity())
    with torch.no_grad():
        for p in squared.parameters():
            p.copy_(p.square())
        return float(squared.eval()(torch.ones(1, *input_shape, dtype=torch.float64)).sum())


def layer_rotations(model: nn.Module, init_model: nn.Module) -> Tensor:
    """(d,) 1 − cos(w_l, w_l⁰) of every layer's flattened weights (Carbonnelle & De
    Vleeschouwer 2019): 0 for a layer that only grew or shrank, 1 for one turned orthogonal."""
    weights, init = layer_weights(model), layer_weights(init_model)
    if [w.shape for w in init] != [w.shape for w in weights]:
        raise ValueError("the model and its initialisation have different layers")
    return torch.stack([1.0 - torch.nn.functional.cosine_similarity(w.reshape(-1), w0.reshape(-1),
                                                                    dim=0, eps=0.0)
                        for w, w0 in zip(weights, init, strict=True)])


__all__ = ["LAYER_TYPES", "LayerNorms", "layer_norms", "layer_rotations", "layer_weights",
           "linear_chain", "margin_quantile", "margins", "parameter_vector", "path_norm"]
