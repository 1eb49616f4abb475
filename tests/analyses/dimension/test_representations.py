"""Layer-wise intrinsic dimension: the representations are the MLP's own, layer by layer."""

from __future__ import annotations

import math

import pytest
import torch

from genlab.analyses.dimension.estimators import TwoNN
from genlab.analyses.dimension.representations import layer_ids, layer_representations
from genlab.analyses.settings import RepresentationSettings
from genlab.models.cnn import CNN, CNNSettings
from genlab.models.conv1d import Conv1DNet
from genlab.models.mlp import MLP
from genlab.settings import Conv1DSettings, MLPSettings


def test_representations_are_the_forward_pass_split_at_each_activation() -> None:
    torch.manual_seed(0)
    model = MLP(MLPSettings(hidden=(7, 5), activation="tanh"), 4, 3).train()
    X = torch.randn(20, 4)
    layers = layer_representations(model, X)
    assert [name for name, _ in layers] == ["input", "hidden 1", "hidden 2", "output"]
    net = model.net
    h1 = torch.tanh(net[0](X))
    h2 = torch.tanh(net[2](h1))
    for (_, got), want in zip(layers, (X, h1, h2, net[4](h2)), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert model.training  # flags restored


def test_input_layer_id_is_the_data_id_and_a_bottleneck_caps_the_next() -> None:
    """Data on a 3-D linear subspace of R^20: layer 0 reads ~3; a width-2 linear-ish layer
    cannot hold more than 2 dimensions (the ±10% band of the estimator tests)."""
    generator = torch.Generator().manual_seed(1)
    basis = torch.linalg.qr(torch.randn(20, 3, generator=generator, dtype=torch.float64))[0]
    X = torch.randn(1500, 3, generator=generator, dtype=torch.float64) @ basis.T
    model = MLP(MLPSettings(hidden=(2,), activation="tanh"), 20, 4).double()
    ids = layer_ids(model, X, RepresentationSettings())
    assert ids[0].dimension == pytest.approx(TwoNN().fit(X).dimension_, rel=1e-12)
    assert 0.9 * 3 <= ids[0].dimension <= 1.1 * 3
    assert ids[1].width == 2 and ids[1].dimension <= 2 * 1.1
    assert all(math.isfinite(layer.dimension) for layer in ids)


def test_duplicate_representations_are_dropped_and_counted() -> None:
    """A ReLU layer with negative biases maps most inputs to the zero vector: those duplicates
    are dropped before the estimate, never turned into inf or NaN."""
    torch.manual_seed(0)
    model = MLP(MLPSettings(hidden=(8,), activation="relu"), 5, 2).double()
    with torch.no_grad():
        model.net[0].bias.fill_(-1.5)
    X = torch.randn(400, 5, dtype=torch.float64)
    hidden = layer_ids(model, X, RepresentationSettings(estimator="mle", k=5))[1]
    assert hidden.n_distinct < 400 and math.isfinite(hidden.dimension)


def test_only_fully_connected_models_and_1d_cnns_qualify() -> None:
    model = CNN(CNNSettings(image_shape=(1, 6, 6), channels=(2,), kernel_size=3,
                            activation="relu", pooling="max"), 36, 3)
    with pytest.raises(ValueError, match="fully connected model .an MLP. or a 1-D CNN"):
        layer_representations(model, torch.randn(4, 36))


def test_a_1d_cnns_layers_are_its_activations_flattened() -> None:
    torch.manual_seed(0)
    model = Conv1DNet(Conv1DSettings(), 40, 10)  # MNIST-1D's ConvBase: 19, 10, 5 positions
    model.train()
    X = torch.randn(7, 40)
    layers = layer_representations(model, X)
    assert [name for name, _ in layers] == ["input", "hidden 1", "hidden 2", "hidden 3",
                                            "output"]
    assert [h.shape[1] for _, h in layers] == [40, 25 * 19, 25 * 10, 25 * 5, 10]
    conv = [m for m in model.features if isinstance(m, torch.nn.Conv1d)]
    h = X.reshape(7, 1, 40)
    for (_, got), layer in zip(layers[1:4], conv, strict=True):
        h = torch.relu(layer(h))
        assert torch.equal(got, h.flatten(1))
    with torch.no_grad():
        assert torch.equal(layers[-1][1], model(X))
    assert model.training  # flags restored
