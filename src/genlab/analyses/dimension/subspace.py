"""Objective-landscape intrinsic dimension: training in a random subspace (Li, Farkhoor, Liu &
Yosinski, "Measuring the intrinsic dimension of objective landscapes", ICLR 2018).

Of a model's D trainable parameters θ, only d coordinates z are trained:

    θ = θ₀ + P z,   z ∈ ℝ^d initialised at 0,

with θ₀ the model's (random) initial parameters, held fixed, and P a fixed D×d random matrix
with unit-norm columns. The smallest d at which the subspace-trained model reaches 90% of the
full model's accuracy, d_int90 (:func:`d_int90`), measures how many directions the task needs:
Li et al. report ≈ 750 for an MNIST MLP of any width (D from 200k upwards), ≈ 290 for LeNet,
and that d_int90 barely moves with width, so D/d_int90 reads as a compression ratio.

P (:class:`RandomProjection`) is Li et al.'s dense construction, Gaussian columns normalised to
unit length, generated column by column from per-column seeds, so any column can be rebuilt
without the others. When D·d fits ``max_cached_entries`` the matrix is built once and kept
(products are then one matmul); otherwise it is never held whole: each product P z or Pᵀ g
regenerates it ``max_block_entries`` numbers at a time, in blocks of whole columns (a column
must be whole to be normalised), and a custom autograd function recomputes the blocks for the
backward pass instead of saving them. That keeps memory O(D · columns per block) for any d,
at the cost of drawing D·d Gaussians twice per training step; Li et al.'s alternatives for large
D, sparse random projections and Fastfood, cost less time but give a different P (a sparse one
has coordinates exactly 0; Fastfood's columns are not independent), and here the dense Gaussian
is the definition the tests check against.

The subspace model (:class:`SubspaceModel`) evaluates the original model at θ with
``torch.func.functional_call``: the original module is never modified, and its buffers (e.g.
BatchNorm statistics) are used as they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call

from genlab.seeding import derive_seed, torch_generator
from genlab.settings import TrainSettings
from genlab.train.loop import TrainResult, train_classifier

PROJECTION_PURPOSE = "subspace-projection"
"""Column c of P is drawn from ``derive_seed(seed, PROJECTION_PURPOSE, c)``."""


class RandomProjection:
    """A D×d matrix P whose columns are i.i.d. uniform on the unit sphere of ℝ^D.

    Column c is ``g / ‖g‖`` with ``g = torch.randn(D, generator=G_c, dtype, device)`` and G_c a
    ``torch.Generator`` on ``device`` seeded with ``derive_seed(seed, PROJECTION_PURPOSE, c)``;
    the columns do not depend on d, on the block size or on caching, so P for d' < d is the
    first d' columns of P for d. torch draws different numbers on CPU and CUDA generators, so
    the same seed gives a different (equally distributed) P on each device type.

    ``P(z)`` is P z for z ∈ ℝ^d (differentiable in z); :meth:`matvec` and :meth:`rmatvec` are P z
    and Pᵀ g without autograd; :meth:`dense` builds the whole matrix (for small sizes).
    Cached when D·d ≤ ``max_cached_entries``, else streamed in blocks of at most
    ``max_block_entries`` numbers (at least one column), as the module docstring explains.
    """

    def __init__(self, num_params: int, dim: int, seed: int, *,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
                 max_cached_entries: int = 2**24, max_block_entries: int = 2**22) -> None:
        if num_params < 1 or dim < 1:
            raise ValueError(f"need D ≥ 1 and d ≥ 1, got D={num_params}, d={dim}")
        if max_block_entries < 1:
            raise ValueError(f"max_block_entries must be positive, got {max_block_entries}")
        self.num_params, self.dim, self.seed = num_params, dim, seed
        self.dtype, self.device = dtype, torch.device(device)
        self.block_columns = max(1, min(dim, max_block_entries // num_params))
        self._seeds = [derive_seed(seed, PROJECTION_PURPOSE, c) for c in range(dim)]
        self.cached = num_params * dim <= max_cached_entries
        self._columns: Tensor | None = None
        if self.cached:
            self._columns = self.dense().T.contiguous()

    def __repr__(self) -> str:
        return (f"RandomProjection(D={self.num_params}, d={self.dim}, seed={self.seed}, "
                f"cached={self.cached}, block_columns={self.block_columns})")

    def column_block(self, start: int, stop: int) -> Tensor:
        """Columns ``start:stop`` of P, as the rows of a (stop − start, D) tensor."""
        block = torch.empty(stop - start, self.num_params, dtype=self.dtype, device=self.device)
        for row, column in enumerate(range(start, stop)):
            generator = torch.Generator(device=self.device)
            generator.manual_seed(self._seeds[column])
            torch.randn(self.num_params, generator=generator, dtype=self.dtype,
                        device=self.device, out=block[row])
        return block / torch.linalg.vector_norm(block, dim=1, keepdim=True)

    def blocks(self) -> Iterator[tuple[int, int, Tensor]]:
        """(start, stop, columns start:stop as rows) covering all d columns in order."""
        if self._columns is not None:
            yield 0, self.dim, self._columns
            return
        for start in range(0, self.dim, self.block_columns):
            stop = min(start + self.block_columns, self.dim)
            yield start, stop, self.column_block(start, stop)

    def dense(self) -> Tensor:
        """The whole (D, d) matrix."""
        if self._columns is not None:
            return self._columns.T
        return torch.cat([self.column_block(start, min(start + self.block_columns, self.dim))
                          for start in range(0, self.dim, self.block_columns)]).T

    def matvec(self, z: Tensor) -> Tensor:
        """P z, (d,) ↦ (D,)."""
        out = torch.zeros(self.num_params, dtype=self.dtype, device=self.device)
        for start, stop, block in self.blocks():
            out.addmv_(block.T, z[start:stop].to(self.dtype))
        return out

    def rmatvec(self, g: Tensor) -> Tensor:
        """Pᵀ g, (D,) ↦ (d,)."""
        g = g.to(self.dtype)
        return torch.cat([block @ g for _, _, block in self.blocks()])

    def __call__(self, z: Tensor) -> Tensor:
        if self._columns is not None:
            return self._columns.T @ z
        return _Project.apply(z, self)


class _Project(torch.autograd.Function):
    """z ↦ P z with the backward pass Pᵀ g regenerating P's blocks rather than saving them."""

    @staticmethod
    def forward(ctx, z: Tensor, projection: RandomProjection) -> Tensor:
        ctx.projection = projection
        return projection.matvec(z.detach())

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        return ctx.projection.rmatvec(grad), None


