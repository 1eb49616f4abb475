"""The mislabel_mnist1d study: the flips, each claim's decision on hand-made metrics, one tiny
run of each model end to end, and that a run is deterministic."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
import torch
from influence_support import assert_same_artifacts, train_every_run
from pydantic import ValidationError

from genlab.analyses.influence.detection import CHECKED, METHODS, roc_auc
from genlab.io import dumps_json
from genlab.studies.mislabel_mnist1d.claims import check_claims, summarize
from genlab.studies.mislabel_mnist1d.experiment import SPEC, flip_labels
from genlab.studies.mislabel_mnist1d.figures import figures
from genlab.studies.mislabel_mnist1d.settings import MislabelMNIST1DClaims, MislabelMNIST1DConfig

CPU = torch.device("cpu")
RULES = {"self_influence_logistic": ">= 0.85", "self_influence_mlp": ">= 0.85",
         "beats_loss": "> 0"}


def config(**changes) -> MislabelMNIST1DConfig:
    return MislabelMNIST1DConfig.model_validate({
        "data": {"num_samples": 200, "train_split": 0.5, "seed": 0},
        "flip_fraction": 0.1, "logistic": {"l2": 0.01},
        "mlp": {"hidden": [16], "activation": "tanh", "l2": 0.001},
        "claims": RULES,
        "runs": {"logistic-s0": {"model": "logistic", "seed": 0},
                 "mlp-s0": {"model": "mlp", "seed": 0}}, **changes})


def test_registered_and_validated() -> None:
    from genlab.studies import STUDIES, load_study

    assert load_study("mislabel_mnist1d") is SPEC and SPEC.entry is STUDIES["mislabel_mnist1d"]
    with pytest.raises(ValidationError, match="flips none of the 100 training labels"):
        config(flip_fraction=0.001)
    with pytest.raises(ValidationError):
        config(flip_fraction=1.0)


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


def metrics(model: str, exact: float, loss: float, seed: int, random: float = 0.5) -> dict:
    aucs = {"exact": exact, "ekfac": 0.8, "grad_dot": 0.8, "loss": loss, "random": random}
    return {"model": model, "seed": seed, "status": "converged", "train_acc_flipped": 0.9,
            "methods": {name: {"auc": aucs[name]} for name in METHODS}}


def three(model: str, exact: float, loss: float, **kw) -> dict:
    return {f"{model}-s{s}": metrics(model, exact + 0.005 * s, loss, s, **kw) for s in range(3)}


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
    runs = three("mlp", 0.93, 0.6) | {"mlp-s1": {"model": "mlp", "seed": 1,
                                                 "status": "not_converged"}}
    claim = decided(runs)[("self_influence_mlp", "mnist1d")]
    assert claim.effect["n"] == 2 and claim.numbers["skipped"] == ["mlp-s1"]
    assert claim.numbers["flips_fitted_by_run"] == {"mlp-s0": 0.9, "mlp-s2": 0.9}
    assert decided({})[("self_influence_logistic", "mnist1d")].status == "not_run"


@functools.cache
def tiny() -> tuple[MislabelMNIST1DConfig, dict]:
    cfg = config()
    return cfg, train_every_run(SPEC, cfg)


def test_tiny_runs_end_to_end() -> None:
    cfg, results = tiny()
    mlp = results["mlp-s0"].metrics
    assert mlp["status"] == "converged" and mlp["train_acc_flipped"] >= 0.9
    for result in results.values():
        m = result.metrics
        assert m["fit"]["grad_max"] <= 1e-9 and m["n_flipped"] == 10 and m["n_train"] == 100
        assert set(m["methods"]) == set(METHODS)
        assert all(0 <= m["methods"][k]["auc"] <= 1 for k in METHODS)
        assert m["methods"]["exact"]["found"][-1] == 1.0
        assert result.history.num_rows == 100 * len(METHODS)
        assert sum(result.history.column("flipped").to_pylist()) == 10 * len(METHODS)
    # the metrics' AUC is the history's ranking scored against its flips
    rows = [r for r in results["mlp-s0"].history.to_pylist() if r["method"] == "exact"]
    assert mlp["methods"]["exact"]["auc"] == roc_auc(np.array([r["score"] for r in rows]),
                                                     np.array([r["flipped"] for r in rows]))
    metrics_json = {k: json.loads(dumps_json(r.metrics)) for k, r in results.items()}
    summary = summarize(cfg, metrics_json, {k: r.history for k, r in results.items()})
    assert [c.status for c in summary.claims if c.kind == "literature"] == ["not_run"] * 4
    assert summary.table.num_rows == 2 * len(METHODS) * len(CHECKED)
    drawn = figures(json.loads(dumps_json(summary.data)), summary.table)
    assert len(drawn) == 1 and len(drawn[0][1].axes) == 2


def test_a_run_is_deterministic() -> None:
    cfg, results = tiny()
    again = SPEC.train_run(cfg, "mlp-s0", SPEC.synthesize(cfg), CPU)
    assert_same_artifacts(again, results["mlp-s0"])
