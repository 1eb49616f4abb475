"""The neural-collapse study: the terminal-phase statistics, each claim check's decision, and one
tiny tracked run."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from genlab.studies import load_study
from genlab.studies.neural_collapse.claims import (
    CLAIMS,
    PAPER_STEPS,
    check_claims,
    diagnosis,
    paper_exposure,
    summarize,
)
from genlab.studies.neural_collapse.experiment import (
    NC_COLUMNS,
    SPEC,
    schedule_statistics,
    terminal_phase_statistics,
    train_settings,
)
from genlab.studies.neural_collapse.settings import (
    CollapseClaims,
    CollapseConfig,
    CollapseRecipe,
    CollapseRun,
    run_id,
)
from tests_support import broken, held

CLAIM_ORDER = ("nc1", "nc3", "nc4", "nc2")


def rows(acc: list[float], nc1: list[float], nc3: list[float], nc4: float = 0.0,
         cosine: float = -1 / 3, spread: list[float] | None = None) -> list[dict]:
    """A history every 100 steps; the other NC2 columns are flat, NC4 and the cosine end as
    given, the cosines' spread (NC2 equiangularity) falls unless given."""
    out = []
    spread = spread or [0.4 - 0.05 * i for i in range(len(acc))]
    for i, (a, n1, n3, sd) in enumerate(zip(acc, nc1, nc3, spread, strict=True)):
        row = {c: 0.1 for c in NC_COLUMNS}
        row |= {"step": 100 * i, "train_acc": a, "train_loss": 0.1, "nc1": n1, "nc3": n3,
                "nc4": nc4, "mean_cosine": cosine, "nc2_equiangular": sd}
        out.append(row)
    return out


def metrics(history: list[dict], seed: int = 0, status: str = "budget",
            n_classes: int = 4, scale: float = 2.0) -> dict:
    return {"seed": seed, "mean_scale": scale, "status": status, "diverged_step": None,
            "n_classes": n_classes, **terminal_phase_statistics(history)}


FIT = [0.5, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]  # the TPT starts at step 200: 6 tracked steps
FALLING = [0.9, 0.5, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1]
COLLAPSING = [0.9, 0.5, 0.4, 0.1, 0.05, 0.02, 0.01, 0.003]  # two orders of magnitude in the TPT
RULES = CollapseClaims(nc1=">= 1", nc3="<= -0.9", nc2="> 0")


def statuses(m: dict[str, dict]) -> dict[str, str]:
    return dict(zip(CLAIM_ORDER, (c.status for c in check_claims(m, RULES)), strict=True))


def seeds(history: list[dict], n: int = 3, **kw) -> dict[str, dict]:
    return {f"s{k}": metrics(history, seed=k, **kw) for k in range(n)}


def test_registered_with_canonical_run_ids() -> None:
    assert load_study("neural_collapse") is SPEC
    assert run_id(CollapseRun(mean_scale=1.0, seed=3)) == "m1-s3"


def test_terminal_phase_starts_at_the_first_step_at_full_accuracy() -> None:
    stats = terminal_phase_statistics(rows(FIT, FALLING, FALLING, nc4=0.002, cosine=-0.33))
    assert stats["tpt_step"] == 200 and stats["tpt_points"] == 6
    assert stats["tpt_start_nc1"] == 0.4 and stats["final_nc1"] == 0.1
    assert stats["spearman_nc1"] == pytest.approx(-1.0)
    assert stats["tpt_start_nc2_equiangular"] == pytest.approx(0.3)
    assert stats["spearman_nc2_equiangular"] == pytest.approx(-1.0)
    assert stats["tpt_length_ratio"] == pytest.approx(3.5)
    assert stats["final_nc4"] == 0.002 and stats["final_mean_cosine"] == -0.33


def test_spearman_is_over_the_terminal_phase_only() -> None:
    # NC1 rises before the TPT and falls within it: the pre-TPT rise must not count
    nc1 = [0.01, 0.05, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1]
    assert terminal_phase_statistics(rows(FIT, nc1, FALLING))["spearman_nc1"] == pytest.approx(-1)


def test_the_papers_picture_reproduces_every_claim() -> None:
    m = seeds(rows(FIT, COLLAPSING, FALLING, nc4=0.0, cosine=-0.325))
    m["s1"] = metrics(rows(FIT, COLLAPSING[:-1] + [0.002], FALLING, nc4=0.01), seed=1)
    assert statuses(m) == {k: held(CLAIMS[k]) for k in CLAIM_ORDER}
    nc1 = check_claims(m, RULES)[0]
    assert nc1.condition == "spread=2" and nc1.effect["n"] == 3
    assert nc1.numbers["by_seed"]["0"] == pytest.approx(math.log10(0.4 / 0.003))


