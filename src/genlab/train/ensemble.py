"""Train K classifiers of one architecture at once, each as :func:`train_classifier` would alone.

The K models' trainable parameters live in one ``(K, P)`` tensor (row k holds ``models[k]``'s,
flattened in ``parameters()`` order) and every step runs all K together: batched matmuls with a
hand-written backward for MLPs (``method="bmm"``), or ``torch.func.vmap`` over ``functional_call``
for any other architecture (``method="vmap"``). Row k still sees exactly what the single-model
loop would: its own data (a seed's own draw of the training and test sets, or inputs shared by
all), its own minibatches (drawn by the loop's :class:`MinibatchSampler` from its own generator),
its own lr (and schedule), momentum, betas and weight decay in ``torch.optim.SGD``'s or
``torch.optim.Adam``'s update, its own budget and stop rule. It covers SGD and Adam on
cross-entropy without probes; other recipes train with the loop.

Like the loop, this module is pure: tensors and settings in, :class:`TrainResult` objects out.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad_and_value, vmap
from torch.nn import functional as F

from genlab.models.mlp import MLP
from genlab.progress import progress
from genlab.settings import TrainSettings
from genlab.train.loop import EvalRow, MinibatchSampler, TrainResult, lr_factor, reached_stop

Method = Literal["auto", "bmm", "vmap"]

_EVAL_ROWS = 4096  # examples per loss sum, as in loop.evaluate: the sums then add up alike
_EVAL_LOGITS = 2**24  # bound on K * rows * classes: the logits held for one loss sum
# Bound on K * rows * width, one hidden activation of the K models in evaluation (2 MiB). Larger
# chunks were slower here: each fresh multi-MiB tensor costs page faults.
_EVAL_ACTIVATIONS = 2**19
# Bound on K * B * width for one training forward/backward on the CPU: larger K runs in groups.
# At K = 128 (32-64-64-10 MLP, batch 100) one group sometimes took 4e5 minor page faults per 100
# steps (glibc returning multi-MiB tensors to the OS and faulting them in again) where groups of
# 32 took 1e4, and 35% less time; in other runs the two were level. K = 32 was unaffected.
_STEP_ACTIVATIONS = 2**18


@dataclass(frozen=True)
class _Slot:
    """Where one trainable parameter sits in a row of the ``(K, P)`` parameter matrix."""

    name: str
    offset: int
    shape: torch.Size

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def view(self, flat: Tensor) -> Tensor:
        """This parameter of every model, ``(K, *shape)``, as a view (no copy)."""
        return flat[:, self.offset:self.offset + self.numel].view(len(flat), *self.shape)


def _trainable(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    # the optimizer's parameters: the loop's SGD never updates one without a gradient
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def _constants(model: nn.Module) -> list[tuple[str, Tensor]]:
    """Frozen parameters and buffers: inputs of the forward, never updated."""
    frozen = [(n, p) for n, p in model.named_parameters() if not p.requires_grad]
    return frozen + list(model.named_buffers())


def _layout(model: nn.Module) -> tuple[_Slot, ...]:
    slots, offset = [], 0
    for name, p in _trainable(model):
        slots.append(_Slot(name, offset, p.shape))
        offset += p.numel()
    return tuple(slots)


def _flatten(grads: dict[str, Tensor], slots: Sequence[_Slot], k: int) -> Tensor:
    return torch.cat([grads[s.name].reshape(k, s.numel) for s in slots], dim=1)


def _groups(k: int, size: int) -> list[slice]:
    """Rows ``0..k-1`` in equal groups of at most ``size`` (the last may be smaller)."""
    step = -(-k // -(-k // size))
    return [slice(i, min(i + step, k)) for i in range(0, k, step)]


class _Engine(Protocol):
    """Forward and backward of K models at once. ``params`` maps each trainable parameter's name
    to its ``(K, *shape)`` tensor; ``consts`` the frozen parameters and buffers likewise."""

    def loss_and_grad(self, params: dict[str, Tensor], consts: dict[str, Tensor], x: Tensor,
                      y: Tensor) -> tuple[Tensor, Tensor]:
        """Each model's mean cross-entropy ``(K,)`` on its batch (``x (K, B, ...)``,
        ``y (K, B)``) in training mode, and the gradient as a ``(K, P)`` matrix."""
        ...

    def logits(self, params: dict[str, Tensor], consts: dict[str, Tensor], x: Tensor,
               own: bool) -> Tensor:
        """Every model's logits ``(K, N, C)`` in eval mode: on shared inputs ``x (N, ...)``, or
        with ``own`` on each model's own inputs ``x (K, N, ...)``."""
        ...

    def widths(self, x: Tensor) -> tuple[int, int]:
        """Per example of ``x`` (its last ``example_dims`` dimensions are one example's): the
        widest activation, and the number of classes."""
        ...


