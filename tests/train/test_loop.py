from __future__ import annotations

import torch

from genlab.data.gaussian_mixture import gaussian_mixture
from genlab.models.registry import build_model
from genlab.settings import MLPSettings
from genlab.train.loop import evaluate, train_classifier


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
