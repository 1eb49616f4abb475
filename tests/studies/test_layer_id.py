"""The layer-ID study on MNIST-1D: settings, the claims' statistics, and a tiny end-to-end run."""

from __future__ import annotations

import json

import pytest
import torch
from pydantic import ValidationError

from genlab.data.draws import draw_id, draw_settings
from genlab.io import dumps_json
from genlab.studies.layer_id.claims import (
    check_claims,
    diagnosis,
    hunchback_height,
    seed_statistics,
    summarize,
)
from genlab.studies.layer_id.experiment import SPEC
from genlab.studies.layer_id.figures import figures
from genlab.studies.layer_id.settings import LayerIDClaims, LayerIDConfig, LayerIDRun, run_id

RULES = {"hunchback": "> 0", "random_last_higher": "> 0"}


def config(runs: dict, **changes) -> LayerIDConfig:
    return LayerIDConfig(**{
        "data": {"seed": 0, "mnist1d": {"num_samples": 300, "train_split": 0.5},
                 "digits": {"test_fraction": 0.5}},
        "models": {"mlp": {"hidden": [32, 32]}, "cnn": {"channels": [8, 8, 8]}},
        "recipe": {"lr": 0.003, "batch_size": 50, "max_steps": 1500, "eval_every": 100},
        "claims": RULES, "runs": runs, **changes})


def runs(models=("cnn",), seeds=(0,), task="mnist1d") -> dict[str, LayerIDRun]:
    out = {}
    for model in models:
        for labels in ("clean", "random"):
            for seed in seeds:
                run = LayerIDRun(task=task, model=model, labels=labels, seed=seed)
                out[run_id(run)] = run
    return out


def test_registered_and_run_ids() -> None:
    from genlab.studies import STUDIES, load_study

    assert load_study("layer_id") is SPEC and SPEC.entry is STUDIES["layer_id"]
    assert list(runs(("cnn", "mlp"))) == ["mnist1d-cnn-clean-s0", "mnist1d-cnn-random-s0",
                                          "mnist1d-mlp-clean-s0", "mnist1d-mlp-random-s0"]
    assert list(runs(("mlp",), task="digits")) == ["digits-mlp-clean-s0", "digits-mlp-random-s0"]


@pytest.mark.parametrize("bad", [{"model": "gru"}, {"labels": "noisy"}, {"labels": True},
                                 {"seed": -1}, {"task": "mnist"}])
def test_invalid_runs_are_rejected(bad: dict) -> None:
    with pytest.raises(ValidationError):
        LayerIDRun(**{"task": "mnist1d", "model": "cnn", "labels": "clean", "seed": 0, **bad})


def test_invalid_blocks_are_rejected() -> None:
    with pytest.raises(ValidationError, match="twonn_discard"):
        config(runs(), twonn_discard=1.0)
    with pytest.raises(ValidationError, match="multiple of 10"):
        config(runs(), data={"seed": 0, "mnist1d": {"num_samples": 305}})
    with pytest.raises(ValidationError, match="runs of task 'digits' need data.digits"):
        config(runs(task="digits"), data={"seed": 0, "mnist1d": {"num_samples": 300}})


def test_hunchback_height() -> None:
    # input, hidden 1..3, output
    assert hunchback_height([5.0, 9.0, 7.0, 4.0, 2.0]) == pytest.approx(4.0)  # 9 - max(5, 4)
    assert hunchback_height([5.0, 4.0, 6.0, 8.0, 2.0]) == 0.0  # rises to the last hidden layer
    assert hunchback_height([9.0, 8.0, 6.0, 4.0, 2.0]) == pytest.approx(-1.0)  # falls throughout


def fake(model: str, labels: str, seed: int, ids: list[float], status: str = "fitted",
         task: str = "mnist1d") -> dict:
    return {"task": task, "model": model, "labels": labels, "seed": seed, "status": status,
            "id_trained": ids, "last_hidden_id": ids[-2]}


def test_claims_from_per_seed_statistics() -> None:
    metrics = {}
    for seed in range(3):
        metrics[f"cnn-clean-s{seed}"] = fake("cnn", "clean", seed, [5, 9 + seed, 7, 4, 2])
        metrics[f"cnn-random-s{seed}"] = fake("cnn", "random", seed, [5, 8, 9, 7 + seed, 2])
    stats = seed_statistics(metrics, "mnist1d", "cnn")
    assert stats["hunchback"] == {0: 4.0, 1: 5.0, 2: 6.0}
    assert stats["random_last_higher"] == {0: 3.0, 1: 4.0, 2: 5.0}
    claims = check_claims(metrics, LayerIDClaims(**RULES))
    assert [(c.condition, c.status) for c in claims] == [("mnist1d cnn", "reproduced")] * 2
    # the same runs on a second dataset are their own condition, decided apart
    digits = {}
    for seed in range(3):  # a profile that only falls, and random labels lower at the end
        digits[f"digits-cnn-clean-s{seed}"] = fake("cnn", "clean", seed,
                                                   [9, 8, 7, 6 + 0.1 * seed, 2], task="digits")
        digits[f"digits-cnn-random-s{seed}"] = fake("cnn", "random", seed, [9, 8, 7, 4, 2],
                                                    task="digits")
    both = check_claims({**metrics, **digits}, LayerIDClaims(**RULES))
    assert [(c.condition, c.status) for c in both] == [("mnist1d cnn", "reproduced")] * 2 + [
        ("digits cnn", "not_reproduced"), ("digits cnn", "not_reproduced")]
    assert both[2].numbers["dataset"] == "digits"
    # the opposite outcome: random labels lower, and a profile that only falls
    for seed in range(3):
        metrics[f"cnn-clean-s{seed}"] = fake("cnn", "clean", seed, [9, 8, 7, 6 + seed, 2])
        metrics[f"cnn-random-s{seed}"] = fake("cnn", "random", seed, [9, 8, 7, 2, 2])
    assert [c.status for c in check_claims(metrics, LayerIDClaims(**RULES))] == [
        "not_reproduced"] * 2


