"""Train one classifier (SGD, full-batch GD or Adam), evaluating on a fixed cadence.

The loop is pure: tensors and settings in, a frozen :class:`TrainResult` out. It never touches
disk; the CLI writes the artifacts.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from genlab.losses import correct_count, loss_value
from genlab.progress import progress
from genlab.settings import TrainSettings

Probes = Callable[[nn.Module], Mapping[str, float]]


@dataclass(frozen=True)
class EvalRow:
    step: int
    train_loss: float
    train_acc: float
    test_loss: float
    test_acc: float
    probes: Mapping[str, float] = field(default_factory=dict)  # extra quantities, same cadence

    def as_dict(self) -> dict[str, Any]:
        """One flat history row: the fixed columns, then the probes."""
        row = asdict(self)
        probes = row.pop("probes")
        return {**row, **probes}


@dataclass(frozen=True)
class TrainResult:
    status: str  # "fitted" (met the stop rule, reached_stop), "budget" (out of steps), "diverged"
    steps: int  # optimizer steps taken
    fit_step: int | None  # first evaluated step that met the stop rule
    diverged_step: int | None
    history: tuple[EvalRow, ...] = field(repr=False)

    @property
    def final(self) -> EvalRow:
        return self.history[-1]


def reached_stop(row: EvalRow, s: TrainSettings) -> bool:
    """Whether an evaluation meets the recipe's stop rule: train accuracy at or above
    ``stop_at_train_acc``, or train loss at or below ``stop_at_train_loss`` (either one)."""
    return ((s.stop_at_train_acc is not None and row.train_acc >= s.stop_at_train_acc)
            or (s.stop_at_train_loss is not None and row.train_loss <= s.stop_at_train_loss))


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss: str = "cross_entropy",
             batch_size: int = 4096) -> tuple[float, float]:
    """Mean loss and accuracy over (x, y), in eval mode, in chunks to bound memory. Accuracy is
    NaN for regression targets, where it has no meaning."""
    was_training = model.training
    model.eval()
    loss_sum, correct = 0.0, 0
    for start in range(0, len(x), batch_size):
        output = model(x[start:start + batch_size])
        target = y[start:start + batch_size]
        loss_sum += loss_value(loss, output, target, reduction="sum").item()
        if not target.is_floating_point():
            correct += correct_count(loss, output, target)
    model.train(was_training)
    accuracy = math.nan if y.is_floating_point() else correct / len(x)
    return loss_sum / len(x), accuracy


def make_optimizer(params, s: TrainSettings) -> torch.optim.Optimizer:
    if s.optimizer == "adam":
        return torch.optim.Adam(params, lr=s.lr, betas=s.betas, weight_decay=s.weight_decay)
    if s.optimizer == "layca":
        from genlab.train.layca import Layca

        return Layca(params, lr=s.lr, momentum=s.momentum)
    return torch.optim.SGD(params, lr=s.lr, momentum=s.momentum, weight_decay=s.weight_decay)


def lr_factor(s: TrainSettings, step: int) -> float:
    """The schedule's multiplier of ``lr`` for the update that ends at ``step`` (1-based)."""
    if s.schedule == "step":
        return s.step_gamma ** ((step - 1) // s.step_every)
    if s.schedule == "multistep":
        return s.step_gamma ** sum(step > at for at in s.step_at)
    if s.schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * (step - 1) / s.max_steps))
    return 1.0


class MinibatchSampler:
    """Minibatch indices: a fresh permutation each epoch, no example repeated within one (the last
    partial batch of an epoch is dropped). Its state is small and exact, so training resumes from
    a checkpoint on the very batch it would have drawn."""

    def __init__(self, n: int, batch_size: int, generator: torch.Generator) -> None:
        self.n, self.batch_size, self.generator = n, min(batch_size, n), generator
        self.order: torch.Tensor | None = None  # this epoch's permutation
        self.position = 0  # index into it of the next batch

    def next(self) -> torch.Tensor:
        if self.order is None or self.position + self.batch_size > self.n:
            self.order = torch.randperm(self.n, generator=self.generator,
                                        device=self.generator.device)
            self.position = 0
        batch = self.order[self.position:self.position + self.batch_size]
        self.position += self.batch_size
        return batch


def _batches(n: int, batch_size: int, generator: torch.Generator):
    """The sampler's batches as an endless iterator."""
    sampler = MinibatchSampler(n, batch_size, generator)
    while True:
        yield sampler.next()