def test_a_fall_short_of_an_order_of_magnitude_does_not_reproduce_nc1() -> None:
    # NC1 0.4 -> 0.1 over the terminal phase: a steady fall, but not the collapse claimed
    assert statuses(seeds(rows(FIT, FALLING, FALLING)))["nc1"] == "not_reproduced"


@pytest.mark.parametrize(("history", "failing"), [
    (rows(FIT, COLLAPSING, FALLING[:3] + [0.45, 0.42, 0.5, 0.48, 0.5]), {"nc3"}),
    (rows(FIT, COLLAPSING, FALLING, nc4=0.011), {"nc4"}),
    # the cosines no more equal at the end than at the TPT start
    (rows(FIT, COLLAPSING, FALLING, spread=[0.4, 0.3, 0.2, 0.1, 0.15, 0.1, 0.2, 0.25]), {"nc2"}),
])
def test_each_claim_can_fail(history: list[dict], failing: set[str]) -> None:
    m = seeds(history)
    assert statuses(m) == {k: broken(CLAIMS[k]) if k in failing else held(CLAIMS[k])
                           for k in CLAIM_ORDER}


def test_each_spread_gets_its_own_entries() -> None:
    m = seeds(rows(FIT, COLLAPSING, FALLING)) | {
        f"m1-{k}": metrics(rows(FIT, COLLAPSING, [0.1, 0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55]),
                           seed=k, scale=1.0) for k in range(3)}
    claims = check_claims(m, RULES)
    assert [(c.key, c.condition) for c in claims[:2]] == [("nc1", "spread=1"),
                                                           ("nc1", "spread=2")]
    nc3 = {c.condition: c.status for c in claims if c.key == "nc3"}
    assert nc3 == {"spread=1": "not_reproduced", "spread=2": "reproduced"}


def test_never_fitting_leaves_every_claim_not_run_with_the_reason() -> None:
    claims = check_claims(seeds(rows([0.5] * 8, FALLING, FALLING)), RULES)
    assert [c.status for c in claims] == ["not_run"] * 4
    assert all(c.numbers["not_checked"]["seed=0"] == "never reached 100% train accuracy"
               for c in claims)


def test_a_short_terminal_phase_cannot_decide_a_trend() -> None:
    late = [0.5] * 5 + [1.0] * 3  # 3 tracked steps in the TPT
    # NC1's claim is a fall from the TPT's start to its end, not a trend: it is judged
    assert statuses(seeds(rows(late, FALLING, FALLING))) == {
        "nc1": "not_reproduced", "nc3": "not_run", "nc4": "passed", "nc2": "reproduced"}


def test_a_failing_run_outweighs_an_unchecked_one_in_the_control() -> None:
    m = {"s0": metrics(rows([0.5] * 8, FALLING, FALLING)),
         "s1": metrics(rows(FIT, FALLING, FALLING, nc4=0.5), seed=1)}
    nc4 = check_claims(m, RULES)[2]
    assert nc4.kind == "control" and nc4.status == "failed"
    assert set(nc4.numbers["final_nc4"]) == {"seed=0", "seed=1"} and "not_checked" in nc4.numbers


def test_a_diverged_run_is_not_checked() -> None:
    m = {"s0": {**metrics(rows([0.5, 0.6], [0.3, 0.2], [0.3, 0.2])), "status": "diverged",
                "diverged_step": 150}}
    claims = check_claims(m, RULES)
    assert [c.status for c in claims] == ["not_run"] * 4
    assert claims[0].numbers["not_checked"]["seed=0"] == "diverged at step 150"


def recipe(**overrides) -> CollapseRecipe:
    return CollapseRecipe(**{"lr": 0.05, "weight_decay": 5e-4, "batch_size": 10, "steps": 300,
                             "track_every": 10, **overrides})


@pytest.mark.parametrize(("steps", "drops"), [(300, 2), (301, 2), (299, 2), (10, 3), (7, 1)])
def test_the_schedule_divides_the_step_size_exactly_lr_drops_times(steps: int,
                                                                   drops: int) -> None:
    from genlab.train.loop import lr_factor

    s = train_settings(recipe(steps=steps, lr_drops=drops, track_every=1))
    factors = [lr_factor(s, step) for step in range(1, steps + 1)]
    assert factors[0] == 1.0 and factors[-1] == pytest.approx(0.1 ** drops)
    assert s.stop_at_train_acc is None and s.max_steps == steps


def test_no_drops_is_a_constant_step_size() -> None:
    s = train_settings(recipe(lr_drops=0))
    assert s.schedule == "constant" and s.step_every is None


