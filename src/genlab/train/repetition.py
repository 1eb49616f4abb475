"""Train a classifier for a fixed number of steps on a stream of examples, some of them repeated
(Charton & Kempe 2024, "Emergent properties with repeated examples").

Every regime reads a prefix of one stream of distinct training examples (the dataset's training
split, in the order drawn):

- **data budget** D: the first D examples, in epochs of fresh permutations, so each is seen
  about steps * batch / D times; D = steps * batch reads every example exactly once
  (single-use);
- **two-set**: each example of a batch is, with probability p, a uniform draw from the first S
  examples (the repeated set) and otherwise the next unread example after them (read once).

The loop is Adam on cross-entropy with a constant step size, as the paper's; it evaluates test
accuracy and the accuracy on the examples the run repeats every ``eval_every`` steps. Pure:
tensors and settings in, a :class:`genlab.train.loop.TrainResult` out.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from genlab.losses import loss_value
from genlab.progress import progress
from genlab.train.loop import EvalRow, MinibatchSampler, TrainResult, evaluate
from genlab.train.repetition_settings import Regime, RepetitionRecipe


class TwoSetSampler:
    """Batches of two-set training: each slot a repeated example with probability ``p`` (uniform
    over the first ``size`` indices), else the next fresh index after them."""

    def __init__(self, size: int, p: float, batch_size: int, n_available: int,
                 generator: torch.Generator) -> None:
        self.size, self.p, self.batch_size = size, p, batch_size
        self.n_available, self.generator = n_available, generator
        self.next_fresh = size  # the first index the repeated set does not hold

    def next(self) -> torch.Tensor:
        g = self.generator
        repeated = torch.rand(self.batch_size, generator=g, device=g.device) < self.p
        idx = torch.randint(0, self.size, (self.batch_size,), generator=g, device=g.device)
        n_fresh = int((~repeated).sum())
        if self.next_fresh + n_fresh > self.n_available:
            raise ValueError(f"the stream's {self.n_available} examples ran out: two-set "
                             "training needs repeated_set + steps * batch_size of them")
        idx[~repeated] = torch.arange(self.next_fresh, self.next_fresh + n_fresh, device=g.device)
        self.next_fresh += n_fresh
        return idx


def sampler_for(regime: Regime, recipe: RepetitionRecipe, n_available: int,
                generator: torch.Generator) -> MinibatchSampler | TwoSetSampler:
    """The batches a regime reads from a stream of ``n_available`` examples."""
    if regime.repeated_set is not None:
        return TwoSetSampler(regime.repeated_set, regime.repeated_prob, recipe.batch_size,
                             n_available, generator)
    budget = regime.budget(recipe)
    if budget > n_available:
        raise ValueError(f"data budget {budget} exceeds the stream's {n_available} examples")
    return MinibatchSampler(budget, recipe.batch_size, generator)


def repeated_examples(regime: Regime, recipe: RepetitionRecipe) -> int:
    """How many examples at the stream's head the regime reads more than once (for a single-use
    run: none, and its 'seen' accuracy is on examples read once)."""
    return regime.repeated_set if regime.repeated_set is not None else regime.budget(recipe)


def train_on_stream(model: nn.Module, x_stream: torch.Tensor, y_stream: torch.Tensor,
                    x_test: torch.Tensor, y_test: torch.Tensor, regime: Regime,
                    recipe: RepetitionRecipe, generator: torch.Generator) -> TrainResult:
    """Train ``model`` for ``recipe.steps`` steps on the regime's batches from the stream.

    History rows (step 0, every ``eval_every`` steps and the last) hold the test loss and
    accuracy and, as ``train_*``, those on the first ``recipe.n_eval_seen`` examples the run
    reads (the repeated set for two-set training, the data budget's head otherwise). A non-finite
    loss stops the run as ``diverged``; otherwise the status is ``budget``.
    """
    sampler = sampler_for(regime, recipe, len(x_stream), generator)
    n_seen = min(recipe.n_eval_seen, repeated_examples(regime, recipe))
    x_seen, y_seen = x_stream[:n_seen], y_stream[:n_seen]
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.lr, betas=recipe.betas,
                                 weight_decay=recipe.weight_decay)
    history: list[EvalRow] = []

    def record(step: int) -> EvalRow:
        row = EvalRow(step, *evaluate(model, x_seen, y_seen), *evaluate(model, x_test, y_test))
        history.append(row)
        return row

    record(0)
    model.train()
    for step in progress(range(1, recipe.steps + 1), "training", unit="step"):
        idx = sampler.next()
        loss = loss_value("cross_entropy", model(x_stream[idx]), y_stream[idx])
        if not math.isfinite(loss.item()):
            return TrainResult("diverged", step - 1, None, step, tuple(history))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % recipe.eval_every == 0 or step == recipe.steps:
            row = record(step)
            if not math.isfinite(row.test_loss):
                return TrainResult("diverged", step, None, step, tuple(history))
    return TrainResult("budget", recipe.steps, None, None, tuple(history))