@dataclass(frozen=True)
class Checkpoint:
    """Everything needed to continue a run bit-exactly from an evaluation step."""

    step: int
    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]  # torch's optimizer state_dict
    generator: torch.Tensor  # torch.Generator.get_state()
    order: torch.Tensor | None  # the sampler's current epoch
    position: int
    history: tuple[EvalRow, ...]


@dataclass(frozen=True)
class Checkpointing:
    """When to save (``due(step)``, asked at evaluation steps) and how (``save``); ``resume`` is
    the checkpoint to start from, if any."""

    save: Callable[[Checkpoint], None]
    due: Callable[[int], bool]
    resume: Checkpoint | None = None


def train_classifier(model: nn.Module, x_train: torch.Tensor, y_train: torch.Tensor,
                     x_test: torch.Tensor, y_test: torch.Tensor, settings: TrainSettings,
                     generator: torch.Generator, probes: Probes | None = None,
                     checkpointing: Checkpointing | None = None) -> TrainResult:
    """Train until train accuracy reaches ``stop_at_train_acc`` (or the loss falls to
    ``stop_at_train_loss``) or the budget ends.

    Evaluation happens at step 0 and every ``eval_every`` steps (and at the last step), so
    ``fit_step`` is resolved to ``eval_every`` steps, as in Zhang et al.'s protocol; ``probes``
    (called on the model in eval mode) add quantities to the same rows. A non-finite loss stops
    the run as ``diverged`` and keeps the history up to that point. With ``checkpointing``,
    the state is handed to ``save`` at evaluation steps where ``due``; a run resumed from one
    ends exactly as an uninterrupted run would.
    """
    s = settings
    optimizer = make_optimizer(model.parameters(), s)
    history: list[EvalRow] = []

    def record(step: int) -> EvalRow:
        extra: Mapping[str, float] = {}
        if probes is not None:
            was_training = model.training
            model.eval()
            extra = dict(probes(model))
            model.train(was_training)
        row = EvalRow(step, *evaluate(model, x_train, y_train, s.loss),
                      *evaluate(model, x_test, y_test, s.loss), probes=extra)
        history.append(row)
        return row

    def fitted(row: EvalRow) -> bool:
        return reached_stop(row, s)

    full_batch = s.optimizer == "gd"
    sampler = None if full_batch else MinibatchSampler(len(x_train), s.batch_size, generator)
    resume = checkpointing.resume if checkpointing else None
    if resume is None:
        row = record(0)
        if fitted(row):
            return TrainResult("fitted", 0, 0, None, tuple(history))
        start = 1
    else:
        model.load_state_dict(resume.model)
        optimizer.load_state_dict(resume.optimizer)
        generator.set_state(resume.generator)
        if sampler is not None:
            sampler.order, sampler.position = resume.order, resume.position
        history.extend(resume.history)
        start = resume.step + 1

    def save(step: int) -> None:
        checkpointing.save(Checkpoint(
            step=step, model={k: v.detach().clone() for k, v in model.state_dict().items()},
            optimizer=copy.deepcopy(optimizer.state_dict()), generator=generator.get_state(),
            order=None if sampler is None or sampler.order is None else sampler.order.clone(),
            position=0 if sampler is None else sampler.position, history=tuple(history)))

    model.train()
    for step in progress(range(start, s.max_steps + 1), "training", unit="step"):
        if s.schedule != "constant":
            for group in optimizer.param_groups:
                group["lr"] = s.lr * lr_factor(s, step)
        if full_batch:
            loss = loss_value(s.loss, model(x_train), y_train)
        else:
            idx = sampler.next()
            loss = loss_value(s.loss, model(x_train[idx]), y_train[idx])
        if not math.isfinite(loss.item()):
            return TrainResult("diverged", step - 1, None, step, tuple(history))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % s.eval_every == 0 or step == s.max_steps:
            row = record(step)
            if not all(map(math.isfinite, (row.train_loss, row.test_loss))):  # acc may be NaN
                return TrainResult("diverged", step, None, step, tuple(history))
            if fitted(row):
                return TrainResult("fitted", step, step, None, tuple(history))
            if checkpointing is not None and step < s.max_steps and checkpointing.due(step):
                save(step)
    return TrainResult("budget", s.max_steps, None, None, tuple(history))
