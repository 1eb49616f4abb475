"""The random-labels study: run naming, one real tiny run, and each claim check's decision."""

from __future__ import annotations

import pyarrow as pa
import pytest
import torch

from genlab.studies import STUDIES, load_study
from genlab.studies.random_labels.claims import check_claims, summarize
from genlab.studies.random_labels.settings import (
    RandomLabelsClaims,
    RandomLabelsConfig,
    RandomLabelsRun,
    run_id,
)
from tests_support import assert_group_trains_each_run_as_alone, pipeline_datasets

RULES = RandomLabelsClaims(test_acc_decreases="> 0", fit_slowdown="within [1, 10]")


def seeds(test_acc: dict[float, list[float]], fit: dict[float, list[float | None]],
          train_acc: float = 1.0, diverged: tuple[tuple[float, int], ...] = ()) -> dict:
    """Run metrics for every seed (the i-th value of each list) at every p."""
    runs = {}
    for p, accs in test_acc.items():
        for seed, acc in enumerate(accs):
            runs[f"p{p}-s{seed}"] = {
                "label_noise": p, "seed": seed, "final_test_acc": acc, "fit_step": fit[p][seed],
                "final_train_acc": train_acc,
                "status": "diverged" if (p, seed) in diverged else "done"}
    return runs


def check(metrics: dict, n_classes: int = 10):
    from genlab.studies.random_labels.claims import _by_p, _by_seed

    per_p = {}
    for p, runs in _by_p(metrics).items():
        ok = [m for m in runs if m["status"] != "diverged"]
        fitted = [m["fit_step"] for m in ok if m["fit_step"] is not None]
        per_p[p] = {"n_diverged": len(runs) - len(ok),
                    "mean_test_acc": sum(m["final_test_acc"] for m in ok) / len(ok) if ok else None,
                    "min_train_acc": min((m["final_train_acc"] for m in ok), default=None),
                    "mean_fit_step": sum(fitted) / len(fitted) if fitted else None}
    return check_claims(per_p, _by_seed(metrics), n_classes, RULES)


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
    claims = check(seeds({0.0: [0.8, 0.82, 0.79], 0.5: [0.5, 0.52, 0.48], 1.0: [0.11, 0.1, 0.09]},
                         {0.0: [100, 110, 90], 0.5: [150] * 3, 1.0: [200, 210, 190]}))
    assert [c.status for c in claims] == ["passed", "reproduced", "passed", "reproduced"]
    assert [c.kind for c in claims] == ["control", "literature", "control", "literature"]
    (slow,) = [c for c in claims if "constant factor" in c.claim]
    assert slow.effect["n"] == 3 and slow.effect["rule"] == "within [1, 10]"
    assert slow.numbers["by_seed"] == {"0": 2.0, "1": pytest.approx(210 / 110), "2": 190 / 90}
    (falls,) = [c for c in claims if "falls" in c.claim]
    assert falls.numbers["by_seed"]["0"] == pytest.approx(0.3)  # min(0.8-0.5, 0.5-0.11)


def test_each_claim_can_fail() -> None:
    claims = check(seeds({0.0: [0.8, 0.8, 0.8], 0.5: [0.85, 0.86, 0.87], 1.0: [0.3, 0.3, 0.3]},
                         {0.0: [10, 10, 10], 0.5: [150] * 3, 1.0: [200, 210, 220]},
                         train_acc=0.97))
    assert status(claims, "fit any fraction") == "failed"
    assert status(claims, "falls") == "not_reproduced"  # 0.8 -> 0.85 is a rise in every seed
    assert status(claims, "at chance") == "failed"  # |0.3 - 0.1| > 0.03
    assert status(claims, "constant factor") == "not_reproduced"  # ratios 20-22 > 10


def test_seeds_that_disagree_leave_the_claim_inconclusive() -> None:
    claims = check(seeds({0.0: [0.8, 0.5, 0.8], 1.0: [0.1, 0.6, 0.1]},
                         {0.0: [100] * 3, 1.0: [200] * 3}))
    assert status(claims, "falls") == "inconclusive"  # drops 0.7, -0.1, 0.7


def test_missing_levels_are_not_run_not_passed() -> None:
    claims = check(seeds({0.5: [0.5, 0.5]}, {0.5: [100, 100]}))
    assert status(claims, "falls") == "not_run"
    assert status(claims, "at chance") == "not_run"
    assert status(claims, "constant factor") == "not_run"


def test_one_seed_gives_no_interval_so_no_verdict() -> None:
    claims = check(seeds({0.0: [0.8], 1.0: [0.1]}, {0.0: [100], 1.0: [200]}))
    assert status(claims, "falls") == "not_run" and status(claims, "constant factor") == "not_run"


def test_a_diverged_run_fails_the_fit_claim_and_leaves_its_seed_out() -> None:
    claims = check(seeds({0.0: [0.8, 0.8, 0.81], 1.0: [0.1, 0.1, 0.1]},
                         {0.0: [100, 100, 100], 1.0: [200, 200, 210]}, diverged=((1.0, 0),)))
    assert status(claims, "fit any fraction") == "failed"
    (slow,) = [c for c in claims if "constant factor" in c.claim]
    assert slow.numbers["by_seed"]["0"] is None and slow.effect["n"] == 2


def test_the_rules_are_validated_when_params_load() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="fit_slowdown"):
        RandomLabelsClaims(test_acc_decreases="> 0", fit_slowdown="small")


def test_one_tiny_run_end_to_end(tiny_mixture, tiny_mlp, tiny_sgd) -> None:
    spec = load_study("random_labels")
    config = RandomLabelsConfig(data=tiny_mixture, model=tiny_mlp, train=tiny_sgd,
                                analyses={"sharpness": {}}, claims=RULES, runs={
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


def test_seeds_train_as_one_batch_each_on_its_own_draw(tiny_mixture, tiny_mlp, tiny_sgd) -> None:
    # the group trainer over two seeds (each its own draw, as the pipeline gives it) makes what
    # train_run makes of each run alone
    spec = load_study("random_labels")
    config = RandomLabelsConfig(data=tiny_mixture, model=tiny_mlp,
                                train=tiny_sgd.model_copy(update={"max_steps": 100}),
                                analyses={"sharpness": {}}, claims=RULES, runs={
        run_id(RandomLabelsRun(label_noise=p, seed=s)): RandomLabelsRun(label_noise=p, seed=s)
        for s in (0, 1) for p in (0.0, 1.0)})
    datasets = pipeline_datasets(spec, config)
    assert datasets["p0-s0"] is datasets["p1-s0"]  # two draws, one per seed
    assert not (datasets["p0-s0"].train.x == datasets["p0-s1"].train.x).all()
    assert_group_trains_each_run_as_alone(spec, config, datasets)
