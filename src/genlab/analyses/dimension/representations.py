"""Intrinsic dimension of a network's representations, layer by layer (Ansuini et al. 2019).

For a fully connected network (``model.net`` an ``nn.Sequential`` of Linear/activation layers,
as :class:`genlab.models.mlp.MLP` builds it) or a 1-D CNN (:class:`genlab.models.conv1d.
Conv1DNet`: Conv1d/activation layers, then a Linear head) the representations are the input
(layer 0, whose ID is the data's, d_data), the output of every activation (the hidden layers;
a conv layer's channels x positions as one vector) and the logits.
Their ID is estimated by TwoNN (:class:`genlab.analyses.dimension.estimators.TwoNN`) or MLE on the
same examples for every layer. Ansuini et al. report, for networks that generalise, an ID far
below the layer width that rises then falls with depth, a last hidden layer whose ID tracks test
accuracy, and no such profile for untrained or random-label networks; the analysis therefore
also measures the same architecture at its initialisation.

Duplicate representations are common (ReLU layers map many inputs to the same point, a
saturated tanh layer rounds them together): TwoNN and MLE have no ratio at distance 0, so
duplicates are dropped first (``duplicates="drop"``) and the count kept is recorded per layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from genlab.analyses.dimension.estimators import MLE, TwoNN
from genlab.analyses.settings import RepresentationSettings
from genlab.models.conv1d import Conv1DNet

ACTIVATION_TYPES = (nn.ReLU, nn.Tanh, nn.GELU)


@dataclass(frozen=True)
class LayerID:
    index: int  # 0 = the input; then each hidden layer; last = the output
    name: str  # "input", "hidden 1", ..., "output"
    width: int
    dimension: float
    n_distinct: int  # distinct representations the estimate used (duplicates dropped)


def _layers(model: nn.Module) -> tuple[nn.Sequential, Callable[[Tensor], Tensor],
                                        Callable[[Tensor], Tensor]]:
    """The trunk of a model whose hidden layers this module reads, with what its forward does
    before the trunk and after it: an MLP (``model.net``: Linear and activation layers) or a
    :class:`genlab.models.conv1d.Conv1DNet` (``model.features``: Conv1d and activation layers
    on the series as one channel, then ``model.head`` on the flattened features)."""
    if isinstance(model, Conv1DNet) and all(
            isinstance(m, (nn.Conv1d, *ACTIVATION_TYPES)) for m in model.features):
        return (model.features, lambda x: x.reshape(len(x), 1, -1),
                lambda h: model.head(h.flatten(1)))
    net = getattr(model, "net", None)
    if isinstance(net, nn.Sequential) and all(
            isinstance(m, (nn.Linear, *ACTIVATION_TYPES)) for m in net):
        return net, lambda x: x, lambda h: h
    raise ValueError("layer-wise ID needs a sequential fully connected model (an MLP) or a "
                     f"1-D CNN (Conv1DNet), got {type(model).__name__}")


@torch.no_grad()
def layer_representations(model: nn.Module, X: Tensor) -> list[tuple[str, Tensor]]:
    """(name, (n, width)) of the input, every hidden layer (each activation's output, flattened:
    a conv layer's channels x positions) and the output, in eval mode; the model's train/eval
    flags are restored. MLPs and 1-D CNNs qualify (:func:`_layers`)."""
    trunk, before, after = _layers(model)
    flags = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        x = X.to(next(model.parameters()).dtype)
        layers = [("input", x.reshape(len(x), -1))]
        h = before(x)
        for module in trunk:
            h = module(h)
            if isinstance(module, ACTIVATION_TYPES):
                layers.append((f"hidden {len(layers)}", h.flatten(1)))
        layers.append(("output", after(h)))
        return layers
    finally:
        for module, training in flags:
            module.training = training


def _estimator(settings: RepresentationSettings) -> TwoNN | MLE:
    if settings.estimator == "twonn":
        return TwoNN(settings.discard_fraction, duplicates="drop")
    return MLE(settings.k, duplicates="drop")


def layer_ids(model: nn.Module, X: Tensor, settings: RepresentationSettings) -> list[LayerID]:
    """The ID of every representation of ``X`` (all rows: subsample before calling)."""
    result = []
    for index, (name, h) in enumerate(layer_representations(model, X)):
        estimator = _estimator(settings).fit(h)
        result.append(LayerID(index=index, name=name, width=h.shape[1],
                              dimension=float(estimator.dimension_),
                              n_distinct=len(estimator.indices_)))
    return result


def twonn_profile(model: nn.Module, X: Tensor, discard: float) -> list[dict]:
    """TwoNN (``discard`` of the largest ratios dropped, duplicates dropped) of every
    representation of ``X``: one row per layer, from the input to the output, with its depth,
    name, width, ``id`` and ``n_distinct`` (the distinct points the estimate used)."""
    settings = RepresentationSettings(estimator="twonn", discard_fraction=discard)
    return [{"depth": layer.index, "layer": layer.name, "width": layer.width,
             "id": layer.dimension, "n_distinct": layer.n_distinct}
            for layer in layer_ids(model, X, settings)]


def layer_id_record(model: nn.Module, objective, settings: RepresentationSettings,
                    untrained) -> tuple[dict, dict]:
    """The ``intrinsic_dim`` entry of the analysis registry: every layer's ID of one run, trained
    and at its seeded initialisation (``untrained()``), and, for class labels, the label
    sharpness K_F of the labels it was trained on; its JSON record and its ``layers`` table."""
    import pyarrow as pa

    from genlab.analyses.dimension.estimators import label_sharpness
    from genlab.seeding import subsample, torch_generator

    X, y = subsample(objective.X, objective.y, settings.max_examples, settings.seed)
    trained, init = layer_ids(model, X, settings), layer_ids(untrained(), X, settings)
    record: dict = {
        "status": "done", "estimator": settings.estimator, "n_examples": len(X),
        "d_data": trained[0].dimension, "input_width": trained[0].width,
        "last_hidden_trained": trained[-2].dimension, "last_hidden_init": init[-2].dimension,
        "layer_ids_trained": [layer.dimension for layer in trained],
        "layer_ids_init": [layer.dimension for layer in init],
    }
    if not objective.y.is_floating_point():  # classification: K_F of the labels trained on
        sharp = label_sharpness(objective.X, objective.y, settings.label_sharpness_samples,
                                torch_generator(settings.seed, "intrinsic_dim", "label-sharpness",
                                                device=objective.X.device.type))
        record |= {"label_sharpness": sharp.value, "label_sharpness_samples": sharp.num_samples,
                   "label_sharpness_input_rms": sharp.input_rms}
    table = pa.table({
        "layer": [layer.index for layer in trained], "name": [layer.name for layer in trained],
        "width": [layer.width for layer in trained],
        "id_trained": [layer.dimension for layer in trained],
        "id_init": [layer.dimension for layer in init],
        "distinct_trained": [layer.n_distinct for layer in trained],
        "distinct_init": [layer.n_distinct for layer in init]})
    return record, {"layers": table}
