"""The edge-of-stability study: the statistics and claim decisions, and one tiny tracked run."""

from __future__ import annotations

import pytest
import torch

from genlab.studies.eos_gd.claims import check_claims
from genlab.studies.eos_gd.experiment import SPEC, edge_statistics
from genlab.studies.eos_gd.settings import EoSClaims, EoSConfig


def rows(lams: list[float], losses: list[float]) -> list[dict]:
    return [{"step": 50 * i, "lambda_max": lam, "train_loss": loss}
            for i, (lam, loss) in enumerate(zip(lams, losses, strict=True))]


def test_edge_statistics_after_the_first_crossing() -> None:
    # η = 0.2: 2/η = 10; the first λ >= 9 is at index 3 (step 150)
    stats = edge_statistics(rows([3, 5, 8, 9.5, 10.5, 10.0, 11.0],
                                 [1, 0.8, 0.5, 0.4, 0.45, 0.3, 0.2]), lr=0.2)
    assert stats["crossing_step"] == 150 and stats["loss_at_crossing"] == 0.4
    assert stats["ratio_median_after"] == pytest.approx(1.025)
    assert stats["ratio_max_after"] == pytest.approx(1.1)
    assert stats["sharpening"] == pytest.approx(11 / 3)


RULES = EoSClaims(sharpening=">= 2.5", edge="within [0.95, 1.15]", edge_bounded="<= 1.3",
                  loss="< 0")


def metrics(lr: float, lams: list[float], losses: list[float], status: str = "budget",
            seed: int = 0) -> dict:
    return {"lr": lr, "seed": seed, "status": status, "two_over_lr": 2 / lr,
            **edge_statistics(rows(lams, losses), lr)}


def by_key(claims, key: str, lr: float):
    (match,) = [c for c in claims if c.key == key and c.condition == f"lr={lr:g}"]
    return match


def test_the_papers_picture_reproduces_every_claim_at_every_step_size() -> None:
    m = {f"a{s}": metrics(0.2, [3, 6, 9.5, 10.2 + 0.05 * s, 10.1], [1, 0.6, 0.4, 0.3, 0.2],
                          seed=s) for s in range(3)}
    m |= {f"b{s}": metrics(0.3, [2.5, 6.8, 6.9 - 0.05 * s, 6.7], [1, 0.5, 0.4, 0.3], seed=s)
          for s in range(3)}
    claims = check_claims(m, RULES)
    assert [c.status for c in claims] == ["reproduced"] * 8
    assert [(c.key, c.condition) for c in claims[:2]] == [("sharpening", "lr=0.2"),
                                                           ("sharpening", "lr=0.3")]
    assert by_key(claims, "edge", 0.2).effect["n"] == 3


def test_no_crossing_fails_the_edge_claim_and_leaves_the_loss_unmeasured() -> None:
    m = {f"a{s}": metrics(0.2, [3, 4, 5, 6 + 0.1 * s], [1, 0.5, 0.3, 0.2], seed=s)
         for s in range(3)}
    claims = check_claims(m, RULES)
    assert by_key(claims, "sharpening", 0.2).status == "not_reproduced"  # ~2 < 2.5
    edge = by_key(claims, "edge", 0.2)
    assert edge.status == "not_reproduced"  # final λ/(2/η) ~0.6 in every seed
    assert edge.numbers["uncrossed_seeds"] == [0, 1, 2]
    assert by_key(claims, "loss", 0.2).status == "not_run"


def test_overshooting_the_edge_is_not_reproduced() -> None:
    m = {f"a{s}": metrics(0.2, [3, 9.5, 14.0 + 0.1 * s, 13.5], [1, 0.5, 0.4, 0.3], seed=s)
         for s in range(3)}
    claims = check_claims(m, RULES)
    assert by_key(claims, "edge_bounded", 0.2).status == "not_reproduced"  # max ~1.4 > 1.3
    assert by_key(claims, "edge", 0.2).status == "not_reproduced"  # median ~1.35


def test_a_diverged_seed_is_left_out_and_named() -> None:
    m = {f"a{s}": metrics(0.2, [3, 6, 9.5, 10.2 + 0.05 * s, 10.1], [1, 0.6, 0.4, 0.3, 0.2],
                          seed=s) for s in range(3)}
    m["a2"]["status"] = "diverged"
    edge = by_key(check_claims(m, RULES), "edge", 0.2)
    assert edge.effect["n"] == 2 and edge.numbers["diverged_seeds"] == [2]


def test_a_tiny_tracked_run() -> None:
    config = EoSConfig.model_validate({
        "data": {"task": "classification", "n_classes": 3, "teacher_hidden": [8],
                 "input_dim": 5, "n_train": 40, "n_test": 10, "seed": 0},
        "model": {"hidden": [16], "activation": "tanh"},
        "recipe": {"steps": 40, "track_every": 20, "lanczos_max_iter": 10},
        "analyses": {"sharpness": {}}, "claims": RULES.model_dump(),
        "runs": {"lr0_5-s0": {"lr": 0.5, "seed": 0}}})
    result = SPEC.train_run(config, "lr0_5-s0", SPEC.synthesize(config), torch.device("cpu"))
    history = result.history.to_pylist()
    assert [r["step"] for r in history] == [0, 20, 40]
    assert all(r["lambda_max"] > 0 for r in history)
    assert result.metrics["lambda_init"] == history[0]["lambda_max"]
    assert result.metrics["two_over_lr"] == 4.0
