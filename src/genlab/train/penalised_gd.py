"""Small-batch SGD and full-batch gradient descent in Geiping et al.'s recipe ("Stochastic
training is not necessary for generalization", ICLR 2022; their code, ``fullbatch/training``).

Both modes use torch.optim.SGD (Nesterov momentum, weight decay) with a linear warm-up from 0
and then a cosine decay of the step size, one schedule step per epoch (SGD) or per full-batch
step (GD); see :class:`~genlab.train.penalised_gd_settings.PenalisedGDRecipe`.

Full batch, the training set is cut once into fixed consecutive blocks B_1..B_m of equal size
(their unshuffled data loader) and the step's gradient is the mean over blocks of

    g_b + (α·η_t/4)·H_b g_b = ∇[L_b + (α·η_t/8)‖∇L_b‖²],   g_b = ∇L_b, H_b = ∇²L_b,

the explicit form of SGD's implicit regulariser (Smith et al. 2021) that their
``GradRegularizer`` adds with strength α at the current step size η_t. Their default computes
H_b g_b by a forward finite difference; here it is exact (double backward through
:func:`torch.func.grad`, vectorised over blocks: their ``autograd`` option). The mean gradient's
L2 norm is then clipped to ``grad_clip`` when longer, before SGD adds the weight decay. With
α = 0 the blocks' mean gradient is the full-batch gradient, computed in one pass.

SGD draws minibatches by genlab's seeded sampler (a fresh permutation each epoch, the last
partial batch dropped), clips each minibatch's gradient when ``grad_clip`` is set (their
stochastic branch) and sets the step size once per epoch.

Evaluation rows (every ``eval_every`` schedule steps, and at step 0 and the end) hold the train
and test loss and accuracy of the model in eval mode, and as probes the step size, the last
step's gradient norm before clipping and, full batch with a penalty, the mean block ‖∇L_b‖².
A non-finite loss ends the run as ``diverged``. Deterministic on a CPU.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, grad_and_value, vmap
from torch.nn import functional as F

from genlab.progress import progress
from genlab.train.loop import EvalRow, MinibatchSampler, TrainResult, evaluate
from genlab.train.penalised_gd_settings import PenalisedGDRecipe

LOSS = "cross_entropy"


def step_size(recipe: PenalisedGDRecipe, t: int) -> float:
    """η at schedule step ``t`` (0-based): ``lr·t/warmup`` during the warm-up (0 at t = 0, as
    their GradualWarmupScheduler), then ``lr·½(1 + cos(π·(t − warmup)/horizon))`` with horizon
    ``cosine_steps`` (default ``steps``)."""
    if t < recipe.warmup:
        return recipe.lr * t / recipe.warmup
    horizon = recipe.cosine_steps or recipe.steps
    return recipe.lr * 0.5 * (1.0 + math.cos(math.pi * (t - recipe.warmup) / horizon))


def blocks(x: Tensor, y: Tensor, block_size: int) -> tuple[Tensor, Tensor]:
    """(x, y) as m fixed consecutive blocks, shapes (m, block_size, ...) and (m, block_size).

    Raises:
        ValueError: ``block_size`` does not divide the number of examples.
    """
    n = len(x)
    if n % block_size:
        raise ValueError(f"block_size {block_size} does not divide the {n} training examples: "
                         "the penalty's blocks must have equal sizes")
    return x.reshape(n // block_size, block_size, *x.shape[1:]), y.reshape(n // block_size, -1)


def penalised_gradient(model: nn.Module, xb: Tensor, yb: Tensor, coefficient: float
                       ) -> tuple[dict[str, Tensor], float, float]:
    """The mean over blocks of ∇[L_b + (c/2)‖∇L_b‖²] = g_b + c·H_b g_b, with c = ``coefficient``
    (α·η_t/4 in the recipe), exact; returns it by parameter name, the mean block loss (the
    full-batch loss) and the mean ‖∇L_b‖²."""
    params = {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}

    def block_loss(p: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(functional_call(model, p, (x,)), y)

    def block_objective(p: dict[str, Tensor], x: Tensor, y: Tensor
                        ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        g, loss = grad_and_value(block_loss)(p, x, y)
        squared_norm = sum(v.square().sum() for v in g.values())
        return loss + 0.5 * coefficient * squared_norm, (loss, squared_norm)

    def objective(p: dict[str, Tensor]) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        values, (losses, squared_norms) = vmap(block_objective, in_dims=(None, 0, 0))(p, xb, yb)
        return values.mean(), (losses.mean(), squared_norms.mean())

    gradient, (loss, squared_norm) = grad(objective, has_aux=True)(params)
    return gradient, loss.item(), squared_norm.item()


def _clip(params: list[nn.Parameter], max_norm: float | None) -> float:
    """Rescale the parameters' ``.grad`` to L2 norm ``max_norm`` when longer (their rule:
    factor max_norm / (norm + 1e-6)); returns the norm before clipping."""
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])).item()
    if max_norm is not None and norm > max_norm:
        for p in params:
            p.grad.mul_(max_norm / (norm + 1e-6))
    return norm


def train(model: nn.Module, x_train: Tensor, y_train: Tensor, x_test: Tensor, y_test: Tensor,
          recipe: PenalisedGDRecipe, generator: torch.Generator) -> TrainResult:
    """Train ``model`` in place by ``recipe`` for all of its schedule steps (no early stop); the
    result's ``fit_step`` is None and its status ``budget`` or ``diverged``."""
    r = recipe
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=r.lr, momentum=r.momentum, nesterov=r.nesterov,
                                weight_decay=r.weight_decay)
    if r.stochastic:
        sampler = MinibatchSampler(len(x_train), r.batch_size, generator)
        per_epoch = len(x_train) // sampler.batch_size
    elif r.penalty:
        xb, yb = blocks(x_train, y_train, r.block_size)
    history: list[EvalRow] = []
    last = {"grad_norm": math.nan, "block_grad_sq": math.nan}

    def record(t: int, lr: float) -> EvalRow:
        probes = {"lr": lr, **last}
        row = EvalRow(t, *evaluate(model, x_train, y_train, LOSS),
                      *evaluate(model, x_test, y_test, LOSS), probes=probes)
        history.append(row)
        return row

    def apply(gradient: dict[str, Tensor] | None) -> None:
        if gradient is not None:
            for name, p in model.named_parameters():
                if p.requires_grad:
                    p.grad = gradient[name]
        last["grad_norm"] = _clip(params, r.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    record(0, step_size(r, 0))
    model.train()
    for t in progress(range(r.steps), "training", unit="epoch" if r.stochastic else "step"):
        lr = step_size(r, t)
        for group in optimizer.param_groups:
            group["lr"] = lr
        if r.stochastic:
            for _ in range(per_epoch):
                idx = sampler.next()
                loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
                if not math.isfinite(loss.item()):
                    return TrainResult("diverged", t, None, t + 1, tuple(history))
                loss.backward()
                apply(None)
        else:
            if r.penalty:
                gradient, loss_value, last["block_grad_sq"] = penalised_gradient(
                    model, xb, yb, r.penalty * lr / 4)
            else:
                loss = F.cross_entropy(model(x_train), y_train)
                loss_value = loss.item()
                gradient = dict(zip((n for n, p in model.named_parameters() if p.requires_grad),
                                    torch.autograd.grad(loss, params), strict=True))
            if not math.isfinite(loss_value):
                return TrainResult("diverged", t, None, t + 1, tuple(history))
            apply(gradient)
        step = t + 1
        if step % r.eval_every == 0 or step == r.steps:
            row = record(step, lr)
            if not all(map(math.isfinite, (row.train_loss, row.test_loss))):
                return TrainResult("diverged", step, None, step, tuple(history))
    return TrainResult("budget", r.steps, None, None, tuple(history))