def test_weight_decay_exposure_sums_the_schedule_and_nc1_is_read_before_the_first_drop() -> None:
    """300 steps, two drops: 100 updates at η₀, 100 at η₀/10, 100 at η₀/100, so λ·Σ η_t is
    111·λη₀ over the run and 5 + 1 = 6·λη₀ from step 150 on; the first drop follows step 100."""
    s = train_settings(recipe(steps=300, lr_drops=2))
    history = [{"step": step, "nc1": 1.0 / (1 + step)} for step in range(0, 301, 50)]
    out = schedule_statistics(history, s, tpt_step=150)
    assert out["weight_decay_exposure"] == pytest.approx(111 * 0.05 * 5e-4, rel=1e-12)
    assert out["weight_decay_exposure_tpt"] == pytest.approx(6 * 0.05 * 5e-4, rel=1e-12)
    assert out["first_drop_step"] == 100 and out["nc1_at_first_drop"] == 1.0 / 101
    assert schedule_statistics(history, s, tpt_step=None)["weight_decay_exposure_tpt"] is None
    flat = schedule_statistics(history, train_settings(recipe(lr_drops=0)), tpt_step=0)
    assert flat["weight_decay_exposure"] == pytest.approx(300 * 0.05 * 5e-4, rel=1e-12)
    assert "nc1_at_first_drop" not in flat


def test_the_papers_exposure_is_its_cifar10_schedule() -> None:
    assert PAPER_STEPS == 350 * 391
    assert paper_exposure(0.05, 5e-4) == pytest.approx(5e-4 * 0.05 * PAPER_STEPS * 1.11 / 3)


def test_the_diagnosis_reports_each_spreads_numbers_from_its_runs() -> None:
    history = rows(FIT, FALLING, FALLING)
    s = train_settings(recipe(steps=700, lr_drops=2, track_every=100))
    runs = {}
    for scale in (1.0, 2.0):
        for seed in range(2):
            m = metrics(history, seed=seed, scale=scale)
            m |= schedule_statistics(history, s, m["tpt_step"]) | {"final_train_loss": 0.1}
            runs[f"m{scale:g}-s{seed}"] = m
    lines = diagnosis(runs, tiny_config(700).model_copy(update={"recipe": recipe(steps=700)}))
    assert lines[0].startswith("Cause:") and len(lines) == 3
    fall = math.log10(0.4 / 0.1)  # FALLING at the TPT's start (step 200) and at the end
    assert lines[1].startswith("spread=1 (mean of 2 seeds)") and f"{fall:.2f} orders" in lines[1]
    assert "starts at step 200 of 700" in lines[1] and lines[2].startswith("spread=2")
    never = {"m2-s0": metrics(rows([0.5] * 8, FALLING, FALLING))}
    assert diagnosis(never, tiny_config()) == []


def test_tracking_must_fit_in_the_budget() -> None:
    with pytest.raises(ValidationError, match="track_every"):
        recipe(steps=10, track_every=20)


def tiny_config(steps: int = 300) -> CollapseConfig:
    return CollapseConfig.model_validate({
        "data": {"n_classes": 3, "dim": 4, "mean_scale": 3.0, "n_train": 60, "n_test": 30,
                 "seed": 0},
        "model": {"hidden": [16, 16]},
        "recipe": {"lr": 0.05, "weight_decay": 5e-4, "batch_size": 20, "steps": steps,
                   "track_every": 25},
        "claims": RULES.model_dump(),
        "runs": {"m2-s0": {"mean_scale": 2.0, "seed": 0}, "m2-s1": {"mean_scale": 2.0, "seed": 1}}})


def test_a_tiny_tracked_run_and_its_summary() -> None:
    config = tiny_config()
    dataset = SPEC.synthesize(config)
    artifacts = {run: SPEC.train_run(config, run, dataset, torch.device("cpu"))
                 for run in config.runs}
    history = artifacts["m2-s0"].history.to_pylist()
    assert [r["step"] for r in history] == list(range(0, 301, 25))  # no stop at 100% accuracy
    assert all(0 <= r["nc4"] <= 1 and r["nc1"] >= 0 and math.isfinite(r["nc3"])
               for r in history)
    m = artifacts["m2-s0"].metrics
    assert m["status"] == "budget" and m["steps"] == 300
    assert m["tpt_step"] is not None  # 3 well-separated clusters: fitted early
    assert m["final_nc1"] == history[-1]["nc1"]
    assert {"net.0.weight", "net.4.weight"} <= set(artifacts["m2-s0"].weights)

    summary = summarize(config, {r: a.metrics for r, a in artifacts.items()},
                        {r: a.history for r, a in artifacts.items()})
    assert [c.claim[:3] for c in summary.claims] == ["NC1", "NC3", "NC4", "NC2"]
    assert summary.table.num_rows == 2 * len(history)
    assert {"run", "seed", "tpt_step", *NC_COLUMNS} <= set(summary.table.column_names)
    assert summary.data["diagnosis"][0].startswith("Cause:")
    assert m["weight_decay_exposure"] > m["weight_decay_exposure_tpt"] > 0

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from genlab.studies.neural_collapse.figures import figures

    ((title, fig),) = figures(summary.data, summary.table)
    assert "terminal phase" in title
    plt.close(fig)


