"""The benign-oscillation study: its claim checks' decisions and one real tiny run."""

from __future__ import annotations

import pytest
import torch

from genlab.studies import load_study
from genlab.studies.benign_oscillation.claims import check_claims
from genlab.studies.benign_oscillation.settings import (
    BenignOscillationClaims,
    BenignOscillationConfig,
    BenignOscillationRun,
    run_id,
)

RULES = BenignOscillationClaims(alpha_v_factor=5, alpha_v="> 0", weak_acc=">= 0.1",
                                strong_acc=">= 0.99", oscillation=">= 0.2")


def run(lr: float, seed: int, growth: float, weak: float, strong: float = 1.0,
        osc: float = 0.3, status: str = "budget", noise: float = 0.02) -> dict:
    return {"lr": lr, "noise_std": noise, "seed": seed, "status": status,
            "alpha_v_growth": growth, "alpha_v": growth + 0.014, "test_acc_weak_only": weak,
            "test_acc_strong": strong, "late_oscillation_strong": osc}


def seeds(small: dict, large: dict, n: int = 3, noise: float = 0.02) -> dict:
    """n seeds of a (small η, large η) pair, each a little different."""
    out = {}
    for s in range(n):
        j = 0.01 * s
        out[f"a{s}-{noise}"] = run(0.5, s, small["growth"] + j, small["weak"] + j,
                                   osc=small.get("osc", 0.01), noise=noise)
        out[f"b{s}-{noise}"] = run(2.5, s, large["growth"] + j, large["weak"] + j,
                                   strong=large.get("strong", 1.0), osc=large.get("osc", 0.3) + j,
                                   noise=noise)
    return out


def statuses(metrics: dict) -> list[str]:
    return [c.status for c in check_claims(metrics, RULES)]


def test_run_ids() -> None:
    assert run_id(BenignOscillationRun(lr=2.5, noise_std=0.05, seed=3)) == "lr2_5-n0_05-s3"


def test_the_papers_outcome_reproduces_every_claim() -> None:
    metrics = seeds({"growth": 0.002, "weak": 0.52}, {"growth": 0.5, "weak": 0.72})
    assert statuses(metrics) == ["reproduced", "reproduced", "passed", "reproduced"]
    assert [c.kind for c in check_claims(metrics, RULES)] == [
        "literature", "literature", "control", "literature"]


def test_each_claim_can_fail() -> None:
    metrics = seeds({"growth": 0.02, "weak": 0.52},
                    {"growth": 0.02, "weak": 0.60, "strong": 0.98, "osc": 0.1})
    # 0.02 - 5 x 0.02 < 0; gap 0.08 < 0.10; strong 0.98 < 0.99; oscillation 0.1 < 0.2
    assert statuses(metrics) == ["not_reproduced", "not_reproduced", "failed", "not_reproduced"]


def test_each_condition_gets_its_own_entries() -> None:
    metrics = seeds({"growth": 0.002, "weak": 0.52}, {"growth": 0.5, "weak": 0.72}) | seeds(
        {"growth": 0.002, "weak": 0.52}, {"growth": 0.5, "weak": 0.53}, noise=0.05)
    claims = check_claims(metrics, RULES)
    assert [(c.key, c.condition) for c in claims[:2]] == [("alpha_v", "sigma_p=0.02"),
                                                           ("alpha_v", "sigma_p=0.05")]
    (weak_005,) = [c for c in claims if c.key == "weak_acc" and c.condition == "sigma_p=0.05"]
    assert weak_005.status == "not_reproduced"  # a 0.01 gap at σ_p = 0.05


def test_growth_not_the_raw_alpha_decides_and_diverged_seeds_are_left_out() -> None:
    metrics = seeds({"growth": 0.002, "weak": 0.5}, {"growth": 0.2, "weak": 0.7})
    metrics["b1-0.02"] |= {"status": "diverged", "alpha_v_growth": float("nan")}
    alpha, weak, *_ = check_claims(metrics, RULES)
    assert alpha.numbers["by_seed"]["0"] == pytest.approx(0.2 - 5 * 0.002)
    assert alpha.numbers["by_seed"]["1"] is None and alpha.effect["n"] == 2
    assert alpha.numbers["diverged"] == ["lr=2.5,seed=1"]


def test_one_step_size_is_not_run() -> None:
    assert statuses({"a": run(0.5, 0, 0.02, 0.5)}) == ["not_run"] * 4


def tiny(width: int) -> BenignOscillationConfig:
    return BenignOscillationConfig.model_validate({
        "data": {"noise_std": 0.02, "patch_dim": 8, "n_train": 8, "n_weak_only": 2,
                 "n_test_strong": 10, "n_test_weak": 10, "seed": 0},
        "model": {"width": width}, "recipe": {"steps": 60, "eval_every": 20},
        "analyses": {"sharpness": {}}, "claims": RULES.model_dump(),
        "runs": {"lr2_5-n0_02-s0": {"lr": 2.5, "noise_std": 0.02, "seed": 0}}})


def test_a_step_beyond_the_stable_window_is_recorded_as_diverged() -> None:
    # the theory's window is η <= 2m/(5‖u‖²): 1.6 for m = 4, so η = 2.5 blows up
    config, spec = tiny(width=4), load_study("benign_oscillation")
    result = spec.train_run(config, "lr2_5-n0_02-s0", spec.synthesize(config), torch.device("cpu"))
    assert result.metrics["status"] == "diverged" and result.metrics["diverged_step"] is not None
    assert result.history.num_rows >= 1


def test_a_tiny_run_records_the_probes() -> None:
    config, spec = tiny(width=8), load_study("benign_oscillation")
    result = spec.train_run(config, "lr2_5-n0_02-s0", spec.synthesize(config), torch.device("cpu"))
    history = result.history.to_pylist()
    assert [r["step"] for r in history] == [0, 20, 40, 60]
    for key in ("alpha_v", "alpha_u", "test_acc_strong", "test_acc_weak_only",
                "oscillation_strong"):
        assert all(key in r for r in history), key
    # α_v is the largest weak-direction coordinate of F₊'s filters, read off the saved weights
    filters = result.weights["filters"]
    assert result.metrics["alpha_v"] == pytest.approx(filters[0, :, 1].max().item())
    # and its growth is measured from the seeded initialisation's own filters
    from genlab.models.registry import build_seeded_model

    init = build_seeded_model("patch_net", config.model, 3 * 8, 2, 0, torch.device("cpu"))
    start = init.filters[0, :, 1].detach()
    assert result.metrics["alpha_v_growth"] == pytest.approx(
        (filters[0, :, 1] - start).max().item())
