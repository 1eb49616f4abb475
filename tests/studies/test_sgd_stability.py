"""The SGD-stability study: claim decisions, and one tiny converged run with its curvature."""

from __future__ import annotations

import pytest
import torch

from genlab.studies.sgd_stability.claims import check_claims
from genlab.studies.sgd_stability.experiment import SPEC
from genlab.studies.sgd_stability.settings import StabilityConfig, StabilityRun, run_id


def m(method: str, lr: float, trace: float, lam: float, converged: bool = True) -> dict:
    edge = 2 / lr
    return {"method": method, "lr": lr, "seed": 0, "converged": converged,
            "trace_over_edge": trace / edge, "lambda_over_edge": lam / edge}


def test_run_ids() -> None:
    assert run_id(StabilityRun(method="sgd", lr=0.05, seed=2)) == "sgd-lr0_05-s2"


def test_the_papers_picture_reproduces() -> None:
    # 2/η = 40 and 20: SGD traces under the edge; GD λ under it but one GD trace above
    metrics = {"a": m("sgd", 0.05, 30, 5), "b": m("sgd", 0.1, 14, 3),
               "c": m("gd", 0.05, 38, 6), "d": m("gd", 0.1, 38, 6)}
    assert [c.status for c in check_claims(metrics)] == ["reproduced"] * 3


def test_violations_are_not_reproduced() -> None:
    metrics = {"a": m("sgd", 0.1, 21.5, 3), "c": m("gd", 0.1, 19, 21.5)}  # 1.075 > 1.05
    assert [c.status for c in check_claims(metrics)] == ["not_reproduced"] * 3


def test_unconverged_runs_do_not_count_and_are_named() -> None:
    metrics = {"a": m("sgd", 0.1, 100, 3, converged=False), "c": m("gd", 0.1, 30, 6)}
    sgd, *_ = check_claims(metrics)
    assert sgd.status == "not_run" and sgd.numbers["not_converged"] == ["sgd:lr=0.1,seed=0"]


def test_a_tiny_run_converges_and_measures_curvature() -> None:
    config = StabilityConfig.model_validate({
        "data": {"task": "regression", "teacher_hidden": [8], "input_dim": 3, "n_train": 8,
                 "n_test": 8, "seed": 0},
        "model": {"hidden": [16], "activation": "tanh"},
        "recipe": {"target_loss": 1e-3, "max_steps": 5000, "eval_every": 50,
                   "trace_matvecs": 30, "lanczos_max_iter": 20},
        "analyses": {"sharpness": {}},
        "runs": {"gd-lr0_1-s0": {"method": "gd", "lr": 0.1, "seed": 0}}})
    result = SPEC.train_run(config, "gd-lr0_1-s0", SPEC.synthesize(config), torch.device("cpu"))
    metrics = result.metrics
    assert metrics["converged"] and metrics["final_train_loss"] <= 1e-3
    # the top eigenvalue is at most the trace, and both are positive near a minimum of a PSD-ish
    # Hessian (the trace is an estimate: allow 3 standard errors)
    assert 0 < metrics["lambda_max"] <= metrics["trace"] + 3 * metrics["trace_stderr"]
    assert metrics["lambda_over_edge"] == pytest.approx(metrics["lambda_max"] * 0.1 / 2)
