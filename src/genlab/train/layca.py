"""Layca (Carbonnelle & De Vleeschouwer, "Layer rotation: a surprisingly powerful indicator of
generalization in deep networks?", 2019, Algorithm 2): SGD whose step on each layer's weights
is a rotation of a controlled size.

For every weight tensor p with at least two dimensions (a layer's kernel), the SGD direction d
(the gradient, or the momentum buffer) is

1. projected on the tangent space of the sphere through p: d ← d − (d·p / ‖p‖²) p;
2. rescaled to the weights' norm: d ← d ‖p‖ / ‖d‖ (zero if ‖d‖ is negligible);
3. applied with the learning rate ρ: p ← p − ρ d;
4. and p is rescaled to its norm before the step: p ← p ‖p_before‖ / ‖p‖.

So each step turns the layer's weights by the angle arctan ρ whatever the gradient's scale, and
the norm never changes: the learning rate controls the layer rotation directly. Other parameters
(biases) are not trained, as in the authors' code (``layca_optimizers.py``: "only kernels are
optimized when using Layca").
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

EPS = 1e-12  # a direction this short (relative to the weights) is treated as zero


class Layca(torch.optim.Optimizer):
    """Layca on SGD with optional heavy-ball momentum (torch.optim.SGD's buffer: b ← μb + g)."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float, momentum: float = 0.0) -> None:
        if not lr > 0:
            raise ValueError(f"lr must be positive, got {lr}")
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        super().__init__(params, {"lr": lr, "momentum": momentum})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            for p in group["params"]:
                if p.grad is None or p.ndim < 2:
                    continue
                direction = p.grad
                if momentum:
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = direction.detach().clone()
                    else:
                        state["momentum_buffer"].mul_(momentum).add_(direction)
                    direction = state["momentum_buffer"]
                norm = p.norm()
                tangent = direction - (direction * p).sum() / norm.square() * p
                length = tangent.norm()
                if length <= EPS * norm:
                    continue
                p.sub_(tangent, alpha=lr * float(norm / length))
                p.mul_(norm / p.norm())
        return loss


__all__ = ["Layca"]
