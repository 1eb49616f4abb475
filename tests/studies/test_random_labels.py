"""The random-labels study: run naming, one real tiny run, and each claim check's decision."""

from __future__ import annotations

import pyarrow as pa
import pytest
import torch

from genlab.studies import STUDIES, load_study
from genlab.studies.random_labels.claims import check_claims, summarize
from genlab.studies.random_labels.settings import RandomLabelsConfig, RandomLabelsRun, run_id


def per_p(test_acc: dict[float, float], fit: dict[float, float | None],
          min_train: float = 1.0, diverged: int = 0) -> dict[float, dict]:
    return {p: {"mean_test_acc": acc, "mean_fit_step": fit[p], "min_train_acc": min_train,
                "n_diverged": diverged, "n_runs": 1, "n_fitted": 1} for p, acc in test_acc.items()}


def status(claims, key_words: str) -> str:
    (match,) = [c for c in claims if key_words in c.claim]
    return match.status


def test_registered() -> None:
    assert STUDIES["random_labels"].run_id is run_id


@pytest.mark.parametrize(("p", "seed", "expected"), [
    (0.0, 0, "p0-s0"), (0.5, 3, "p0_5-s3"), (1.0, 0, "p1-s0"), (0.25, 12, "p0_25-s12"),
    (1e-05, 0, "p1e-05-s0")])
def test_run_ids(p: float, seed: int, expected: str) -> None:
    assert run_id(RandomLabelsRun(label_noise=p, seed=seed)) == expected


def test_all_claims_reproduced_on_a_textbook_outcome() -> None:
    claims = check_claims(per_p({0.0: 0.8, 0.5: 0.5, 1.0: 0.11}, {0.0: 100, 0.5: 150, 1.0: 200}),
                          n_classes=10)
    assert [c.status for c in claims] == ["passed", "reproduced", "passed", "reproduced"]
    assert [c.kind for c in claims] == ["control", "literature", "control", "literature"]
    assert status(claims, "constant factor") == "reproduced"
    (slow,) = [c for c in claims if "constant factor" in c.claim]
    assert slow.numbers["ratio"] == pytest.approx(2.0)


def test_each_claim_can_fail() -> None:
    claims = check_claims(
        per_p({0.0: 0.8, 0.5: 0.85, 1.0: 0.3}, {0.0: 10, 0.5: 150, 1.0: 200}, min_train=0.97),
        n_classes=10)
    assert status(claims, "fit any fraction") == "failed"
    assert status(claims, "falls") == "not_reproduced"  # 0.8 -> 0.85 is not a decrease
    assert status(claims, "at chance") == "failed"  # |0.3 - 0.1| > 0.03
    assert status(claims, "constant factor") == "not_reproduced"  # 200 / 10 = 20 > 10


def test_ties_are_not_a_strict_decrease() -> None:
    claims = check_claims(per_p({0.0: 0.5, 1.0: 0.5}, {0.0: 1, 1.0: 1}), n_classes=2)
    assert status(claims, "falls") == "not_reproduced"


def test_missing_levels_are_not_run_not_passed() -> None:
    claims = check_claims(per_p({0.5: 0.5}, {0.5: 100}), n_classes=10)
    assert status(claims, "falls") == "not_run"
    assert status(claims, "at chance") == "not_run"
    assert status(claims, "constant factor") == "not_run"


def test_a_diverged_run_fails_the_fit_claim() -> None:
    claims = check_claims(per_p({0.0: 0.8, 1.0: 0.1}, {0.0: 100, 1.0: 200}, diverged=1),
                          n_classes=10)
    assert status(claims, "fit any fraction") == "failed"


def test_one_tiny_run_end_to_end(tiny_mixture, tiny_mlp, tiny_sgd) -> None:
    spec = load_study("random_labels")
    config = RandomLabelsConfig(data=tiny_mixture, model=tiny_mlp, train=tiny_sgd,
                                analyses={"sharpness": {}}, runs={
        "p0-s0": RandomLabelsRun(label_noise=0.0, seed=0),
        "p1-s0": RandomLabelsRun(label_noise=1.0, seed=0)})
    dataset = spec.synthesize(config)
    metrics, histories = {}, {}
    for name in config.runs:
        result = spec.train_run(config, name, dataset, torch.device("cpu"))
        metrics[name], histories[name] = result.metrics, result.history
        assert result.history.column("step").to_pylist()[0] == 0
        assert result.metrics["final_train_acc"] == result.history.column("train_acc")[-1].as_py()
    assert metrics["p0-s0"]["fraction_replaced"] == 0.0
    assert metrics["p1-s0"]["fraction_replaced"] == 1.0
    summary = summarize(config, metrics, histories)
    assert len(summary.claims) == 4
    assert summary.table.num_rows == sum(h.num_rows for h in histories.values())
    assert set(summary.table.column("run").to_pylist()) == {"p0-s0", "p1-s0"}
    assert isinstance(summary.table, pa.Table)