class _VmapEngine:
    """Any architecture whose forward is a pure function of (parameters, buffers, input)."""

    def __init__(self, model: nn.Module, slots: Sequence[_Slot], example_dims: int) -> None:
        self.slots = tuple(slots)
        self.example_dims = example_dims
        # a skeleton without storage: functional_call swaps the stacked tensors in
        self.base = copy.deepcopy(model).to("meta")

        def forward(params: dict[str, Tensor], consts: dict[str, Tensor], x: Tensor) -> Tensor:
            return functional_call(self.base, (params, consts), (x,))

        def loss(params: dict[str, Tensor], consts: dict[str, Tensor], x: Tensor,
                 y: Tensor) -> Tensor:
            return F.cross_entropy(forward(params, consts, x), y)

        self._grad = vmap(grad_and_value(loss))
        self._forward = {False: vmap(forward, in_dims=(0, 0, None)), True: vmap(forward)}

    def loss_and_grad(self, params: dict[str, Tensor], consts: dict[str, Tensor], x: Tensor,
                      y: Tensor) -> tuple[Tensor, Tensor]:
        self.base.train()
        grads, loss = self._grad(params, consts, x, y)
        return loss, _flatten(grads, self.slots, len(x))

    @torch.no_grad()
    def logits(self, params: dict[str, Tensor], consts: dict[str, Tensor], x: Tensor,
               own: bool) -> Tensor:
        self.base.eval()
        return self._forward[own](params, consts, x)

    def widths(self, x: Tensor) -> tuple[int, int]:
        # activation widths are unknown here; the largest parameter dimension stands in
        width = max(max(s.shape, default=1) for s in self.slots)
        self.base.eval()
        try:  # shapes only: the skeleton runs on the meta device, computing nothing
            n_classes = self.base(torch.empty((1, *x.shape[-self.example_dims:]),
                                              device="meta")).shape[-1]
        except (RuntimeError, NotImplementedError):  # a forward the meta device cannot run
            n_classes = width
        return width, n_classes


@dataclass(frozen=True)
class _Op:
    kind: Literal["linear", "relu", "tanh", "gelu"]
    weight: str | None = None  # parameter names of a linear op
    bias: str | None = None
    approximate: str = "none"  # GELU's


_ACTIVATIONS: dict[type[nn.Module], Literal["relu", "tanh", "gelu"]] = {
    nn.ReLU: "relu", nn.Tanh: "tanh", nn.GELU: "gelu"}


def _sequential_ops(model: nn.Module, slots: Sequence[_Slot]) -> tuple[_Op, ...] | None:
    """The model as a chain of Linear/ReLU/Tanh/GELU ops, or None if it is not one.

    Exact type checks: a subclass could override ``forward`` and compute something else.
    """
    if type(model) is MLP:
        seq, prefix = model.net, "net."
    elif type(model) is nn.Sequential:
        seq, prefix = model, ""
    else:
        return None
    if type(seq) is not nn.Sequential or _constants(model):
        return None  # buffers or frozen parameters: leave them to functional_call
    ops: list[_Op] = []
    for i, layer in enumerate(seq):
        if type(layer) is nn.Linear:
            ops.append(_Op("linear", f"{prefix}{i}.weight",
                           None if layer.bias is None else f"{prefix}{i}.bias"))
        elif type(layer) in _ACTIVATIONS:
            ops.append(_Op(_ACTIVATIONS[type(layer)],
                           approximate=getattr(layer, "approximate", "none")))
        else:
            return None
    if not any(op.kind == "linear" for op in ops):
        return None
    return tuple(ops)