def test_a_run_that_did_not_fit_leaves_its_seed_undefined() -> None:
    metrics = {"cnn-clean-s0": fake("cnn", "clean", 0, [5, 9, 7, 4, 2]),
               "cnn-random-s0": fake("cnn", "random", 0, [5, 8, 9, 7, 2], status="budget"),
               "cnn-clean-s1": fake("cnn", "clean", 1, [5, 9, 7, 4, 2], status="budget"),
               "cnn-random-s1": fake("cnn", "random", 1, [5, 8, 9, 7, 2])}
    stats = seed_statistics(metrics, "mnist1d", "cnn")
    assert stats["hunchback"] == {0: 4.0, 1: None}
    assert stats["random_last_higher"] == {0: None, 1: None}
    claims = check_claims(metrics, LayerIDClaims(**RULES))
    assert {c.status for c in claims} == {"not_run"}
    assert claims[0].numbers["not_fitted"] == ["cnn-clean-s1", "cnn-random-s0"]


def test_tiny_run_end_to_end() -> None:
    cfg = config({**runs(seeds=(0, 1)), **dict(list(runs(("mlp",), task="digits").items())[:1])})
    cpu = torch.device("cpu")
    metrics = {}
    for name, run in cfg.runs.items():
        dataset = SPEC.synthesize(draw_settings(cfg, draw_id(cfg, run)))
        artifacts = SPEC.train_run(cfg, name, dataset, cpu)
        m = json.loads(dumps_json(artifacts.metrics))
        metrics[name] = m
        assert m["task"] == run.task and m["last_hidden_id"] == m["id_trained"][-2]
        if run.task == "digits":  # 8x8 images, about half of the 1,797 for training
            assert dataset.train.x.shape == (899, 64)
            assert m["widths"] == [64, 32, 32, 10]
            continue
        assert dataset.train.x.shape == (150, 40)
        assert m["layers"] == ["input", "hidden 1", "hidden 2", "hidden 3", "output"]
        assert m["widths"] == [40, 8 * 19, 8 * 10, 8 * 5, 10]
        assert m["status"] == "fitted" and m["final_train_acc"] == 1.0
    clean, random = metrics["mnist1d-cnn-clean-s0"], metrics["mnist1d-cnn-random-s0"]
    assert clean["fraction_replaced"] == 0.0 and random["fraction_replaced"] == 1.0
    assert 0.8 < random["fraction_wrong"] < 0.99  # a redrawn label is the true one 1 time in 10
    assert clean["id_init"] == random["id_init"]  # one initialisation for both
    assert clean["id_trained"][0] == clean["id_init"][0]  # the input does not train
    summary = summarize(cfg, metrics, {})
    assert summary.table.num_rows == 4 * 5 + 4
    assert [(c.condition, c.status != "not_run") for c in summary.claims] == [
        ("mnist1d cnn", True)] * 2 + [("digits mlp", False)] * 2  # one digits seed
    (caption, fig), = figures(json.loads(dumps_json(summary.data)), summary.table)
    assert "initialisation" in caption and len(fig.axes) == 2


def test_the_diagnosis_reports_each_conditions_fit_and_profile() -> None:
    """Issue 38's "why these verdicts": the fitted clean runs' steps, the trained peak and in how
    many seeds it clears the input's ID; the cause is named where it mostly does not."""
    def run(seed: int, trained: list[float], fit_step: int | None = 300, **kw) -> dict:
        return {**fake("mlp", "clean", seed, trained, task="digits", **kw),
                "id_init": [7.0, 7.5, 8.0, 6.0], "layers": ["input", "hidden 1", "hidden 2",
                                                          "output"],
                "fit_step": fit_step, "final_test_acc": 0.9}
    metrics = {"digits-mlp-clean-s0": run(0, [7.0, 6.5, 5.0, 4.0]),
               "digits-mlp-clean-s1": run(1, [7.0, 7.5, 5.0, 4.0], fit_step=500),
               "digits-mlp-clean-s2": run(2, [7.0, 6.0, 5.0, 4.0]),
               "digits-mlp-clean-s3": run(3, [7.0, 9.0, 5.0, 4.0], fit_step=None,
                                         status="budget"),  # left out: it did not fit
               "digits-mlp-random-s0": fake("mlp", "random", 0, [7.0, 8.0, 9.0, 5.0],
                                            task="digits")}
    cause, line = diagnosis(config(runs()), metrics)
    assert cause.startswith("Cause for digits mlp: a finding") and "1 clean run(s)" in cause
    assert line.startswith("digits mlp: 3 of 4 clean runs fitted their labels, at step 367 "
                           "on average (300-500 of 1,500)")
    assert "trained peak is at hidden 1 in 3 of 3 seeds and above the input's ID in 1" in line
    assert "initialisation 7.00, 7.50, 8.00, 6.00" in line
    assert "statistic is -0.33 trained, 0.00 at initialisation" in line
    metrics["digits-mlp-clean-s0"]["id_trained"] = [7.0, 8.0, 5.0, 4.0]  # now 2 of 3 above
    assert [line.split(";")[0] for line in diagnosis(config(runs()), metrics)] == [
        line.split(";")[0]]  # a hump in most seeds: the numbers alone, no cause
    assert diagnosis(config(runs()), {}) == []