def test_the_probe_reads_the_last_hidden_layer() -> None:
    from genlab.analyses.measures.collapse import neural_collapse
    from genlab.models.registry import build_seeded_model
    from genlab.studies.neural_collapse.experiment import collapse_probe

    config = tiny_config()
    dataset = SPEC.synthesize(config)
    model = build_seeded_model("mlp", config.model, 4, 3, 0).eval()
    x, y = torch.from_numpy(dataset.train.x), torch.from_numpy(dataset.train.y)
    with torch.no_grad():
        features = model.net[:-1](x)  # (n, 16): everything but the head
    expected = neural_collapse(features, y, model.net[-1].weight, model.net[-1].bias)
    probed = collapse_probe(x, y)(model)
    assert probed == pytest.approx({c: getattr(expected, c) for c in NC_COLUMNS})


def test_the_probe_of_a_blown_up_model_is_nan_not_an_error() -> None:
    from genlab.models.registry import build_seeded_model
    from genlab.studies.neural_collapse.experiment import collapse_probe

    model = build_seeded_model("mlp", tiny_config().model, 4, 3, 0)
    with torch.no_grad():
        model.net[0].weight.fill_(math.inf)
    x = torch.ones(6, 4)
    probed = collapse_probe(x, torch.tensor([0, 1, 2, 0, 1, 2]))(model)
    assert all(math.isnan(v) for v in probed.values())


# ------------------------------------------------------------- the post-hoc analyses' objective


def as_analysed(result, objective, folder):
    """The run's model as the analyze stage loads it, from the weights train_run made."""
    from genlab.io import write_safetensors
    from genlab.models.registry import load_model

    weights = folder / "model.safetensors"
    spec = {**result.model_spec, "weights_sha256": write_safetensors(weights, result.weights)}
    return load_model(spec, weights).to(torch.device("cpu"))


def sharpness_record(model, objective) -> dict:
    """The registry's sharpness record (wherever its module lives), cheaply set."""
    import importlib

    from genlab.analyses.registry import ANALYSES
    from genlab.analyses.settings import SharpnessSettings

    module, _, function = ANALYSES["sharpness"].record.partition(":")
    settings = SharpnessSettings(max_iter=10, trace_num_matvecs=6, density_num_repeats=1,
                                 density_num_steps=5)
    record, _ = getattr(importlib.import_module(module), function)(model, objective, settings,
                                                                   lambda: None)
    return record


def test_the_analyses_objective_is_the_loss_the_run_minimised(tmp_path) -> None:
    """At the trained weights, the objective's loss is the train loss of the run's last history
    row: the same float32 forward pass on the same 60 inputs and labels, the history's summed
    then divided by n, the objective's a mean, so a few ulps apart (rel 1e-6). Folding in the
    weight decay ((λ/2)‖θ‖², about 0.01 here, more than the loss itself) or other labels would
    be far outside it."""
    config = tiny_config()
    dataset = SPEC.synthesize(config)
    result = SPEC.train_run(config, "m2-s0", dataset, torch.device("cpu"))
    objective = SPEC.objective(config, "s0", dataset, torch.device("cpu"))
    model = as_analysed(result, objective, tmp_path)
    with torch.no_grad():
        loss = objective.loss_fn(model(objective.X), objective.y).item()
    assert loss == pytest.approx(result.history.column("train_loss")[-1].as_py(), rel=1e-6)
    assert torch.equal(objective.y, torch.from_numpy(dataset.train.y))
    # the step size of the last third of the run: 0.05 divided by 10 twice
    assert objective.lr == pytest.approx(0.05 * 0.01)
    assert (objective.momentum, objective.batch_size, objective.weight_decay) == (0.9, 20, 5e-4)
    record = sharpness_record(model, objective)
    assert record["status"] == "done" and math.isfinite(record["lambda_max"])
    assert record["threshold"] == pytest.approx((2 + 2 * 0.9) / (0.05 * 0.01))