class SubspaceModel(nn.Module):
    """``model`` reparametrised as θ = θ₀ + P z, with z (``self.z``, zeros at the start) its only
    parameter; θ₀ is a copy of the model's trainable parameters (``model.parameters()`` order,
    flattened) taken at construction. Frozen parameters and buffers are the model's own. The
    wrapped model is not a submodule (so it adds no parameters), but :meth:`train` and
    :meth:`eval` set its mode too."""

    def __init__(self, model: nn.Module, dim: int, seed: int, *,
                 max_cached_entries: int = 2**24, max_block_entries: int = 2**22) -> None:
        super().__init__()
        named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("the model has no trainable parameters")
        first = named[0][1]
        self._model = (model,)  # a tuple, so nn.Module does not register it
        self._names = [name for name, _ in named]
        self._shapes = [p.shape for _, p in named]
        self.register_buffer("theta0", torch.cat([p.detach().reshape(-1) for _, p in named]))
        self.projection = RandomProjection(
            self.theta0.numel(), dim, seed, dtype=first.dtype, device=first.device,
            max_cached_entries=max_cached_entries, max_block_entries=max_block_entries)
        self.z = nn.Parameter(torch.zeros(dim, dtype=first.dtype, device=first.device))
        self._theta_cache: tuple[int, Tensor] | None = None

    @property
    def model(self) -> nn.Module:
        return self._model[0]

    def train(self, mode: bool = True) -> SubspaceModel:
        super().train(mode)
        self.model.train(mode)
        return self

    def theta(self) -> Tensor:
        """θ₀ + P z, flattened. Without grad (evaluation), reused while z is unchanged, so
        evaluating in batches draws a streamed P once rather than once per batch."""
        if torch.is_grad_enabled():
            self._theta_cache = None
            return self.theta0 + self.projection(self.z)
        version = self.z._version
        if self._theta_cache is None or self._theta_cache[0] != version:
            self._theta_cache = (version, self.theta0 + self.projection(self.z))
        return self._theta_cache[1]

    def parameters_dict(self) -> dict[str, Tensor]:
        """θ as the model's named parameters."""
        pieces = self.theta().split([math.prod(shape) for shape in self._shapes])
        return {name: piece.view(shape)
                for name, piece, shape in zip(self._names, pieces, self._shapes, strict=True)}

    def forward(self, *args: Tensor) -> Tensor:
        return functional_call(self.model, self.parameters_dict(), args)


