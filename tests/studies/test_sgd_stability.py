"""The SGD-stability study: claim decisions, and one tiny converged run with its curvature."""

from __future__ import annotations

import pytest
import torch

from genlab.studies.sgd_stability.claims import check_claims
from genlab.studies.sgd_stability.experiment import SPEC
from genlab.studies.sgd_stability.settings import (
    StabilityClaims,
    StabilityConfig,
    StabilityRun,
    run_id,
)

RULES = StabilityClaims(sgd_trace="<= 1.05", gd_lambda="<= 1.05", gd_trace="> 1")


def m(method: str, lr: float, trace: float, lam: float, converged: bool = True,
      seed: int = 0) -> dict:
    edge = 2 / lr
    return {"method": method, "lr": lr, "seed": seed, "converged": converged,
            "trace_over_edge": trace / edge, "lambda_over_edge": lam / edge}


def seeds(make) -> dict:
    """make(seed, jitter) -> runs of one seed; three seeds with slightly different numbers."""
    return {f"{k}-{s}": v for s in range(3) for k, v in make(s, 0.2 * s).items()}


def test_run_ids() -> None:
    assert run_id(StabilityRun(method="sgd", lr=0.05, seed=2)) == "sgd-lr0_05-s2"


def test_the_papers_picture_reproduces() -> None:
    # 2/η = 40 and 20: SGD traces under the edge; GD λ under it, GD's trace above at η = 0.1
    metrics = seeds(lambda s, j: {
        "a": m("sgd", 0.05, 30 + j, 5, seed=s), "b": m("sgd", 0.1, 14 + j, 3, seed=s),
        "c": m("gd", 0.05, 38 + j, 6, seed=s), "d": m("gd", 0.1, 38 + j, 6 + j, seed=s)})
    claims = check_claims(metrics, RULES)
    assert [c.status for c in claims] == ["reproduced"] * 3
    sgd, _, gd_trace = claims
    assert sgd.numbers["by_seed"]["0"] == pytest.approx(0.75)  # max(30/40, 14/20)
    assert gd_trace.numbers["by_seed"]["0"] == pytest.approx(38 / 20)  # the largest η


def test_violations_are_not_reproduced() -> None:
    metrics = seeds(lambda s, j: {"a": m("sgd", 0.1, 21.5 + j, 3, seed=s),
                                  "c": m("gd", 0.1, 19 - j, 21.5 + j, seed=s)})
    assert [c.status for c in check_claims(metrics, RULES)] == ["not_reproduced"] * 3


def test_unconverged_runs_do_not_count_and_are_named() -> None:
    metrics = seeds(lambda s, j: {"a": m("sgd", 0.1, 100, 3, converged=False, seed=s),
                                  "c": m("gd", 0.1, 30, 6, seed=s)})
    sgd, *_ = check_claims(metrics, RULES)
    assert sgd.status == "not_run" and "sgd:lr=0.1,seed=0" in sgd.numbers["not_converged"]


def test_a_tiny_run_converges_and_measures_curvature() -> None:
    config = StabilityConfig.model_validate({
        "data": {"task": "regression", "teacher_hidden": [8], "input_dim": 3, "n_train": 8,
                 "n_test": 8, "seed": 0},
        "model": {"hidden": [16], "activation": "tanh"},
        "recipe": {"target_loss": 1e-3, "max_steps": 5000, "eval_every": 50,
                   "trace_matvecs": 30, "lanczos_max_iter": 20},
        "analyses": {"sharpness": {}}, "claims": RULES.model_dump(),
        "runs": {"gd-lr0_1-s0": {"method": "gd", "lr": 0.1, "seed": 0}}})
    result = SPEC.train_run(config, "gd-lr0_1-s0", SPEC.synthesize(config), torch.device("cpu"))
    metrics = result.metrics
    assert metrics["converged"] and metrics["final_train_loss"] <= 1e-3
    # the top eigenvalue is at most the trace, and both are positive near a minimum of a PSD-ish
    # Hessian (the trace is an estimate: allow 3 standard errors)
    assert 0 < metrics["lambda_max"] <= metrics["trace"] + 3 * metrics["trace_stderr"]
    assert metrics["lambda_over_edge"] == pytest.approx(metrics["lambda_max"] * 0.1 / 2)