class _BmmEngine:
    """Chains of Linear layers and elementwise activations: batched matmuls and a hand-written
    backward, 1.2-3x faster than vmap over autograd on small MLPs here (K = 128 down to 8), where
    per-op overhead weighs most. Each backward op is the one autograd calls (``threshold_backward``,
    ``tanh_backward``, ``gelu_backward``, ``_log_softmax_backward_data``), so the gradients
    agree with the loop's up to the matmuls' summation order (on MKL, to the bit)."""

    def __init__(self, ops: Sequence[_Op], slots: Sequence[_Slot]) -> None:
        self.ops = tuple(ops)
        self.slots = tuple(slots)
        self.first_linear = next(i for i, op in enumerate(self.ops) if op.kind == "linear")
        self.shapes = {s.name: s.shape for s in slots}

    def _forward(self, params: dict[str, Tensor], x: Tensor, keep: bool) -> list[Tensor]:
        """The input and every op's output (``h[i]`` is op i's input, ``h[-1]`` the logits), or
        just ``[logits]`` when ``keep`` is false (evaluation: no backward)."""
        h, z = [x], x
        made_by: _Op | None = None  # the op that made z; None: z is the caller's tensor
        for op in self.ops:
            # An activation may overwrite z when z is ours and nothing else needs it: a Linear's
            # output in training (its backward needs only its input), any output in evaluation.
            in_place = made_by is not None and (not keep or made_by.kind == "linear")
            if op.kind == "linear":
                assert op.weight is not None
                w_t = params[op.weight].mT  # (K, in, out): F.linear multiplies by W^T
                if op.bias is None:
                    z = torch.bmm(z, w_t)
                else:  # as F.linear's addmm: the bias is the accumulator the product adds to
                    z = torch.baddbmm(params[op.bias].unsqueeze(1), z, w_t)
            elif op.kind == "relu":
                z = torch.relu_(z) if in_place else torch.relu(z)
            elif op.kind == "tanh":
                z = torch.tanh_(z) if in_place else torch.tanh(z)
            else:  # GELU's backward needs its input
                z = F.gelu(z, approximate=op.approximate)
            made_by = op
            if keep:
                h.append(z)
        return h if keep else [z]

    def loss_and_grad(self, params: dict[str, Tensor], consts: dict[str, Tensor], x: Tensor,
                      y: Tensor) -> tuple[Tensor, Tensor]:
        h = self._forward(params, x, keep=True)
        logp = torch.log_softmax(h[-1], dim=-1)
        target = y.unsqueeze(-1)
        loss = -logp.gather(-1, target).squeeze(-1).mean(dim=1)
        # d(mean NLL)/d(log p) is -1/B at the target and 0 elsewhere; autograd's log_softmax
        # backward then gives the logits' gradient bit for bit as F.cross_entropy's
        g = torch.zeros_like(logp).scatter_(-1, target, -1.0 / y.shape[1])
        g = torch._log_softmax_backward_data(g, logp, -1, logp.dtype)
        grads: dict[str, Tensor] = {}
        for i in range(len(self.ops) - 1, self.first_linear - 1, -1):
            op = self.ops[i]
            if op.kind == "linear":
                assert op.weight is not None
                grads[op.weight] = torch.bmm(g.mT, h[i])  # g^T h: (K, out, in), as autograd
                if op.bias is not None:
                    grads[op.bias] = g.sum(dim=1)
                if i > self.first_linear:
                    g = torch.bmm(g, params[op.weight])
            elif op.kind == "relu":
                g = torch.ops.aten.threshold_backward(g, h[i + 1], 0)
            elif op.kind == "tanh":
                g = torch.ops.aten.tanh_backward(g, h[i + 1])
            else:
                g = torch.ops.aten.gelu_backward(g, h[i], approximate=op.approximate)
        return loss, _flatten(grads, self.slots, len(x))

    @torch.no_grad()
    def logits(self, params: dict[str, Tensor], consts: dict[str, Tensor], x: Tensor,
               own: bool) -> Tensor:
        if not own:
            k = len(next(iter(params.values())))
            x = x.expand(k, *x.shape)  # no copy
        return self._forward(params, x, keep=False)[-1]

    def widths(self, x: Tensor) -> tuple[int, int]:
        linear = [self.shapes[op.weight] for op in self.ops if op.weight is not None]
        return max(max(shape) for shape in linear), linear[-1][0]


def _make_engine(model: nn.Module, slots: Sequence[_Slot], method: Method,
                 example_dims: int) -> _Engine:
    if method not in ("auto", "bmm", "vmap"):
        raise ValueError(f"unknown method {method!r}; use 'auto', 'bmm' or 'vmap'")
    ops = None if method == "vmap" else _sequential_ops(model, slots)
    if ops is not None:
        return _BmmEngine(ops, slots)
    if method == "bmm":
        raise ValueError("method='bmm' needs an MLP or nn.Sequential of Linear/ReLU/Tanh/GELU "
                         "layers with every parameter trainable and no buffers; got "
                         f"{type(model).__name__}")
    return _VmapEngine(model, slots, example_dims)


