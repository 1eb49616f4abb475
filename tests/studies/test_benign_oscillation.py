"""The benign-oscillation study: its claim checks' decisions and one real tiny run."""

from __future__ import annotations

import pytest
import torch

from genlab.studies import load_study
from genlab.studies.benign_oscillation.claims import check_claims
from genlab.studies.benign_oscillation.settings import (
    BenignOscillationConfig,
    BenignOscillationRun,
    run_id,
)


def run(lr: float, seed: int, alpha_v: float, weak: float, strong: float = 1.0,
        osc: float = 0.3, status: str = "budget") -> dict:
    return {"lr": lr, "seed": seed, "status": status, "alpha_v": alpha_v,
            "test_acc_weak_only": weak, "test_acc_strong": strong,
            "late_oscillation_strong": osc}


def statuses(metrics: dict) -> list[str]:
    return [c.status for c in check_claims(metrics)]


def test_run_ids() -> None:
    assert run_id(BenignOscillationRun(lr=2.5, seed=3)) == "lr2_5-s3"


def test_the_papers_outcome_reproduces_every_claim() -> None:
    metrics = {"a": run(0.5, 0, 0.02, 0.52, osc=0.01), "b": run(2.5, 0, 0.5, 0.72)}
    assert statuses(metrics) == ["reproduced"] * 4


def test_each_claim_can_fail() -> None:
    metrics = {"a": run(0.5, 0, 0.02, 0.52, osc=0.01),
               "b": run(2.5, 0, 0.09, 0.60, strong=0.98, osc=0.1)}
    # ratio 4.5 < 5; gap 0.08 < 0.10; strong 0.98 < 0.99; oscillation 0.1 < 0.2
    assert statuses(metrics) == ["not_reproduced"] * 4


def test_means_over_seeds_and_diverged_runs_are_counted_not_averaged() -> None:
    metrics = {"a0": run(0.5, 0, 0.02, 0.5), "a1": run(0.5, 1, 0.02, 0.5),
               "b0": run(2.5, 0, 0.2, 0.7), "b1": run(2.5, 1, float("nan"), 0.1,
                                                      status="diverged")}
    (alpha, weak, *_) = check_claims(metrics)
    assert alpha.numbers["alpha_v_large"] == pytest.approx(0.2)
    assert alpha.numbers["n_diverged"] == {"0.5": 0, "2.5": 1}
    assert weak.numbers["weak_acc_large"] == pytest.approx(0.7)


def test_one_step_size_is_not_run() -> None:
    assert statuses({"a": run(0.5, 0, 0.02, 0.5)}) == ["not_run"] * 4


def tiny(width: int) -> BenignOscillationConfig:
    return BenignOscillationConfig.model_validate({
        "data": {"noise_std": 0.02, "patch_dim": 8, "n_train": 8, "n_weak_only": 2,
                 "n_test_strong": 10, "n_test_weak": 10, "seed": 0},
        "model": {"width": width}, "recipe": {"steps": 60, "eval_every": 20},
        "analyses": {"sharpness": {}},
        "runs": {"lr2_5-s0": {"lr": 2.5, "seed": 0}}})


def test_a_step_beyond_the_stable_window_is_recorded_as_diverged() -> None:
    # the theory's window is η <= 2m/(5‖u‖²): 1.6 for m = 4, so η = 2.5 blows up
    config, spec = tiny(width=4), load_study("benign_oscillation")
    result = spec.train_run(config, "lr2_5-s0", spec.synthesize(config), torch.device("cpu"))
    assert result.metrics["status"] == "diverged" and result.metrics["diverged_step"] is not None
    assert result.history.num_rows >= 1


def test_a_tiny_run_records_the_probes() -> None:
    config, spec = tiny(width=8), load_study("benign_oscillation")
    result = spec.train_run(config, "lr2_5-s0", spec.synthesize(config), torch.device("cpu"))
    history = result.history.to_pylist()
    assert [r["step"] for r in history] == [0, 20, 40, 60]
    for key in ("alpha_v", "alpha_u", "test_acc_strong", "test_acc_weak_only",
                "oscillation_strong"):
        assert all(key in r for r in history), key
    # α_v is the largest weak-direction coordinate of F₊'s filters, read off the saved weights
    filters = result.weights["filters"]
    assert result.metrics["alpha_v"] == pytest.approx(filters[0, :, 1].max().item())
