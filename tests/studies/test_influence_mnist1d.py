"""The influence_mnist1d study: settings, the margin, each claim's decision on hand-made
metrics, and a tiny run end to end (every method against its LDS retrainings)."""

from __future__ import annotations

import functools
import json
import math

import pyarrow as pa
import pytest
import torch
from influence_support import assert_same_artifacts, train_every_run
from pydantic import ValidationError

from genlab.analyses.influence.trak import margin
from genlab.io import dumps_json
from genlab.studies.influence_mnist1d.claims import REFERENCE, check_claims, summarize
from genlab.studies.influence_mnist1d.experiment import METHODS, SPEC
from genlab.studies.influence_mnist1d.figures import figures, tables
from genlab.studies.influence_mnist1d.settings import (
    AttributionClaims,
    InfluenceMNIST1DConfig,
)

CPU = torch.device("cpu")
RULES = {"logistic_lds": ">= 0.7", "mlp_lds": ">= 0.3", "curvature_helps": "> 0"}


def config(**changes) -> InfluenceMNIST1DConfig:
    return InfluenceMNIST1DConfig(**{
        "data": {"num_samples": 200, "train_split": 0.8, "seed": 0},
        "logistic": {"l2": 0.05}, "mlp": {"hidden": [4], "activation": "tanh", "l2": 0.05},
        "methods": {"lissa_batch_size": 20, "trak_projection_dim": 16},
        "lds": {"subsets": 6, "retrain_seeds": 2, "seed": 0},
        "claims": RULES,
        "runs": {"logistic-s0": {"model": "logistic", "seed": 0},
                 "mlp-s0": {"model": "mlp", "seed": 0}}, **changes})


def test_registered_and_validated() -> None:
    from genlab.studies import STUDIES, load_study

    assert load_study("influence_mnist1d") is SPEC
    assert SPEC.entry is STUDIES["influence_mnist1d"]
    with pytest.raises(ValidationError, match="leaves an empty or full subset"):
        config(lds={"subsets": 6, "retrain_seeds": 2, "seed": 0, "fraction": 0.001})
    for bad in ({"subsets": 1, "retrain_seeds": 2, "seed": 0},
                {"subsets": 6, "retrain_seeds": 0, "seed": 0}):
        with pytest.raises(ValidationError):
            config(lds=bad)
    with pytest.raises(ValidationError):
        config(runs={"cnn-s0": {"model": "cnn", "seed": 0}})


def test_the_margin_is_the_correct_logit_minus_the_logsumexp_of_the_others() -> None:
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0]], dtype=torch.float64)
    y = torch.tensor([0, 1])
    got = margin(logits, y)  # what the LDS retrainings measure
    expected = torch.tensor([2.0 - math.log(1 + math.exp(-1)),
                             0.5 - math.log(math.exp(0.5) + math.exp(3.0))], dtype=torch.float64)
    torch.testing.assert_close(got, expected, rtol=1e-14, atol=1e-14)
    # the cross entropy is softplus(−margin): ranking by either is the same
    ce = torch.nn.functional.cross_entropy(logits, y, reduction="none")
    torch.testing.assert_close(ce, torch.nn.functional.softplus(-got), rtol=1e-13, atol=1e-13)


def metrics(lds: dict[str, dict[str, float]], model: str, seed: int) -> dict:
    return {"status": "converged", "model": model, "seed": seed,
            "methods": {m: {"lds": lds.get(m, 0.0)} for m in METHODS},
            "seconds": {m: 0.1 for m in METHODS}}


def by_key(claims) -> dict:
    return {(c.key, c.condition): c for c in claims}


