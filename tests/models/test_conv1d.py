"""The 1-D CNN and the residual MLP against the MNIST-1D paper's own modules (notebooks/
models.py of greydanus/mnist1d, written out here): same parameter counts, and the same outputs
once they hold the same weights."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError
from torch import nn

from genlab.models.conv1d import Conv1DNet, output_length
from genlab.models.mlp import ResidualMLP
from genlab.models.registry import build_model, count_parameters, load_model, model_spec
from genlab.settings import Conv1DSettings, ResidualMLPSettings


class PaperConvBase(nn.Module):
    """ConvBase(output_size=10) of the paper's code."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(1, 25, 5, stride=2, padding=1)
        self.conv2 = nn.Conv1d(25, 25, 3, stride=2, padding=1)
        self.conv3 = nn.Conv1d(25, 25, 3, stride=2, padding=1)
        self.linear = nn.Linear(125, 10)

    def forward(self, x):
        x = x.view(-1, 1, x.shape[-1])
        h = self.conv3(self.conv2(self.conv1(x).relu()).relu()).relu()
        return self.linear(h.view(h.shape[0], -1))


class PaperMLPBase(nn.Module):
    """MLPBase(40, 10) of the paper's code (hidden_size=100)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear1, self.linear2, self.linear3 = (nn.Linear(40, 100), nn.Linear(100, 100),
                                                    nn.Linear(100, 10))

    def forward(self, x):
        h = self.linear1(x).relu()
        h = h + self.linear2(h).relu()
        return self.linear3(h)


def test_conv1d_is_the_papers_convbase() -> None:
    torch.manual_seed(0)
    ours, paper = build_model("conv1d", Conv1DSettings(), 40, 10), PaperConvBase()
    assert count_parameters(ours) == count_parameters(paper) == 5210
    convs = [m for m in ours.features if isinstance(m, nn.Conv1d)]
    for mine, theirs in zip((*convs, ours.head), (paper.conv1, paper.conv2, paper.conv3,
                                                 paper.linear), strict=True):
        mine.load_state_dict(theirs.state_dict())
    x = torch.randn(7, 40)
    torch.testing.assert_close(ours(x), paper(x), rtol=0, atol=0)


def test_residual_mlp_is_the_papers_mlpbase() -> None:
    torch.manual_seed(0)
    ours, paper = build_model("residual_mlp", ResidualMLPSettings(), 40, 10), PaperMLPBase()
    assert count_parameters(ours) == count_parameters(paper) == 15210
    for mine, theirs in ((ours.first, paper.linear1), (ours.blocks[0], paper.linear2),
                         (ours.head, paper.linear3)):
        mine.load_state_dict(theirs.state_dict())
    x = torch.randn(7, 40)
    torch.testing.assert_close(ours(x), paper(x), rtol=0, atol=0)
    assert not hasattr(ours, "net")  # the layer-wise analyses must not read it as a chain


def test_residual_blocks_and_widths() -> None:
    none = ResidualMLP(ResidualMLPSettings(width=8, blocks=0), 5, 3)
    assert count_parameters(none) == 5 * 8 + 8 + 8 * 3 + 3
    three = ResidualMLP(ResidualMLPSettings(width=8, blocks=3, activation="tanh"), 5, 3)
    assert len(three.blocks) == 3 and three(torch.randn(4, 5)).shape == (4, 3)


def test_conv1d_lengths_and_errors() -> None:
    assert [output_length(n, k, 2, 1) for n, k in ((40, 5), (19, 3), (10, 3))] == [19, 10, 5]
    net = Conv1DNet(Conv1DSettings(channels=(4, 6), kernel_sizes=(3, 3), stride=1, padding=1),
                    12, 5)
    assert net.head.in_features == 6 * 12 and net(torch.randn(2, 12)).shape == (2, 5)
    with pytest.raises(ValueError, match="shrink a series of 2 points"):
        Conv1DNet(Conv1DSettings(), 2, 10)
    with pytest.raises(ValidationError, match="one kernel length per layer"):
        Conv1DSettings(channels=(4, 4), kernel_sizes=(3,))


def test_save_and_load_round_trip(tmp_path) -> None:
    from genlab.models.registry import save_weights

    for kind, settings in (("conv1d", Conv1DSettings()), ("residual_mlp",
                                                          ResidualMLPSettings())):
        model = build_model(kind, settings, 40, 10)
        save_weights(model, tmp_path / f"{kind}.safetensors")
        back = load_model(model_spec(kind, settings, 40, 10), tmp_path / f"{kind}.safetensors")
        x = torch.randn(3, 40)
        torch.testing.assert_close(back(x), model.eval()(x), rtol=0, atol=0)
