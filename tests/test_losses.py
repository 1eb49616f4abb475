"""The training losses (genlab.losses) against their formulas."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from genlab.losses import loss_value


def test_losses_match_their_formulas() -> None:
    out = torch.tensor([[2.0, -1.0, 0.5], [0.0, 1.0, 3.0]])
    y = torch.tensor([0, 2])
    # mse: ½‖f − onehot‖² per example, then the mean
    expected = 0.5 * ((1.0 + 1.0 + 0.25) + (0.0 + 1.0 + 4.0)) / 2
    assert loss_value("mse", out, y).item() == pytest.approx(expected)
    f, labels = torch.tensor([0.5, -2.0, 1.0]), torch.tensor([1, 0, 0])  # y = +1, −1, −1
    assert loss_value("squared_margin", f, labels).item() == pytest.approx(
        ((1 - 0.5) ** 2 + (1 - 2.0) ** 2 + (1 + 1.0) ** 2) / 3)
    assert loss_value("cross_entropy", out, y, "sum").item() == pytest.approx(
        F.cross_entropy(out, y, reduction="sum").item())