@dataclass(frozen=True)
class _Data:
    """The ensemble's data, one row per model where ``own_x_*``/the labels' shape say so: inputs
    ``(n, ...)`` shared by all or ``(K, n, ...)`` each model's own; labels always ``(K, n)``
    (shared labels are expanded, no copy)."""

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor
    own_x_train: bool
    own_x_test: bool

    def rows(self, sel: Tensor) -> _Data:
        """The data of the models in rows ``sel``."""
        def pick(t: Tensor, own: bool = True) -> Tensor:
            return t.index_select(0, sel) if own else t

        return _Data(pick(self.x_train, self.own_x_train), pick(self.y_train),
                     pick(self.x_test, self.own_x_test), pick(self.y_test), self.own_x_train,
                     self.own_x_test)


def _inputs(x: Tensor | Sequence[Tensor]) -> tuple[Tensor, bool]:
    """Inputs shared by all models (a tensor) or each model's own (a sequence, stacked)."""
    if isinstance(x, Tensor):
        return x, False
    return torch.stack(list(x)), True


def _labels(y: Tensor | Sequence[Tensor], k: int) -> Tensor:
    """Labels as ``(K, n)``: ``(n,)`` shared by all, or ``(K, n)`` / K tensors each model's own."""
    if not isinstance(y, Tensor):
        y = torch.stack(list(y))
    return y.expand(k, y.shape[-1]) if y.dim() == 1 else y


class _SGDUpdate:
    """``torch.optim.SGD``'s update, one row per model: its lr, momentum and weight decay."""

    def __init__(self, settings: Sequence[TrainSettings], flat: Tensor) -> None:
        self.momentum = _column([s.momentum for s in settings], flat)
        self.weight_decay = _column([s.weight_decay for s in settings], flat)
        self.buf = torch.zeros_like(flat)  # momentum * 0 + g = g: SGD's first buf is g
        # SGD skips a zero weight decay or momentum; skipping it for all rows when all are zero
        # saves passes, and a zero kept for some rows changes nothing on a running model's
        # finite values (0 * p = 0, g + 0 = g)
        self.use_weight_decay = any(s.weight_decay != 0 for s in settings)
        self.use_momentum = any(s.momentum != 0 for s in settings)

    def keep(self, sel: Tensor) -> None:
        for name in ("momentum", "weight_decay", "buf"):
            setattr(self, name, getattr(self, name).index_select(0, sel))

    def step(self, flat: Tensor, grad: Tensor, lrs: Sequence[float], step: int,
             in_place: bool) -> Tensor:
        """The parameters after this step, written into ``flat`` when ``in_place``."""
        del step  # SGD's update does not depend on it
        if self.use_weight_decay:
            grad.addcmul_(self.weight_decay, flat)  # g + wd * p
        if self.use_momentum:
            self.buf.mul_(self.momentum).add_(grad)  # two roundings, as SGD's mul_, add_
            grad = self.buf
        neg_lr = _column([-lr for lr in lrs], flat)
        return flat.addcmul_(neg_lr, grad) if in_place else torch.addcmul(flat, neg_lr, grad)


