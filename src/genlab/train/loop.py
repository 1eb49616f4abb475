"""Train one classifier with minibatch SGD, evaluating on a fixed cadence.

The loop is pure: tensors and settings in, a frozen :class:`TrainResult` out. It never touches
disk; the CLI writes the artifacts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from genlab.settings import SGDSettings


@dataclass(frozen=True)
class EvalRow:
    step: int
    train_loss: float
    train_acc: float
    test_loss: float
    test_acc: float


@dataclass(frozen=True)
class TrainResult:
    status: str  # "fitted" (reached stop_at_train_acc), "budget" (ran out of steps), "diverged"
    steps: int  # optimizer steps taken
    fit_step: int | None  # first evaluated step with train accuracy >= the stop threshold
    diverged_step: int | None
    history: tuple[EvalRow, ...] = field(repr=False)

    @property
    def final(self) -> EvalRow:
        return self.history[-1]


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
             batch_size: int = 4096) -> tuple[float, float]:
    """Mean cross-entropy and accuracy over (x, y), in eval mode, in chunks to bound memory."""
    was_training = model.training
    model.eval()
    loss_sum, correct = 0.0, 0
    for start in range(0, len(x), batch_size):
        logits = model(x[start:start + batch_size])
        target = y[start:start + batch_size]
        loss_sum += F.cross_entropy(logits, target, reduction="sum").item()
        correct += (logits.argmax(dim=1) == target).sum().item()
    model.train(was_training)
    return loss_sum / len(x), correct / len(x)


def _batches(n: int, batch_size: int, generator: torch.Generator):
    """Endless minibatch indices: a fresh permutation each epoch, no example repeated within one."""
    while True:
        order = torch.randperm(n, generator=generator, device=generator.device)
        for start in range(0, n - batch_size + 1, batch_size):
            yield order[start:start + batch_size]
        if n < batch_size:
            yield order


def train_classifier(model: nn.Module, x_train: torch.Tensor, y_train: torch.Tensor,
                     x_test: torch.Tensor, y_test: torch.Tensor, settings: SGDSettings,
                     generator: torch.Generator) -> TrainResult:
    """SGD on cross-entropy until train accuracy reaches ``stop_at_train_acc`` or the budget ends.

    Evaluation happens at step 0 and every ``eval_every`` steps (and at the last step), so
    ``fit_step`` is resolved to ``eval_every`` steps, as in Zhang et al.'s protocol. A non-finite
    loss stops the run as ``diverged`` and keeps the history up to that point.
    """
    s = settings
    optimizer = torch.optim.SGD(model.parameters(), lr=s.lr, momentum=s.momentum,
                                weight_decay=s.weight_decay)
    history: list[EvalRow] = []

    def record(step: int) -> EvalRow:
        row = EvalRow(step, *evaluate(model, x_train, y_train), *evaluate(model, x_test, y_test))
        history.append(row)
        return row

    def fitted(row: EvalRow) -> bool:
        return s.stop_at_train_acc is not None and row.train_acc >= s.stop_at_train_acc

    row = record(0)
    if fitted(row):
        return TrainResult("fitted", 0, 0, None, tuple(history))
    batches = _batches(len(x_train), min(s.batch_size, len(x_train)), generator)
    model.train()
    for step in range(1, s.max_steps + 1):
        idx = next(batches)
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        if not math.isfinite(loss.item()):
            return TrainResult("diverged", step - 1, None, step, tuple(history))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % s.eval_every == 0 or step == s.max_steps:
            row = record(step)
            if not all(map(math.isfinite, (row.train_loss, row.test_loss))):
                return TrainResult("diverged", step, None, step, tuple(history))
            if fitted(row):
                return TrainResult("fitted", step, step, None, tuple(history))
    return TrainResult("budget", s.max_steps, None, None, tuple(history))
