"""Hessian-vector products by double backward through a kept gradient graph.

For the Hessian of the mean loss L(θ) = (1/n) Σᵢ ℓ(f_θ(xᵢ), yᵢ), H v = ∇_θ (∇_θ L · v): one
backward pass through the graph of the gradient. When the data are one batch, that graph is
built once (``torch.autograd.grad(..., create_graph=True)``) and kept for the operator's life,
so each product costs one backward through it, no forward pass and no first backward. With
several batches, keeping every batch's graph would hold all the activations that batching was
asked to bound, so each product rebuilds each batch's graph and drops it.

Measured on the study models (benchmarks/sharpness.py): curvlinops' ``HessianLinearOperator``
(forward-over-reverse through ``torch.func``, rebuilt for every product) cost 5.0× a float64
gradient per product, this one ~1-2× on one batch; the products agree to rounding
(tests/analyses/curvature/test_hessian.py checks both against the dense float64 Hessian).
curvlinops keeps the GGN (:mod:`genlab.analyses.curvature.hessian`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

LossFn = Callable[[Tensor, Tensor], Tensor]  # (output, target) ↦ the mean loss over the batch


class HessianProducts:
    """H M for M of shape (P,) or (P, K), H the Hessian of the mean loss over ``data`` (a list of
    (X, y) batches holding ``num_data`` examples) w.r.t. ``params``; the subset of curvlinops'
    operator interface genlab uses (``shape``, ``dtype``, ``device``, ``@``)."""

    def __init__(self, model: nn.Module, loss_fn: LossFn, params: Sequence[Tensor],
                 data: Sequence[tuple[Tensor, Tensor]], num_data: int) -> None:
        if not params:
            raise ValueError("no trainable parameters")
        self.model, self.loss_fn, self.params = model, loss_fn, list(params)
        self.data, self.num_data = list(data), num_data
        self.sizes = [p.numel() for p in self.params]
        dim = sum(self.sizes)
        self.shape = (dim, dim)
        self.dtype, self.device = self.params[0].dtype, self.params[0].device
        # one batch: its gradient graph, built once and reused by every product
        self._kept = self._gradient(*self.data[0]) if len(self.data) == 1 else None

    def _gradient(self, X: Tensor, y: Tensor) -> tuple[Tensor, ...]:
        """This batch's share of ∇L, with its graph (a parameter the loss does not reach has a
        zero gradient, and a gradient that is constant in θ has no graph: its rows of H are 0)."""
        with torch.enable_grad():  # a caller under no_grad still gets products
            loss = self.loss_fn(self.model(X), y) * (len(X) / self.num_data)
            return torch.autograd.grad(loss, self.params, create_graph=True, allow_unused=True,
                                       materialize_grads=True)

    def _product(self, grads: tuple[Tensor, ...], v: Tensor, keep: bool) -> Tensor:
        pieces = v.split(self.sizes)
        live = [(g, piece.view_as(g)) for g, piece in zip(grads, pieces, strict=True)
                if g.requires_grad]
        if not live:
            return torch.zeros_like(v)
        outputs, directions = zip(*live, strict=True)
        with torch.enable_grad():
            hv = torch.autograd.grad(outputs, self.params, grad_outputs=directions,
                                     retain_graph=keep, allow_unused=True,
                                     materialize_grads=True)
        return torch.cat([h.reshape(-1) for h in hv])

    def _apply(self, v: Tensor) -> Tensor:
        if self._kept is not None:
            return self._product(self._kept, v, keep=True)
        total = torch.zeros_like(v)
        for X, y in self.data:
            total += self._product(self._gradient(X, y), v, keep=False)
        return total

    def __matmul__(self, M: Tensor) -> Tensor:
        if M.shape[0] != self.shape[0] or M.ndim not in (1, 2):
            raise ValueError(f"expected a ({self.shape[0]},) or ({self.shape[0]}, K) tensor, "
                             f"got {tuple(M.shape)}")
        M = M.to(dtype=self.dtype, device=self.device)
        if M.ndim == 1:
            return self._apply(M)
        return torch.stack([self._apply(column) for column in M.unbind(dim=1)], dim=1)


__all__ = ["HessianProducts"]
