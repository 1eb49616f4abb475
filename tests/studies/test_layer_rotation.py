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
from genlab.settings import MLPSettings, TrainSettings
from genlab.studies.layer_rotation.claims import (
    check_claims,
    diagnosis,
    seed_statistics,
    summarize,
)
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
    assert run_id(RotationRun(optimizer="layca", init="glorot", lr=0.003,
                              seed=2)) == "layca-glorot-lr0_003-s2"
    with pytest.raises(ValidationError, match="low"):
        config({"sgd-lr0_1-s0": {"optimizer": "sgd", "lr": 0.1, "seed": 0}}, low=0.9, high=0.3)


def metrics(optimizer: str, lr: float, seed: int, rotation: float, acc: float,
            spread: float = 0.0, init: str = "torch") -> dict:
    return {"optimizer": optimizer, "init": init, "lr": lr, "seed": seed, "status": "budget",
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


def test_each_initialisation_is_its_own_condition_with_its_diagnosis() -> None:
    """Torch-default and Glorot runs are judged apart (the Layca claim fails under one and holds
    under the other), and the diagnosis reports each group's fit, by rate."""
    runs = {}
    for seed in range(3):
        for init, high_acc in (("torch", 0.1), ("glorot", 0.75)):
            runs[f"layca-{init}-hi-s{seed}"] = metrics("layca", 0.3, seed, 0.95,
                                                       high_acc + 0.01 * seed, init=init)
            runs[f"layca-{init}-lo-s{seed}"] = metrics("layca", 0.001, seed, 0.1, 0.5, init=init)
    claims = check_claims(runs, RotationClaims(**RULES), 0.9, 0.3)
    wins = {c.condition: c for c in claims if c.key == "high_rotation_wins"}
    assert {k: c.status for k, c in wins.items()} == {"torch init": "not_reproduced",
                                                      "glorot init": "reproduced"}
    assert wins["glorot init"].effect["estimate"] == pytest.approx(26.0)
    assert len(claims) == 6 and {c.numbers["init"] for c in claims} == {"torch", "glorot"}
    lines = diagnosis(runs, 0.9)
    assert lines[0].startswith("Cause: the setting")
    assert lines[1] == ("torch init, layca (mean over seeds, by rho): 0.001: train 100%, test "
                        "50.0%, rotation 0.10-0.10; 0.3: train 100%, test 11.0%, rotation "
                        "0.95-0.95.")
    assert lines[2].startswith("glorot init, layca") and "test 76.0%" in lines[2]
    assert diagnosis({}, 0.9) == []


def test_glorot_uniform_draws_keras_defaults_from_its_seed() -> None:
    """Kernels within ±√(6/(fan_in+fan_out)) with the uniform's variance 2/(fan_in+fan_out),
    biases zero; the same seed gives the same weights, another seed others."""
    from genlab.models.registry import build_seeded_model, glorot_uniform_

    def net(seed: int):
        return glorot_uniform_(build_seeded_model("mlp", MLPSettings(hidden=[300, 200]), 400,
                                                  10, 0, CPU), seed)

    model = net(1)
    layers = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(layers) == 3
    for layer in layers:
        fan_out, fan_in = layer.weight.shape
        bound = (6 / (fan_in + fan_out)) ** 0.5
        assert layer.weight.abs().max() <= bound
        # a uniform's sample variance of n draws has relative s.e. √(0.8/n) (kurtosis 9/5):
        # within 5 of them of 2/(fan_in+fan_out) (10% at the last layer's 2,000 draws)
        n = layer.weight.numel()
        assert float(layer.weight.var()) == pytest.approx(2 / (fan_in + fan_out),
                                                          rel=5 * (0.8 / n) ** 0.5)
        assert torch.count_nonzero(layer.bias) == 0
    same, other = net(1), net(2)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), same.parameters(),
                                                 strict=True))
    assert not torch.equal(layers[0].weight, next(other.parameters()))


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
    assert [c.condition for c in summary.claims] == ["torch init"] * 3
    drawn = figures(json.loads(dumps_json(summary.data)), summary.table)
    assert len(drawn) == 3


def test_a_glorot_run_starts_from_glorot_weights() -> None:
    """The init condition reaches training: a glorot run's recorded init, and its first layer
    rotating away from Glorot-uniform weights (zero biases), not torch's default draw."""
    from genlab.models.registry import build_seeded_model, glorot_uniform_

    runs = {"layca-glorot-lr0_1-s0": {"optimizer": "layca", "init": "glorot", "lr": 0.1,
                                      "seed": 0}}
    cfg = config(runs)
    result = SPEC.train_run(cfg, "layca-glorot-lr0_1-s0", SPEC.synthesize(cfg), CPU)
    assert result.metrics["init"] == "glorot" and result.metrics["status"] == "budget"
    start = glorot_uniform_(build_seeded_model("mlp", cfg.model, 40, 10, 0, CPU), 0)
    default = build_seeded_model("mlp", cfg.model, 40, 10, 0, CPU)
    trained = result.weights
    first = next(k for k in trained if k.endswith("weight"))
    w0 = dict(start.state_dict())[first].flatten()
    w_default = dict(default.state_dict())[first].flatten()
    w = trained[first].flatten()
    # Layca turns each kernel by a fixed angle from where it started: the distance from the
    # Glorot start matches the recorded rotation, the one from torch's draw does not
    rotation = result.metrics["rotation_by_layer"][0]
    assert float(1 - torch.nn.functional.cosine_similarity(w, w0, dim=0)) == pytest.approx(
        rotation, abs=1e-6)
    assert abs(float(1 - torch.nn.functional.cosine_similarity(w, w_default, dim=0))
               - rotation) > 0.05
