"""Resuming from a checkpoint ends exactly where an uninterrupted run ends."""

from __future__ import annotations

import json

import pytest
import torch

from genlab.data.gaussian_mixture import gaussian_mixture
from genlab.io import dumps_json
from genlab.models.registry import build_model
from genlab.settings import TrainSettings
from genlab.train.checkpoint import from_records, to_records
from genlab.train.loop import Checkpointing, train_classifier


class Killed(Exception):
    pass


def setup(mixture, mlp):
    ds = gaussian_mixture(mixture)
    torch.manual_seed(0)
    model = build_model("mlp", mlp, ds.train.x.shape[1], ds.n_classes)
    return model, [torch.from_numpy(a) for a in (ds.train.x, ds.train.y, ds.test.x, ds.test.y)]


SETTINGS = {
    "sgd": TrainSettings(lr=0.05, momentum=0.9, weight_decay=1e-3, batch_size=25, max_steps=90,
                         eval_every=10, stop_at_train_acc=None),
    "adam": TrainSettings(optimizer="adam", lr=0.01, batch_size=25, max_steps=90, eval_every=10,
                          schedule="cosine", stop_at_train_acc=None),
    "gd": TrainSettings(optimizer="gd", lr=0.2, max_steps=90, eval_every=10,
                        stop_at_train_acc=None),
}


@pytest.mark.parametrize("kind", sorted(SETTINGS))
@pytest.mark.parametrize("through_files", [False, True])
def test_resume_is_bit_exact(tiny_mixture, tiny_mlp, kind: str, through_files: bool) -> None:
    settings = SETTINGS[kind]
    model, data = setup(tiny_mixture, tiny_mlp)
    full = train_classifier(model, *data, settings, torch.Generator().manual_seed(3))
    expected = {k: v.clone() for k, v in model.state_dict().items()}

    saved = []

    def save_then_die(ckpt):
        if through_files:  # what the CLI does: tensors + JSON, and back
            tensors, meta = to_records(ckpt)
            ckpt = from_records(tensors, json.loads(dumps_json(meta)))
        saved.append(ckpt)
        if ckpt.step == 40:
            raise Killed  # the job is killed right after its checkpoint at step 40

    model, data = setup(tiny_mixture, tiny_mlp)
    with pytest.raises(Killed):
        train_classifier(model, *data, settings, torch.Generator().manual_seed(3),
                         checkpointing=Checkpointing(save=save_then_die, due=lambda s: True))
    assert [c.step for c in saved] == [10, 20, 30, 40]

    fresh, data = setup(tiny_mixture, tiny_mlp)  # a new process: new model, new generator
    resumed = train_classifier(
        fresh, *data, settings, torch.Generator().manual_seed(999),
        checkpointing=Checkpointing(save=lambda c: None, due=lambda s: False, resume=saved[-1]))
    assert resumed.history == full.history
    assert (resumed.status, resumed.steps) == (full.status, full.steps)
    for key, value in fresh.state_dict().items():
        assert torch.equal(value, expected[key]), key
