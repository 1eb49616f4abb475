from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError
from torch.nn import functional as F

from genlab.data.gaussian_mixture import gaussian_mixture
from genlab.models.registry import build_model
from genlab.settings import MLPSettings, TrainSettings
from genlab.train.loop import evaluate, lr_factor, train_classifier


def _setup(mixture, mlp, seed: int = 0):
    ds = gaussian_mixture(mixture)
    torch.manual_seed(seed)
    model = build_model("mlp", mlp, ds.train.x.shape[1], ds.n_classes)
    tensors = [torch.from_numpy(a) for a in (ds.train.x, ds.train.y, ds.test.x, ds.test.y)]
    return model, tensors


def test_fits_training_set_and_records_fit_step(tiny_mixture, tiny_mlp, tiny_sgd) -> None:
    model, tensors = _setup(tiny_mixture, tiny_mlp)
    result = train_classifier(model, *tensors, tiny_sgd, torch.Generator().manual_seed(0))
    assert result.status == "fitted"
    assert result.fit_step == result.steps and result.fit_step % tiny_sgd.eval_every == 0
    assert result.final.train_acc == 1.0
    # the history is the evaluation cadence, starting at step 0
    assert [r.step for r in result.history] == list(range(0, result.steps + 1, 10))
    # what the history says at the end is what the model does
    assert evaluate(model, tensors[0], tensors[1]) == (result.final.train_loss, 1.0)


def test_budget_without_stop(tiny_mixture, tiny_mlp, tiny_sgd) -> None:
    model, tensors = _setup(tiny_mixture, tiny_mlp)
    settings = tiny_sgd.model_copy(update={"stop_at_train_acc": None, "max_steps": 25})
    result = train_classifier(model, *tensors, settings, torch.Generator().manual_seed(0))
    assert result.status == "budget" and result.fit_step is None
    assert [r.step for r in result.history] == [0, 10, 20, 25]


def test_divergence_is_recorded_not_raised(tiny_mixture, tiny_sgd) -> None:
    # ReLU logits grow without bound under a huge step (tanh would saturate instead)
    model, tensors = _setup(tiny_mixture, MLPSettings(hidden=(16,), activation="relu"))
    settings = tiny_sgd.model_copy(update={"lr": 1e3, "momentum": 0.99,
                                           "stop_at_train_acc": None})
    result = train_classifier(model, *tensors, settings, torch.Generator().manual_seed(0))
    assert result.status == "diverged"
    assert result.diverged_step is not None and result.diverged_step <= settings.max_steps
    assert result.history[0].step == 0  # the history up to divergence is kept


def test_deterministic_on_cpu(tiny_mixture, tiny_mlp, tiny_sgd) -> None:
    runs = []
    for _ in range(2):
        model, tensors = _setup(tiny_mixture, tiny_mlp)
        runs.append((train_classifier(model, *tensors, tiny_sgd,
                                      torch.Generator().manual_seed(5)), model.state_dict()))
    (a, sa), (b, sb) = runs
    assert a.history == b.history
    for key in sa:
        assert torch.equal(sa[key], sb[key])


# ---------------------------------------------------------------- optimizers, losses, schedules


