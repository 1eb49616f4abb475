"""The layer_rotation study: Layca's step, the rotation measure, the claims' statistics on
hand-made metrics, and a tiny run end to end."""

from __future__ import annotations

import json
import math

import pytest
import torch
from pydantic import ValidationError

from genlab.analyses.measures.norms import layer_rotations
from genlab.io import dumps_json
from genlab.settings import TrainSettings
from genlab.studies.layer_rotation.claims import check_claims, seed_statistics, summarize
from genlab.studies.layer_rotation.experiment import SPEC, train_settings
from genlab.studies.layer_rotation.figures import figures
from genlab.studies.layer_rotation.settings import (
    LayerRotationConfig,
    RotationClaims,
    RotationRecipe,
    RotationRun,
    run_id,
)
from genlab.train.layca import Layca
from genlab.train.loop import lr_factor

CPU = torch.device("cpu")
RULES = {"rotation_rises_with_lr": "> 0", "accuracy_rises_with_rotation": "> 0",
         "high_rotation_wins": "> 0"}


def config(runs: dict, **changes) -> LayerRotationConfig:
    return LayerRotationConfig.model_validate({
        "data": {"num_samples": 400, "seed": 0}, "model": {"hidden": [8, 8]},
        "recipe": {"batch_size": 32, "steps": 60, "eval_every": 20}, "claims": RULES,
        "runs": runs, **changes})