class _AdamUpdate:
    """``torch.optim.Adam``'s update (its single-tensor path, torch's choice on the CPU; L2
    weight decay, no amsgrad), one row per model: its lr, betas and weight decay. Each of
    Adam's scalar operations becomes the same operation with a per-row column, in the order
    torch's kernels round (``addcmul``: ``(value * t1) * t2``; ``addcdiv``: ``(value * t1) /
    t2``), so rows agree with the optimizer to the bit on the CPU."""

    EPS = 1e-8  # torch.optim.Adam's default, which make_optimizer keeps

    def __init__(self, settings: Sequence[TrainSettings], flat: Tensor) -> None:
        self.betas = [s.betas for s in settings]
        self.one_minus_beta1 = _column([1 - b1 for b1, _ in self.betas], flat)
        self.beta2 = _column([b2 for _, b2 in self.betas], flat)
        self.one_minus_beta2 = _column([1 - b2 for _, b2 in self.betas], flat)
        self.weight_decay = _column([s.weight_decay for s in settings], flat)
        self.use_weight_decay = any(s.weight_decay != 0 for s in settings)
        self.exp_avg = torch.zeros_like(flat)
        self.exp_avg_sq = torch.zeros_like(flat)

    def keep(self, sel: Tensor) -> None:
        rows = sel.tolist()
        self.betas = [self.betas[r] for r in rows]
        for name in ("one_minus_beta1", "beta2", "one_minus_beta2", "weight_decay", "exp_avg",
                     "exp_avg_sq"):
            setattr(self, name, getattr(self, name).index_select(0, sel))

    def step(self, flat: Tensor, grad: Tensor, lrs: Sequence[float], step: int,
             in_place: bool) -> Tensor:
        if self.use_weight_decay:
            grad = grad.addcmul(self.weight_decay, flat)  # grad.add(param, alpha=wd)
        self.exp_avg.lerp_(grad, self.one_minus_beta1)
        self.exp_avg_sq.mul_(self.beta2).addcmul_(grad * self.one_minus_beta2, grad)
        # Adam's Python floats: step_size = lr / (1 - β1^t), √(1 - β2^t)
        neg_step_size = _column([-(lr / (1 - b1 ** step))
                                 for lr, (b1, _) in zip(lrs, self.betas, strict=True)], flat)
        bias_correction2_sqrt = _column([(1 - b2 ** step) ** 0.5 for _, b2 in self.betas], flat)
        denom = (self.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(self.EPS)
        numerator = self.exp_avg * neg_step_size
        return flat.addcdiv_(numerator, denom) if in_place else torch.addcdiv(flat, numerator,
                                                                              denom)


def _column(values: Sequence[float], like: Tensor) -> Tensor:
    """``(K, 1)`` in ``like``'s dtype and device, as an optimizer's Python-float hyperparameters
    become in its ops."""
    return torch.tensor(values, dtype=like.dtype, device=like.device).unsqueeze(1)


class _Stack:
    """The running models' training state, one row per model. Rows are dropped as models stop,
    so finished models cost nothing."""

    def __init__(self, models: Sequence[nn.Module], slots: Sequence[_Slot], data: _Data,
                 settings: Sequence[TrainSettings]) -> None:
        self.slots = tuple(slots)
        self.models = list(range(len(models)))  # models[r]: the model held in row r
        with torch.no_grad():
            self.flat = torch.stack([torch.cat([p.detach().reshape(-1) for _, p in _trainable(m)])
                                     for m in models])
            self.consts = {name: torch.stack([dict(_constants(m))[name].detach() for m in models])
                           for name, _ in _constants(models[0])}
        update = _AdamUpdate if settings[0].optimizer == "adam" else _SGDUpdate
        self.update: _SGDUpdate | _AdamUpdate = update(settings, self.flat)
        device = self.flat.device
        self.active = torch.ones(len(models), dtype=torch.bool, device=device)  # losses finite
        self.diverged_at = torch.zeros(len(models), dtype=torch.int64, device=device)
        self.data = data
        self.params = {s.name: s.view(self.flat) for s in self.slots}

    def keep(self, rows: list[int]) -> None:
        if len(rows) == len(self.models):
            return
        sel = torch.tensor(rows, dtype=torch.int64, device=self.flat.device)
        for name in ("flat", "active", "diverged_at"):
            setattr(self, name, getattr(self, name).index_select(0, sel))
        self.update.keep(sel)
        self.data = self.data.rows(sel)
        self.consts = {name: c.index_select(0, sel) for name, c in self.consts.items()}
        self.models = [self.models[r] for r in rows]
        self.params = {s.name: s.view(self.flat) for s in self.slots}

    def write_back(self, row: int, model: nn.Module) -> None:
        with torch.no_grad():
            for s, (_, p) in zip(self.slots, _trainable(model), strict=True):
                p.copy_(self.flat[row, s.offset:s.offset + s.numel].view(s.shape))


def _evaluate(engine: _Engine, params: dict[str, Tensor], consts: dict[str, Tensor], x: Tensor,
              own_x: bool, y: Tensor) -> tuple[list[float], list[float]]:
    """Each model's mean cross-entropy and accuracy on ``(x, y[k])`` (``x[k]`` with ``own_x``),
    as ``loop.evaluate``.

    The loss is summed per model by ``F.cross_entropy`` over the same 4096-example chunks as
    ``evaluate``, and the chunk sums in float64 as its Python float does, so the losses agree to
    the bit when the logits do. The forward runs in smaller pieces to bound memory.
    """
    k, n = y.shape
    width, n_classes = engine.widths(x)
    rows = max(1, min(_EVAL_ROWS, _EVAL_LOGITS // (k * n_classes)))
    piece = max(1, min(rows, _EVAL_ACTIVATIONS // (k * width)))
    piece = -(-rows // -(-rows // piece))  # equal pieces: 256 rows ran at half 250's speed here

    def examples(start: int, stop: int) -> Tensor:
        return x[:, start:stop] if own_x else x[start:stop]

    loss_sum = torch.zeros(k, dtype=torch.float64, device=y.device)
    correct = torch.zeros(k, dtype=torch.int64, device=y.device)
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        logits = torch.cat([engine.logits(params, consts, examples(i, min(i + piece, stop)), own_x)
                            for i in range(start, stop, piece)], dim=1)  # (K, rows, C)
        target = y[:, start:stop]
        loss_sum += torch.stack([F.cross_entropy(lg, t, reduction="sum")
                                 for lg, t in zip(logits, target, strict=True)]).double()
        correct += (logits.argmax(dim=-1) == target).sum(dim=1)
    return [v / n for v in loss_sum.tolist()], [c / n for c in correct.tolist()]


def _signature(model: nn.Module) -> tuple:
    return (type(model),
            [(n, tuple(p.shape), p.dtype, p.requires_grad) for n, p in model.named_parameters()],
            [(n, tuple(b.shape), b.dtype) for n, b in model.named_buffers()])


def _validate(models: Sequence[nn.Module], data: _Data, settings: Sequence[TrainSettings],
              generators: Sequence[torch.Generator]) -> None:
    k = len(models)
    if k == 0:
        raise ValueError("no models to train")
    if len(settings) != k or len(generators) != k:
        raise ValueError(f"got {k} models, {len(settings)} settings and {len(generators)} "
                         "generators; need one of each per model")
    for s in settings:
        if s.optimizer not in ("sgd", "adam") or s.loss != "cross_entropy":
            raise ValueError("the ensemble trains with SGD or Adam on cross-entropy; got "
                             f"optimizer {s.optimizer!r} and loss {s.loss!r} (train_classifier "
                             "does those)")
    for name in ("optimizer", "eval_every", "batch_size"):
        values = sorted({getattr(s, name) for s in settings})
        if len(values) > 1:
            raise ValueError(f"all models must share {name} (the ensemble steps and evaluates "
                             f"them together), got {values}")
    for split, own in (("train", data.own_x_train), ("test", data.own_x_test)):
        x, y = getattr(data, f"x_{split}"), getattr(data, f"y_{split}")
        if own and len(x) != k:
            raise ValueError(f"x_{split}: got {len(x)} input sets for {k} models; pass one "
                             "tensor shared by all, or one per model")
        n = x.shape[1] if own else len(x)
        if tuple(y.shape) != (k, n):
            raise ValueError(f"y_{split} must have shape ({n},) or ({k}, {n}), got "
                             f"{tuple(y.shape)}")
    dims = {data.x_train.dim() - data.own_x_train, data.x_test.dim() - data.own_x_test}
    if len(dims) > 1 or (data.x_train.shape[1 + data.own_x_train:]
                         != data.x_test.shape[1 + data.own_x_test:]):
        raise ValueError("training and test examples must have one shape")
    signature = _signature(models[0])
    if any(_signature(m) != signature for m in models[1:]):
        raise ValueError("all models must have the same architecture: type, and parameter and "
                         "buffer names, shapes, dtypes and requires_grad")
    trainable = _trainable(models[0])
    if not trainable:
        raise ValueError("the models have no trainable parameters")
    if len({p.dtype for _, p in trainable}) > 1:
        raise ValueError("all trainable parameters must share one dtype")
    device = data.x_train.device
    if any(t.device != device for t in (data.y_train, data.x_test, data.y_test)):
        raise ValueError("x_train, y_train, x_test and y_test must be on one device")
    if any(t.device != device for m in models for t in (*m.parameters(), *m.buffers())):
        raise ValueError(f"every model must be on the data's device ({device})")
    if len({g.device for g in generators}) > 1:
        raise ValueError("all generators must be on one device")


def train_classifier_ensemble(models: Sequence[nn.Module], x_train: Tensor | Sequence[Tensor],
                              y_train: Tensor | Sequence[Tensor],
                              x_test: Tensor | Sequence[Tensor], y_test: Tensor | Sequence[Tensor],
                              settings: Sequence[TrainSettings],
                              generators: Sequence[torch.Generator], *,
                              method: Method = "auto") -> list[TrainResult]:
    """Train every ``models[k]`` with ``settings[k]`` and ``generators[k]``, all at once.

    Result k is what ``train_classifier(models[k], x_train[k], y_train[k], x_test[k],
    y_test[k], settings[k], generators[k])`` returns (a tensor argument standing for every k),
    up to float32 rounding where batched kernels sum in another order than the loop's: the same
    minibatches, status, ``steps``, ``fit_step``, ``diverged_step`` and evaluation steps, and
    metrics equal to ~1e-6 relative (to the bit on CPU with MKL, as measured). A model that
    fits, runs out of steps or diverges stops updating and recording while the others go on. On
    return each model holds its trained parameters, as after the loop, and is left in training
    mode unless it fitted at step 0.

    The loop checks every step's loss for a non-finite value. Here that check does not sync a GPU
    with the host each step: each step records on the device which models' losses were finite,
    freezes the others' parameters, and notes the step of each model's first non-finite loss;
    the flags are read at evaluation steps. ``diverged_step``, ``steps`` and a diverged model's
    parameters are therefore the loop's, but its generator may have been advanced past them.

    Args:
        models: K modules of one architecture, on the data's device. Their forward must be a pure
            function of parameters, buffers and input (no dropout, no batch-norm statistics).
        x_train: Training inputs: one tensor ``(n, ...)`` shared by all models, or a sequence of
            K tensors of one shape, each model's own (a seed's own data draw).
        y_train: Training labels: ``(n,)`` for all, or ``(K, n)`` (or K tensors), one row per
            model (its label-noise draw, its own data).
        x_test: Test inputs ``(n_test, ...)`` for all, or K tensors, each model's own.
        y_test: Test labels ``(n_test,)`` for all, or ``(K, n_test)`` (or K tensors).
        settings: One per model: SGD or Adam (one of them for all) on cross-entropy, any lr
            schedule. ``eval_every`` and ``batch_size`` must be the same for all.
        generators: One per model, all on one device; each draws its model's minibatches.
        method: ``"bmm"``: batched matmuls and a hand-written backward, for :class:`MLP` or an
            ``nn.Sequential`` of Linear/ReLU/Tanh/GELU layers; ``"vmap"``:
            ``vmap(functional_call)``, for any architecture; ``"auto"``: ``"bmm"`` where it
            applies, else ``"vmap"``.

    Returns:
        One :class:`TrainResult` per model, in order.

    Raises:
        ValueError: On mismatched lengths, optimizers, ``eval_every`` or ``batch_size``; on an
            optimizer other than SGD or Adam or a loss other than cross-entropy; on different
            architectures or devices; on data of the wrong shape; or on ``method="bmm"`` for a
            model it does not cover.
    """
    k = len(models)
    (x_tr, own_train), (x_te, own_test) = _inputs(x_train), _inputs(x_test)
    data = _Data(x_tr, _labels(y_train, k), x_te, _labels(y_test, k), own_train, own_test)
    _validate(models, data, settings, generators)
    slots = _layout(models[0])
    engine = _make_engine(models[0], slots, method, x_tr.dim() - 1 - own_train)
    state = _Stack(models, slots, data, settings)
    n, device = x_tr.shape[own_train], x_tr.device
    eval_every = settings[0].eval_every
    assert settings[0].batch_size is not None  # SGD's and Adam's, by TrainSettings' validation
    batch_size = min(settings[0].batch_size, n)
    results: list[TrainResult | None] = [None] * k
    histories: list[list[EvalRow]] = [[] for _ in models]

    def record(step: int, rows: list[int]) -> list[EvalRow]:
        """Evaluate the models in ``rows`` at ``step``; append to their histories."""
        params, consts, d = state.params, state.consts, state.data
        if len(rows) < len(state.models):
            sel = torch.tensor(rows, dtype=torch.int64, device=device)
            params = {name: p.index_select(0, sel) for name, p in params.items()}
            consts = {name: c.index_select(0, sel) for name, c in consts.items()}
            d = d.rows(sel)
        train = _evaluate(engine, params, consts, d.x_train, d.own_x_train, d.y_train)
        test = _evaluate(engine, params, consts, d.x_test, d.own_x_test, d.y_test)
        out = []
        for i, r in enumerate(rows):
            row = EvalRow(step, train[0][i], train[1][i], test[0][i], test[1][i])
            histories[state.models[r]].append(row)
            out.append(row)
        return out

    def finish(row: int, status: str, steps: int, fit_step: int | None,
               diverged_step: int | None) -> None:
        m = state.models[row]
        results[m] = TrainResult(status, steps, fit_step, diverged_step, tuple(histories[m]))
        state.write_back(row, models[m])

    def fitted(row: EvalRow, m: int) -> bool:
        return reached_stop(row, settings[m])

    def drop_finished() -> None:
        state.keep([r for r, m in enumerate(state.models) if results[m] is None])

    for r, row in enumerate(record(0, list(range(k)))):
        if fitted(row, state.models[r]):
            finish(r, "fitted", 0, 0, None)
    drop_finished()
    samplers: dict[int, MinibatchSampler] = {}
    for m in state.models:
        models[m].train()  # as the loop does once past step 0
        samplers[m] = MinibatchSampler(n, batch_size, generators[m])
    scheduled = any(s.schedule != "constant" for s in settings)
    on_cpu = device.type == "cpu"
    # page faults are the CPU allocator's problem; a GPU wants the largest batches it can get
    group_size = (max(1, _STEP_ACTIVATIONS // (batch_size * engine.widths(x_tr)[0]))
                  if on_cpu else k)

    # every model stops by its own max_steps (budget), so the group by the largest
    last = max(s.max_steps for s in settings)
    for step in progress(range(1, last + 1), f"training {k} models", unit="step"):
        if not state.models:
            break
        idx = torch.stack([samplers[m].next() for m in state.models]).to(device)  # (K, B)
        d = state.data
        if d.own_x_train:  # row r's batch from its own inputs
            xb = d.x_train[torch.arange(len(idx), device=device).unsqueeze(1), idx]
        else:
            xb = d.x_train.index_select(0, idx.reshape(-1))
            xb = xb.view(len(idx), batch_size, *d.x_train.shape[1:])
        yb = d.y_train.gather(1, idx)
        groups = _groups(len(idx), group_size)
        if len(groups) == 1:
            loss, grad = engine.loss_and_grad(state.params, state.consts, xb, yb)
        else:
            parts = [engine.loss_and_grad({name: p[g] for name, p in state.params.items()},
                                          {name: c[g] for name, c in state.consts.items()},
                                          xb[g], yb[g]) for g in groups]
            loss = torch.cat([part[0] for part in parts])
            grad = torch.cat([part[1] for part in parts])
        # the loop's lr for this step, s.lr * factor, as a Python float
        lrs = [settings[m].lr * lr_factor(settings[m], step) if scheduled else settings[m].lr
               for m in state.models]
        with torch.no_grad():
            finite = torch.isfinite(loss)
            state.diverged_at = torch.where(state.active & ~finite, step, state.diverged_at)
            state.active &= finite
            # A model whose loss was not finite keeps its parameters, as the loop stops before
            # that update; its row computes garbage until the next evaluation step drops it.
            # Updates are in place, so the parameter views stay valid. On the CPU, reading a
            # flag costs no sync, and skipping the masked select (slow there) while every loss
            # is finite saved ~4% of a step.
            if on_cpu and bool(state.active.all()):
                state.update.step(state.flat, grad, lrs, step, in_place=True)
            else:
                torch.where(state.active.unsqueeze(1),
                            state.update.step(state.flat, grad, lrs, step, in_place=False),
                            state.flat, out=state.flat)

        due = [r for r, m in enumerate(state.models)
               if step % eval_every == 0 or step == settings[m].max_steps]
        if not due:
            continue
        # the one sync a GPU waits for: which models met a non-finite loss since the last one
        finite_so_far = state.active.tolist()
        first_bad = state.diverged_at.tolist()
        for r, ok in enumerate(finite_so_far):
            if not ok:
                finish(r, "diverged", first_bad[r] - 1, None, first_bad[r])
        due = [r for r in due if finite_so_far[r]]
        for r, row in zip(due, record(step, due) if due else [], strict=True):
            m = state.models[r]
            if not all(map(math.isfinite, (row.train_loss, row.test_loss))):
                finish(r, "diverged", step, None, step)
            elif fitted(row, m):
                finish(r, "fitted", step, step, None)
            elif step == settings[m].max_steps:
                finish(r, "budget", step, None, None)
        drop_finished()

    assert all(result is not None for result in results)
    return [result for result in results if result is not None]


__all__ = ["Method", "train_classifier_ensemble"]
