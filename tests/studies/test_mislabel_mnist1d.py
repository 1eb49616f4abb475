"""The mislabel_mnist1d study: the flips, each claim's decision per dataset on hand-made metrics,
the diagnosis' numbers, one tiny run of each model end to end, and that a run is
deterministic."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
import torch
from influence_support import assert_same_artifacts, train_every_run
from pydantic import ValidationError

from genlab.analyses.influence.detection import CHECKED, METHODS, roc_auc
from genlab.data.draws import draw_settings, run_draw_id
from genlab.io import dumps_json
from genlab.studies.mislabel_mnist1d.claims import check_claims, diagnosis, summarize
from genlab.studies.mislabel_mnist1d.experiment import SPEC, flip_labels
from genlab.studies.mislabel_mnist1d.figures import figures
from genlab.studies.mislabel_mnist1d.settings import MislabelMNIST1DClaims, MislabelMNIST1DConfig

CPU = torch.device("cpu")
RULES = {"self_influence_logistic": ">= 0.85", "self_influence_mlp": ">= 0.85",
         "beats_loss": "> 0"}


def config(**changes) -> MislabelMNIST1DConfig:
    return MislabelMNIST1DConfig.model_validate({
        "data": {"seed": 0, "mnist1d": {"num_samples": 200, "train_split": 0.5},
                 "digits": {"test_fraction": 0.9}},
        "flip_fraction": 0.1, "logistic": {"l2": 0.01},
        "mlp": {"hidden": [16], "activation": "tanh", "l2": 0.001},
        "claims": RULES,
        "runs": {"mnist1d-logistic-s0": {"task": "mnist1d", "model": "logistic", "seed": 0},
                 "mnist1d-mlp-s0": {"task": "mnist1d", "model": "mlp", "seed": 0},
                 "digits-logistic-s0": {"task": "digits", "model": "logistic", "seed": 0}},
        **changes})


def test_registered_and_validated() -> None:
    from genlab.studies import STUDIES, load_study

    assert load_study("mislabel_mnist1d") is SPEC and SPEC.entry is STUDIES["mislabel_mnist1d"]
    with pytest.raises(ValidationError, match="flips none of the 100 mnist1d training labels"):
        config(flip_fraction=0.004)  # 0.72 of a digit flip rounds to 1, 0.4 of a series to 0
    with pytest.raises(ValidationError):
        config(flip_fraction=1.0)
    # 180 of the 1797 digits train (round(0.9 * 1797) = 1617 test images)
    with pytest.raises(ValidationError, match="flips none of the 180 digits training labels"):
        config(flip_fraction=0.002)
    with pytest.raises(ValidationError, match=r"name the dataset\(s\) \['digits'\]"):
        config(data={"seed": 0, "mnist1d": {"num_samples": 200, "train_split": 0.5}})


def test_flips_are_exact_and_change_the_class() -> None:
    y = np.arange(200) % 10
    labels, flipped = flip_labels(y, 0.1, 10, seed=3)
    assert flipped.sum() == 20 and np.all(labels[flipped] != y[flipped])
    assert np.array_equal(labels[~flipped], y[~flipped])
    assert set(labels[flipped]) <= set(range(10))
    again, same = flip_labels(y, 0.1, 10, seed=3)
    assert np.array_equal(again, labels) and np.array_equal(same, flipped)
    assert not np.array_equal(flip_labels(y, 0.1, 10, seed=4)[1], flipped)
    # every other class is reachable (a uniform draw over the nine, not a fixed shift)
    many, mask = flip_labels(np.zeros(5000, dtype=np.int64), 0.5, 10, seed=0)
    assert set(many[mask]) == set(range(1, 10))


def metrics(model: str, exact: float, loss: float, seed: int, random: float = 0.5,
            task: str = "mnist1d") -> dict:
    aucs = {"exact": exact, "ekfac": 0.8, "grad_dot": 0.8, "loss": loss, "random": random}
    return {"task": task, "model": model, "seed": seed, "status": "converged",
            "train_acc_flipped": 0.9, "train_acc_unflipped": 0.4, "test_acc": 0.3,
            "methods": {name: {"auc": aucs[name]} for name in METHODS}}


def three(model: str, exact: float, loss: float, task: str = "mnist1d", **kw) -> dict:
    return {f"{task}-{model}-s{s}": metrics(model, exact + 0.005 * s, loss, s, task=task, **kw)
            for s in range(3)}


def decided(runs: dict) -> dict:
    return {(c.key, c.condition): c for c in check_claims(runs, MislabelMNIST1DClaims(**RULES))}


def test_claims_reproduce_fail_and_are_not_run() -> None:
    good = decided(three("logistic", 0.95, 0.9) | three("mlp", 0.93, 0.6))
    assert {k: c.status for k, c in good.items()} == {
        ("self_influence_logistic", "mnist1d"): "reproduced",
        ("self_influence_mlp", "mnist1d"): "reproduced",
        ("beats_loss", "mnist1d logistic"): "reproduced",
        ("beats_loss", "mnist1d mlp"): "reproduced", ("random", None): "passed"}
    bad = decided(three("logistic", 0.7, 0.9, random=0.3) | three("mlp", 0.6, 0.9, random=0.3))
    assert {k: c.status for k, c in bad.items()} == {
        ("self_influence_logistic", "mnist1d"): "not_reproduced",
        ("self_influence_mlp", "mnist1d"): "not_reproduced",
        ("beats_loss", "mnist1d logistic"): "not_reproduced",
        ("beats_loss", "mnist1d mlp"): "not_reproduced", ("random", None): "failed"}
    # an unconverged run has no rankings: left out of the claims and named
    runs = three("mlp", 0.93, 0.6) | {"mnist1d-mlp-s1": {"task": "mnist1d", "model": "mlp",
                                                         "seed": 1, "status": "not_converged"}}
    claim = decided(runs)[("self_influence_mlp", "mnist1d")]
    assert claim.effect["n"] == 2 and claim.numbers["skipped"] == ["mnist1d-mlp-s1"]
    assert claim.numbers["flips_fitted_by_run"] == {"mnist1d-mlp-s0": 0.9, "mnist1d-mlp-s2": 0.9}
    assert decided(runs)[("self_influence_logistic", "mnist1d")].status == "not_run"
    assert decided({}).keys() == {("random", None)}  # no run names a dataset: nothing to judge


def test_each_dataset_is_its_own_condition() -> None:
    """The datasets are judged apart: a model that fails on one and passes on the other gets
    both verdicts, and the random control pools every run."""
    runs = three("logistic", 0.7, 0.9) | three("logistic", 0.95, 0.999, task="digits")
    got = {k: c.status for k, c in decided(runs).items()}
    assert got == {("self_influence_logistic", "mnist1d"): "not_reproduced",
                   ("self_influence_mlp", "mnist1d"): "not_run",
                   ("self_influence_logistic", "digits"): "reproduced",
                   ("self_influence_mlp", "digits"): "not_run",
                   ("beats_loss", "mnist1d logistic"): "not_reproduced",
                   ("beats_loss", "digits logistic"): "not_reproduced",
                   ("random", None): "passed"}
    assert decided(runs)[("self_influence_logistic", "digits")].effect["n"] == 3


def test_the_diagnosis_reports_each_conditions_fit() -> None:
    runs = three("logistic", 0.7, 0.9) | three("logistic", 0.95, 0.999, task="digits")
    runs["digits-logistic-s1"]["train_acc_unflipped"] = 0.7  # (0.4 + 0.7 + 0.4) / 3 = 0.5
    lines = diagnosis(runs)
    assert lines[0].startswith("Cause of the MNIST-1D verdicts: the setting.")
    mnist, digits = lines[1], lines[2]
    assert mnist.startswith("mnist1d, logistic (3 seeds): fits 40.0% of the unflipped")
    assert "90.0% of the flips, test accuracy 30.0%" in mnist
    assert "exact self-influence 0.705, training loss 0.900" in mnist
    assert digits.startswith("digits, logistic (3 seeds): fits 50.0% of the unflipped")
    assert diagnosis({}) == []


@functools.cache
def tiny() -> tuple[MislabelMNIST1DConfig, dict]:
    cfg = config()
    return cfg, train_every_run(SPEC, cfg)


def test_tiny_runs_end_to_end() -> None:
    cfg, results = tiny()
    mlp = results["mnist1d-mlp-s0"].metrics
    assert mlp["status"] == "converged" and mlp["train_acc_flipped"] >= 0.9
    # the digits run trains on its own draw of 180 images, which logistic regression fits
    digits = results["digits-logistic-s0"].metrics
    assert digits["task"] == "digits" and digits["n_train"] == 180 and digits["n_flipped"] == 18
    assert digits["train_acc_unflipped"] >= 0.9
    for name, result in results.items():
        m = result.metrics
        n = m["n_train"]
        assert m["fit"]["grad_max"] <= 1e-9 and m["n_flipped"] == round(0.1 * n)
        assert n == (180 if name.startswith("digits") else 100)
        assert set(m["methods"]) == set(METHODS)
        assert all(0 <= m["methods"][k]["auc"] <= 1 for k in METHODS)
        assert m["methods"]["exact"]["found"][-1] == 1.0
        assert result.history.num_rows == n * len(METHODS)
        assert sum(result.history.column("flipped").to_pylist()) == m["n_flipped"] * len(METHODS)
    # the metrics' AUC is the history's ranking scored against its flips
    rows = [r for r in results["mnist1d-mlp-s0"].history.to_pylist() if r["method"] == "exact"]
    assert mlp["methods"]["exact"]["auc"] == roc_auc(np.array([r["score"] for r in rows]),
                                                     np.array([r["flipped"] for r in rows]))
    metrics_json = {k: json.loads(dumps_json(r.metrics)) for k, r in results.items()}
    summary = summarize(cfg, metrics_json, {k: r.history for k, r in results.items()})
    # one seed per condition: every literature claim lacks an interval (two models on two
    # datasets, the digits MLP without a run, and beats_loss for the three that ran)
    assert [c.status for c in summary.claims if c.kind == "literature"] == ["not_run"] * 7
    assert summary.table.num_rows == 3 * len(METHODS) * len(CHECKED)
    assert len(summary.data["diagnosis"]) == 5  # the cause, three conditions, beats_loss
    drawn = figures(json.loads(dumps_json(summary.data)), summary.table)
    assert len(drawn) == 1
    assert [ax.get_title() for ax in drawn[0][1].axes] == [
        "digits, logistic", "mnist1d, logistic", "mnist1d, mlp"]


def test_a_run_is_deterministic() -> None:
    cfg, results = tiny()
    draw = draw_settings(cfg, run_draw_id(cfg, "mnist1d-mlp-s0"))
    again = SPEC.train_run(draw, "mnist1d-mlp-s0", SPEC.synthesize(draw), CPU)
    assert_same_artifacts(again, results["mnist1d-mlp-s0"])