def test_layca_turns_each_kernel_by_its_rate_and_keeps_its_norm() -> None:
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(5, 4, dtype=torch.float64))
    b = torch.nn.Parameter(torch.randn(5, dtype=torch.float64))
    before_w, before_b = w.detach().clone(), b.detach().clone()
    w.grad, b.grad = torch.randn(5, 4, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    rho = 0.1
    Layca([w, b], lr=rho).step()
    after = w.detach()
    assert torch.equal(b.detach(), before_b)  # biases are not trained
    assert float(after.norm()) == pytest.approx(float(before_w.norm()), rel=1e-12)
    # the tangent step of length ρ‖w‖, then the projection back on the sphere: angle arctan ρ
    cosine = float((after * before_w).sum() / (after.norm() * before_w.norm()))
    assert math.acos(min(1.0, cosine)) == pytest.approx(math.atan(rho), rel=1e-10)
    # and it moves against the gradient's tangent part
    g = w.grad - (w.grad * before_w).sum() / before_w.norm() ** 2 * before_w
    assert float(((after - before_w) * g).sum()) < 0
    with pytest.raises(ValueError):
        Layca([w], lr=0.0)


def test_the_rotation_is_the_cosine_distance_per_layer() -> None:
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])

    def net(*weights: torch.Tensor) -> torch.nn.Sequential:
        layers = [torch.nn.Linear(2, 2) for _ in weights]
        with torch.no_grad():
            for layer, w in zip(layers, weights, strict=True):
                layer.weight.copy_(w)
        return torch.nn.Sequential(*layers)

    turned = net(a, -a, torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
    assert layer_rotations(turned, net(a, a, a)).tolist() == pytest.approx([0.0, 2.0, 1.0])


def test_the_schedule_decays_after_each_fraction() -> None:
    recipe = RotationRecipe(batch_size=8, steps=100, decay_at=(0.5, 0.9), decay=0.2,
                            eval_every=10)
    s = train_settings("layca", 0.1, recipe)
    assert isinstance(s, TrainSettings) and s.step_at == (50, 90)
    assert [lr_factor(s, k) for k in (1, 50, 51, 90, 91, 100)] == pytest.approx(
        [1, 1, 0.2, 0.2, 0.04, 0.04])
    with pytest.raises(ValidationError, match="increasing"):
        RotationRecipe(batch_size=8, steps=100, decay_at=(0.9, 0.5), eval_every=10)
    with pytest.raises(ValidationError, match="weight_decay"):
        TrainSettings(optimizer="layca", lr=0.1, batch_size=8, max_steps=10, eval_every=5,
                      weight_decay=1e-4)


def test_run_ids_and_settings() -> None:
    assert run_id(RotationRun(optimizer="layca", lr=0.003, seed=2)) == "layca-lr0_003-s2"
    with pytest.raises(ValidationError, match="low"):
        config({"sgd-lr0_1-s0": {"optimizer": "sgd", "lr": 0.1, "seed": 0}}, low=0.9, high=0.3)


def metrics(optimizer: str, lr: float, seed: int, rotation: float, acc: float,
            spread: float = 0.0) -> dict:
    return {"optimizer": optimizer, "lr": lr, "seed": seed, "status": "budget",
            "mean_rotation": rotation, "min_rotation": rotation - spread,
            "max_rotation": rotation + spread, "final_test_acc": acc, "final_train_acc": 1.0}


def test_claims_from_per_seed_statistics() -> None:
    runs = {}
    for seed in range(3):
        for k, lr in enumerate((0.3, 0.1, 0.03, 0.01)):
            runs[f"sgd-{k}-s{seed}"] = metrics("sgd", lr, seed, 0.4 - 0.1 * k, 0.7 - 0.1 * k)
        runs[f"layca-hi-s{seed}"] = metrics("layca", 0.1, seed, 0.95, 0.65 + 0.01 * seed, 0.02)
        runs[f"layca-mid-s{seed}"] = metrics("layca", 0.03, seed, 0.6, 0.6, 0.3)
        runs[f"layca-lo-s{seed}"] = metrics("layca", 0.001, seed, 0.1, 0.3)
    stats = seed_statistics(runs, 0.9, 0.3)
    assert stats["rotation_rises_with_lr"][0] == pytest.approx(1.0)
    assert stats["high_runs"][0] == ["layca-hi-s0"] and stats["low_runs"][0] == ["layca-lo-s0"]
    assert stats["high_rotation_wins"][1] == pytest.approx(36.0)
    claims = check_claims(runs, RotationClaims(**RULES), 0.9, 0.3)
    assert [c.status for c in claims] == ["reproduced"] * 3
    # accuracy falling with rotation: that claim fails, the others stand
    for seed in range(3):
        for k in range(4):
            runs[f"sgd-{k}-s{seed}"]["final_test_acc"] = 0.4 + 0.1 * k
    assert [c.status for c in check_claims(runs, RotationClaims(**RULES), 0.9, 0.3)] == [
        "reproduced", "not_reproduced", "reproduced"]
    # no Layca run in the high group: that claim cannot be measured
    for seed in range(3):
        runs[f"layca-hi-s{seed}"]["min_rotation"] = 0.5
    assert check_claims(runs, RotationClaims(**RULES), 0.9, 0.3)[2].status == "not_run"
    # a diverged run is left out and named
    runs["sgd-0-s0"] |= {"status": "diverged", "mean_rotation": None}
    claim = check_claims(runs, RotationClaims(**RULES), 0.9, 0.3)[0]
    assert claim.numbers["diverged"] == ["sgd-0-s0"]


def test_tiny_runs_end_to_end() -> None:
    runs = {run_id(RotationRun(optimizer=o, lr=lr, seed=0)): {"optimizer": o, "lr": lr,
                                                              "seed": 0}
            for o, lr in (("sgd", 0.3), ("sgd", 0.03), ("sgd", 0.003), ("layca", 0.1))}
    cfg = config(runs)
    dataset = SPEC.synthesize(cfg)
    results = SPEC.train_group(cfg, list(runs), {n: dataset for n in runs}, CPU)
    for name, result in results.items():
        m = result.metrics
        assert m["status"] == "budget" and m["steps"] == 60 and m["layers"] == 3
        history = result.history
        assert history.column("step").to_pylist() == [0, 20, 40, 60]
        assert history.column("rotation_0").to_pylist()[0] == pytest.approx(0.0, abs=1e-12)
        assert history.column("rotation_2").to_pylist()[-1] == pytest.approx(
            m["rotation_by_layer"][2])
        # the group trains each run as train_run does
        again = SPEC.train_run(cfg, name, dataset, CPU)
        assert dumps_json(again.metrics) == dumps_json(m)
    sgd = [results[n].metrics["mean_rotation"] for n in ("sgd-lr0_3-s0", "sgd-lr0_003-s0")]
    assert sgd[0] > sgd[1]  # 100× the step size turns the layers further even in 60 steps
    metrics_json = {k: json.loads(dumps_json(r.metrics)) for k, r in results.items()}
    summary = summarize(cfg, metrics_json, {k: r.history for k, r in results.items()})
    assert summary.table.num_rows == 4
    assert [c.status for c in summary.claims] == ["not_run"] * 3  # one seed: no interval
    drawn = figures(json.loads(dumps_json(summary.data)), summary.table)
    assert len(drawn) == 3
