"""The edge-of-stability study: the statistics and claim decisions, and one tiny tracked run."""

from __future__ import annotations

import pytest
import torch

from genlab.studies.eos_gd.claims import check_claims
from genlab.studies.eos_gd.experiment import SPEC, edge_statistics
from genlab.studies.eos_gd.settings import EoSConfig


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


def metrics(lr: float, lams: list[float], losses: list[float], status: str = "budget") -> dict:
    return {"lr": lr, "seed": 0, "status": status, "two_over_lr": 2 / lr,
            **edge_statistics(rows(lams, losses), lr)}


def test_the_papers_picture_reproduces_every_claim() -> None:
    m = {"a": metrics(0.2, [3, 6, 9.5, 10.2, 10.1], [1, 0.6, 0.4, 0.3, 0.2]),
         "b": metrics(0.3, [2.5, 6.8, 6.9, 6.7], [1, 0.5, 0.4, 0.3])}
    assert [c.status for c in check_claims(m)] == ["reproduced"] * 3


def test_no_crossing_fails_the_edge_and_loss_claims() -> None:
    m = {"a": metrics(0.2, [3, 4, 5, 6], [1, 0.5, 0.3, 0.2])}
    sharpening, edge, loss = check_claims(m)
    assert sharpening.status == "not_reproduced"  # 6/3 = 2 < 2.5
    assert edge.status == "not_reproduced" and loss.status == "not_reproduced"
    assert edge.numbers["lr=0.2,seed=0"]["crossed"] is False


def test_overshooting_the_edge_is_not_reproduced() -> None:
    m = {"a": metrics(0.2, [3, 9.5, 14.0, 13.5], [1, 0.5, 0.4, 0.3])}
    assert check_claims(m)[1].status == "not_reproduced"  # max 1.4 > 1.3, median 1.35


def test_a_tiny_tracked_run() -> None:
    config = EoSConfig.model_validate({
        "data": {"task": "classification", "n_classes": 3, "teacher_hidden": [8],
                 "input_dim": 5, "n_train": 40, "n_test": 10, "seed": 0},
        "model": {"hidden": [16], "activation": "tanh"},
        "recipe": {"steps": 40, "track_every": 20, "lanczos_max_iter": 10},
        "analyses": {"sharpness": {}},
        "runs": {"lr0_5-s0": {"lr": 0.5, "seed": 0}}})
    result = SPEC.train_run(config, "lr0_5-s0", SPEC.synthesize(config), torch.device("cpu"))
    history = result.history.to_pylist()
    assert [r["step"] for r in history] == [0, 20, 40]
    assert all(r["lambda_max"] > 0 for r in history)
    assert result.metrics["lambda_init"] == history[0]["lambda_max"]
    assert result.metrics["two_over_lr"] == 4.0