def test_claims_decided_by_their_intervals_and_each_can_fail() -> None:
    good = {f"{model}-s{seed}": metrics({"exact": 0.9 - 0.01 * seed, "grad_dot": 0.3,
                                          "random": 0.01 * (seed - 1)}, model, seed)
            for model in ("logistic", "mlp") for seed in range(3)}
    claims = by_key(check_claims(good, AttributionClaims(**RULES)))
    assert {k: c.status for k, c in claims.items()} == {
        ("logistic_lds", "mnist1d"): "reproduced", ("mlp_lds", "mnist1d"): "reproduced",
        ("curvature_helps", "mnist1d logistic"): "reproduced",
        ("curvature_helps", "mnist1d mlp"): "reproduced", ("lds_random", None): "passed"}
    assert claims[("logistic_lds", "mnist1d")].numbers["dataset"] == "mnist1d"
    assert claims[("logistic_lds", "mnist1d")].numbers["reference_lds"] == 0.80

    bad = {name: metrics({"exact": 0.2 + 0.01 * m["seed"], "grad_dot": 0.5, "random": 0.3},
                         m["model"], m["seed"]) for name, m in good.items()}
    claims = by_key(check_claims(bad, AttributionClaims(**RULES)))
    assert claims[("logistic_lds", "mnist1d")].status == "not_reproduced"
    assert claims[("mlp_lds", "mnist1d")].status == "not_reproduced"
    assert claims[("curvature_helps", "mnist1d mlp")].status == "not_reproduced"
    assert claims[("lds_random", None)].status == "failed"

    straddling = {name: metrics({"exact": (0.5, 0.9, 0.7)[m["seed"]]}, m["model"], m["seed"])
                  for name, m in good.items()}
    assert by_key(check_claims(straddling, AttributionClaims(**RULES)))[
        ("logistic_lds", "mnist1d")].status == "inconclusive"


def test_unconverged_or_missing_runs_are_not_counted() -> None:
    runs = {"logistic-s0": {"status": "not_converged", "model": "logistic", "seed": 0},
            "logistic-s1": metrics({"exact": 0.9}, "logistic", 1)}
    claims = by_key(check_claims(runs, AttributionClaims(**RULES)))
    assert claims[("logistic_lds", "mnist1d")].status == "not_run"  # one seed: no interval
    assert claims[("logistic_lds", "mnist1d")].numbers["not_converged"] == ["logistic-s0"]
    assert claims[("mlp_lds", "mnist1d")].status == "not_run"
    assert ("curvature_helps", "mnist1d mlp") not in claims


@functools.cache
def tiny():
    cfg = config()
    return cfg, train_every_run(SPEC, cfg)


def test_tiny_runs_end_to_end() -> None:
    cfg, results = tiny()
    n_test = 40
    for result in results.values():
        m = result.metrics
        assert m["status"] == "converged" and m["fit"]["grad_max"] <= 1e-9
        assert m["n_train"] == 160 and m["n_test"] == n_test and m["dataset"] == "mnist1d"
        assert set(m["methods"]) == set(METHODS) and set(m["seconds"]) >= {*METHODS, "fit"}
        assert result.history.num_rows == n_test * len(METHODS)
        truth = m["ground_truth"]
        assert truth["retrainings"] == 6 * 2 and truth["not_converged"] == 0
        # LiSSA solves the same damped GGN system as the dense solve
        assert m["inverse_hvp"]["lissa"]["min_cosine"] > 0.9
    logistic = results["logistic-s0"].metrics
    # convex with a unique optimum: the two initialisations retrain to the same model, and the
    # exact influence ranks the subsets far better than chance even at n = 160
    assert logistic["ground_truth"]["margin_std_over_starts"] < 1e-3
    assert logistic["methods"]["exact"]["lds"] > 0.5
    assert logistic["methods"]["exact"]["lds"] == pytest.approx(
        logistic["methods"]["exact_hessian"]["lds"], abs=1e-12)  # GGN = Hessian for a GLM

    metrics_json = {k: json.loads(dumps_json(r.metrics)) for k, r in results.items()}
    summary = summarize(cfg, metrics_json, {k: r.history for k, r in results.items()})
    assert isinstance(summary.table, pa.Table) and summary.table.num_rows == 2 * len(METHODS)
    # one seed per model: no interval for the literature claims; the control is decided
    assert all((c.status == "not_run") == (c.kind == "literature") for c in summary.claims)
    data = json.loads(dumps_json(summary.data))
    assert data["lds_estimates"]["logistic"]["exact"]["n"] == 1
    assert len(figures(data, summary.table)) == 2
    ((caption, columns, rows),) = tables(data)
    assert len(rows) == 2 * len(METHODS) and "dattri, MNIST-10" in columns
    assert {r["dattri, MNIST-10"] for r in rows if r["model"] == "logistic"
            and "dattri, MNIST-10" in r} == set(REFERENCE["lds"]["logistic"].values())


def test_a_run_is_deterministic() -> None:
    cfg, results = tiny()
    again = SPEC.train_run(cfg, "mlp-s0", SPEC.synthesize(cfg), CPU)
    first = results["mlp-s0"]
    assert_same_artifacts(again, first)