@dataclass(frozen=True)
class SubspaceResult:
    dim: int  # d, the subspace dimension
    num_params: int  # D, the model's trainable parameters
    train_acc: float  # at the last evaluation
    test_acc: float
    train_loss: float
    test_loss: float
    status: str  # the training loop's: "fitted", "budget" or "diverged"
    steps: int
    z: Tensor  # (d,) the trained coordinates; θ = θ₀ + P z
    training: TrainResult  # the full history


def train_in_subspace(model: nn.Module, d: int, X_train: Tensor, y_train: Tensor,
                      X_test: Tensor, y_test: Tensor, settings: TrainSettings,
                      seed: int) -> SubspaceResult:
    """Train z ∈ ℝ^d of θ = θ₀ + P z from z = 0 (θ₀: ``model``'s current parameters, P drawn
    from ``seed``) with the recipe ``settings`` (optimizer, loss, learning rate, batch size,
    budget and stopping rule, exactly as :func:`genlab.train.loop.train_classifier` applies
    them, to z alone); minibatches also come from ``seed``. The model's parameters are not
    changed and its train/eval flags are restored. Deterministic on the CPU for a given seed.

    d = D gives a full-rank square P (invertible almost surely), so the subspace is the whole
    parameter space, reached through a random linear change of coordinates (which changes the
    optimizer's geometry, not what can be fitted)."""
    num_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if d < 1:
        raise ValueError(f"d must be positive, got {d}")
    flags = [(module, module.training) for module in model.modules()]
    try:
        wrapped = SubspaceModel(model, d, seed)
        generator = torch_generator(seed, "subspace", "batches", device=str(X_train.device))
        result = train_classifier(wrapped, X_train, y_train, X_test, y_test, settings, generator)
    finally:
        for module, training in flags:
            module.training = training
    final = result.final
    return SubspaceResult(dim=d, num_params=num_params, train_acc=final.train_acc,
                          test_acc=final.test_acc, train_loss=final.train_loss,
                          test_loss=final.test_loss, status=result.status, steps=result.steps,
                          z=wrapped.z.detach().clone(), training=result)


def d_int90(accuracies_by_d: Mapping[int, float], full_accuracy: float,
            threshold: float = 0.9) -> int | None:
    """The smallest d whose accuracy reaches ``threshold`` × ``full_accuracy`` (Li et al.'s
    d_int90 for threshold 0.9), or None when no d in the sweep does. Only the d values given are
    candidates, so the answer is resolved to the sweep's grid; a d that reaches the target
    counts even if a larger one falls below it (training noise), as in Li et al."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    target = threshold * full_accuracy
    reached = [d for d, accuracy in accuracies_by_d.items() if accuracy >= target]
    return min(reached) if reached else None


__all__ = ["PROJECTION_PURPOSE", "RandomProjection", "SubspaceModel", "SubspaceResult",
           "d_int90", "train_in_subspace"]
