"""The generalised Gauss-Newton matrix of a mean loss, from per-example Jacobians.

    G = (1/n) Σᵢ Jᵢᵀ Λᵢ Jᵢ,   Jᵢ = ∂f(xᵢ)/∂θ (C × P),   Λᵢ = ∂²ℓ(f, yᵢ)/∂f² at f(xᵢ) (C × C),

for a model f with C outputs and a loss ``loss_fn`` that is the mean of per-example terms
(Schraudolph 2002; Martens 2020). Jᵢ comes from one ``vmap(jacrev)`` per chunk of ``rows``
examples, Λᵢ from C backward passes through the chunk's summed loss (its Hessian in the outputs
is block diagonal, one block per example). A product G M with K vectors then costs one Jacobian
pass whatever K (curvlinops' GGN operator, one Jacobian-vector and one vector-Jacobian product
per vector, took ~50 ms per 50-vector product on a 385-parameter MLP with 300 examples, this
~3-9 ms), and the dense matrix is a sum of per-chunk Gram products instead of P products.
Memory: rows·C·P numbers per chunk, never n·C·P. Agrees with curvlinops' GGN to rounding
(tests/analyses/curvature/test_ggn.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev, vmap

LossFn = Callable[[Tensor, Tensor], Tensor]  # (outputs, targets) -> mean loss over the batch


class GaussNewton:
    """G over (X, y) at the model's current parameters, products streamed ``rows`` examples at
    a time (all at once for None): ``G @ M`` for M (P,) or (P, K), ``dense()`` for (P, P). The
    model should be in eval mode (:func:`genlab.analyses.curvature.hessian.curvature_model`)."""

    def __init__(self, net: nn.Module, loss_fn: LossFn, X: Tensor, y: Tensor,
                 rows: int | None) -> None:
        named = [(name, p) for name, p in net.named_parameters() if p.requires_grad]
        names = [name for name, _ in named]
        fixed = {name: p.detach() for name, p in net.named_parameters() if not p.requires_grad}
        fixed.update(dict(net.named_buffers()))
        self.params = tuple(p.detach() for _, p in named)
        self.dim = sum(p.numel() for p in self.params)
        self.shape = (self.dim, self.dim)
        self.device, self.dtype = self.params[0].device, self.params[0].dtype
        self.n = len(X)
        size = len(X) if rows is None else rows
        self.chunks = list(zip(X.split(size), y.split(size), strict=True))

        def output(theta: tuple[Tensor, ...], x: Tensor) -> Tensor:
            out = functional_call(net, {**fixed, **dict(zip(names, theta, strict=True))},
                                  (x.unsqueeze(0),))
            return out.reshape(-1)  # (C,)

        self.net, self.loss_fn = net, loss_fn
        self._jacobians = vmap(jacrev(output), in_dims=(None, 0))

    def _output_hessians(self, xs: Tensor, ts: Tensor) -> Tensor:
        """Λ (b, C, C): the Hessian of the chunk's summed loss in its outputs is block diagonal,
        one C × C block per example, so C backward passes give every Λᵢ."""
        with torch.no_grad():
            outputs = self.net(xs)
        f = outputs.detach().requires_grad_(True)
        with torch.enable_grad():
            total = self.loss_fn(f, ts) * len(f)
            (g,) = torch.autograd.grad(total, f, create_graph=True)
            g = g.reshape(len(f), -1)  # (b, C)
            rows = []
            for c in range(g.shape[1]):
                (row,) = torch.autograd.grad(g[:, c].sum(), f, retain_graph=True,
                                             allow_unused=True)
                rows.append(torch.zeros_like(f) if row is None else row)
        return torch.stack([r.reshape(len(f), -1) for r in rows], dim=1).detach()

    def _factors(self, xs: Tensor, ts: Tensor) -> tuple[Tensor, Tensor]:
        """J (b, C, P) and Λ (b, C, C) of a chunk."""
        J = self._jacobians(self.params, xs)
        J = torch.cat([j.reshape(len(xs), j.shape[1], -1) for j in J], dim=2)
        return J, self._output_hessians(xs, ts)

    def factors(self) -> tuple[Tensor, Tensor]:
        """J (n, C, P) and Λ (n, C, C) of every example, in order: n·C·P numbers, for many
        products over subsets of a data set small enough to hold them (:func:`gram_product`)."""
        parts = [self._factors(xs, ts) for xs, ts in self.chunks]
        return torch.cat([J for J, _ in parts]), torch.cat([L for _, L in parts])

    def __matmul__(self, M: Tensor) -> Tensor:
        matrix = M if M.ndim == 2 else M[:, None]
        out = torch.zeros(self.dim, matrix.shape[1], dtype=self.dtype, device=self.device)
        for xs, ts in self.chunks:
            out += _gram_sum(*self._factors(xs, ts), matrix)
        out /= self.n
        return out if M.ndim == 2 else out[:, 0]

    def dense(self) -> Tensor:
        G = torch.zeros(self.dim, self.dim, dtype=self.dtype, device=self.device)
        for xs, ts in self.chunks:
            J, L = self._factors(xs, ts)
            G += torch.einsum("bcp,bcq->pq", J, torch.einsum("bcd,bdq->bcq", L, J))
        G /= self.n
        return 0.5 * (G + G.T)


def _gram_sum(J: Tensor, L: Tensor, M: Tensor) -> Tensor:
    """Σᵢ Jᵢᵀ Λᵢ Jᵢ M over the b examples of J (b, C, P) and Λ (b, C, C), M (P, K)."""
    JM = torch.einsum("bcp,pk->bck", J, M)
    return torch.einsum("bcp,bck->pk", J, torch.einsum("bcd,bdk->bck", L, JM))


def gram_product(J: Tensor, L: Tensor, M: Tensor) -> Tensor:
    """The GGN of the mean loss over the examples of J (b, C, P) and Λ (b, C, C) (rows of
    :meth:`GaussNewton.factors`) times M (P, K): what ``GaussNewton`` over those examples
    gives, without a Jacobian pass."""
    return _gram_sum(J, L, M) / len(J)


__all__ = ["GaussNewton", "gram_product"]