def test_full_batch_gd_is_exact_gradient_descent(tiny_mixture, tiny_mlp) -> None:
    model, (xtr, ytr, xte, yte) = _setup(tiny_mixture, tiny_mlp)
    reference, _ = _setup(tiny_mixture, tiny_mlp)
    settings = TrainSettings(optimizer="gd", lr=0.3, max_steps=7, eval_every=7,
                             stop_at_train_acc=None)
    train_classifier(model, xtr, ytr, xte, yte, settings, torch.Generator())
    for _ in range(7):  # θ ← θ − η ∇ mean CE over the whole training set
        reference.zero_grad()
        F.cross_entropy(reference(xtr), ytr).backward()
        with torch.no_grad():
            for p in reference.parameters():
                p -= 0.3 * p.grad
    for a, b in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_adam_matches_torch_adam(tiny_mixture, tiny_mlp) -> None:
    model, (xtr, ytr, xte, yte) = _setup(tiny_mixture, tiny_mlp)
    reference, _ = _setup(tiny_mixture, tiny_mlp)
    settings = TrainSettings(optimizer="adam", lr=0.01, batch_size=20, max_steps=9,
                             eval_every=9, stop_at_train_acc=None)
    train_classifier(model, xtr, ytr, xte, yte, settings, torch.Generator().manual_seed(1))
    optimizer = torch.optim.Adam(reference.parameters(), lr=0.01)
    order = torch.Generator().manual_seed(1)
    perm = torch.randperm(len(xtr), generator=order)
    for step in range(9):
        if step % 3 == 0 and step:  # 60 points, batch 20: a new epoch every 3 steps
            perm = torch.randperm(len(xtr), generator=order)
        idx = perm[(step % 3) * 20:(step % 3 + 1) * 20]
        optimizer.zero_grad()
        F.cross_entropy(reference(xtr[idx]), ytr[idx]).backward()
        optimizer.step()
    for a, b in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_schedules() -> None:
    base = {"lr": 1.0, "batch_size": 1, "max_steps": 100, "eval_every": 10}
    constant = TrainSettings(**base)
    step = TrainSettings(**base, schedule="step", step_every=30, step_gamma=0.5)
    cosine = TrainSettings(**base, schedule="cosine")
    assert [lr_factor(constant, t) for t in (1, 100)] == [1.0, 1.0]
    assert [lr_factor(step, t) for t in (1, 30, 31, 61, 100)] == [1.0, 1.0, 0.5, 0.25, 0.125]
    assert lr_factor(cosine, 1) == 1.0
    assert lr_factor(cosine, 51) == pytest.approx(0.5)
    assert lr_factor(cosine, 100) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.99)))


def test_scheduled_lr_is_applied(tiny_mixture, tiny_mlp) -> None:
    """A step schedule with gamma → tiny freezes training after the first block of steps."""
    model, tensors = _setup(tiny_mixture, tiny_mlp)
    settings = TrainSettings(lr=0.1, batch_size=20, max_steps=20, eval_every=10,
                             schedule="step", step_every=10, step_gamma=1e-30,
                             stop_at_train_acc=None)
    result = train_classifier(model, *tensors, settings, torch.Generator().manual_seed(0))
    assert result.history[1].train_loss != result.history[0].train_loss
    # steps 11-20 have lr 1e-31 but momentum 0: the weights, hence the loss, barely move
    assert result.history[2].train_loss == pytest.approx(result.history[1].train_loss, rel=1e-6)


def test_probes_are_recorded_at_each_evaluation(tiny_mixture, tiny_mlp, tiny_sgd) -> None:
    model, tensors = _setup(tiny_mixture, tiny_mlp)
    calls = []

    def probes(net):
        calls.append(net.training)
        return {"weight_norm": sum(p.detach().norm().item() ** 2 for p in net.parameters())}

    settings = tiny_sgd.model_copy(update={"max_steps": 30, "stop_at_train_acc": None})
    result = train_classifier(model, *tensors, settings, torch.Generator(), probes=probes)
    assert len(calls) == len(result.history) == 4 and not any(calls)  # eval mode
    assert all("weight_norm" in r.as_dict() for r in result.history)


@pytest.mark.parametrize(("update", "match"), [
    ({"optimizer": "gd", "batch_size": 10}, "full-batch"),
    ({"optimizer": "sgd", "batch_size": None}, "needs batch_size"),
    ({"optimizer": "adam", "momentum": 0.9}, "betas"),
    ({"schedule": "step"}, "step_every"),
])
def test_inconsistent_settings_are_rejected(update, match) -> None:
    raw = {"lr": 0.1, "batch_size": 5, "max_steps": 10, "eval_every": 5, **update}
    with pytest.raises(ValidationError, match=match):
        TrainSettings(**raw)
