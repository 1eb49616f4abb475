"""Geiping et al.'s recipes (genlab.train.penalised_gd): the penalised gradient against a dense
float64 Hessian, the schedule against their schedulers' formulas, clipping, and the loop."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError
from torch import nn
from torch.nn import functional as F

from genlab.train.penalised_gd import blocks, penalised_gradient, step_size, train
from genlab.train.penalised_gd_settings import PenalisedGDRecipe


def tiny_problem(n: int = 24, seed: int = 0) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A tanh MLP in float64 (smooth, so its Hessian is exact and nonzero) on random data."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3)).double()
    x = torch.randn(n, 5, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (n,), generator=g)
    return model, x, y


def flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def block_loss_of_flat(model: nn.Module, x: torch.Tensor, y: torch.Tensor):
    """L_b(θ) as a function of the flat parameter vector (for autograd.functional)."""
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]

    def loss(theta: torch.Tensor) -> torch.Tensor:
        params, offset = {}, 0
        for name, shape in zip(names, shapes, strict=True):
            size = math.prod(shape)
            params[name] = theta[offset:offset + size].reshape(shape)
            offset += size
        return F.cross_entropy(torch.func.functional_call(model, params, (x,)), y)

    return loss


def test_the_penalised_gradient_is_g_plus_c_hg_per_block_against_a_dense_hessian() -> None:
    model, x, y = tiny_problem()
    xb, yb = blocks(x, y, 8)
    c = 0.37
    got, loss, squared = penalised_gradient(model, xb, yb, c)
    got_flat = torch.cat([got[n].reshape(-1) for n, _ in model.named_parameters()])
    theta = flat(model)
    expected, losses, norms = torch.zeros_like(theta), [], []
    for b in range(3):
        f = block_loss_of_flat(model, xb[b], yb[b])
        g = torch.autograd.functional.jacobian(f, theta)
        h = torch.autograd.functional.hessian(f, theta)
        expected += (g + c * h @ g) / 3
        losses.append(float(f(theta)))
        norms.append(float(g @ g))
    torch.testing.assert_close(got_flat, expected, rtol=1e-10, atol=1e-12)
    assert loss == pytest.approx(sum(losses) / 3, rel=1e-12)
    assert squared == pytest.approx(sum(norms) / 3, rel=1e-12)
    # the penalty's term is not negligible here, so the test tells c·Hg from 0
    plain, _, _ = penalised_gradient(model, xb, yb, 0.0)
    plain_flat = torch.cat([plain[n].reshape(-1) for n, _ in model.named_parameters()])
    assert float((got_flat - plain_flat).norm()) > 1e-3 * float(plain_flat.norm())
    # with c = 0 the mean of equal blocks' gradients is the full-batch gradient
    full = torch.autograd.functional.jacobian(block_loss_of_flat(model, x, y), theta)
    torch.testing.assert_close(plain_flat, full, rtol=1e-12, atol=1e-14)


def test_blocks_must_divide_the_set() -> None:
    model, x, y = tiny_problem(n=24)
    xb, yb = blocks(x, y, 6)
    assert xb.shape == (4, 6, 5) and yb.shape == (4, 6)
    assert torch.equal(xb[1], x[6:12])  # fixed consecutive blocks
    with pytest.raises(ValueError, match="does not divide"):
        blocks(x, y, 5)


def recipe(**changes) -> PenalisedGDRecipe:
    base = {"stochastic": False, "lr": 0.4, "steps": 30, "warmup": 4, "cosine_steps": 40,
            "eval_every": 10}
    return PenalisedGDRecipe(**{**base, **changes})


def test_the_schedule_warms_up_from_zero_then_decays_on_a_cosine() -> None:
    r = recipe()
    assert [step_size(r, t) for t in range(5)] == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])
    # their CosineAnnealingLR(T_max=40) counting from the end of the warm-up
    assert step_size(r, 24) == pytest.approx(0.4 * 0.5 * (1 + math.cos(math.pi * 20 / 40)))
    assert step_size(r, 24) == pytest.approx(0.2)
    assert step_size(recipe(cosine_steps=None), 4 + 30) == pytest.approx(0.0, abs=1e-15)


def test_recipe_settings_are_checked() -> None:
    with pytest.raises(ValidationError, match="batch_size"):
        recipe(stochastic=True)
    with pytest.raises(ValidationError, match="takes no batch_size"):
        recipe(batch_size=10)
    with pytest.raises(ValidationError, match="penalty is for full-batch"):
        recipe(stochastic=True, batch_size=10, penalty=0.5)
    with pytest.raises(ValidationError, match="warmup"):
        recipe(warmup=30)
    with pytest.raises(ValidationError, match="nesterov"):
        recipe(momentum=0.0)


def test_a_clipped_step_has_the_clip_length() -> None:
    model, x, y = tiny_problem()
    x = 30 * x  # large inputs, large gradient: the clip binds
    before = flat(model)
    r = recipe(lr=0.5, steps=2, warmup=1, momentum=0.0, nesterov=False, weight_decay=0.0,
               grad_clip=0.01, eval_every=2)
    result = train(model, x, y, x, y, r, torch.Generator().manual_seed(0))
    # step 0 of the warm-up has η = 0; step 1 moves by η·clip exactly
    assert result.history[-1].probes["grad_norm"] > 0.01
    assert float((flat(model) - before).norm()) == pytest.approx(
        0.5 * 0.01 * result.history[-1].probes["grad_norm"]
        / (result.history[-1].probes["grad_norm"] + 1e-6), rel=1e-9)


def test_training_is_deterministic_and_records_every_row() -> None:
    for r in (recipe(), recipe(penalty=0.5, block_size=8, grad_clip=1.0),
              recipe(stochastic=True, batch_size=5, steps=3, warmup=1, eval_every=1)):
        outcomes = []
        for _ in range(2):
            model, x, y = tiny_problem()
            result = train(model, x, y, x[:6], y[:6], r, torch.Generator().manual_seed(1))
            outcomes.append((flat(model), result))
        (a, ra), (b, rb) = outcomes
        assert torch.equal(a, b) and ra.history == rb.history
        assert ra.status == "budget" and ra.steps == r.steps
        assert [row.step for row in ra.history] == list(range(0, r.steps + 1, r.eval_every))
        assert ra.final.train_loss < ra.history[0].train_loss
        assert math.isfinite(ra.final.probes["block_grad_sq"]) == bool(r.penalty)


def test_a_diverged_run_is_recorded_as_diverged() -> None:
    for r in (recipe(), recipe(penalty=0.5, block_size=8),
              recipe(stochastic=True, batch_size=24, steps=3, warmup=1, eval_every=1)):
        model, x, y = tiny_problem()
        x[0, 0] = math.nan  # a non-finite loss at the first step
        result = train(model, x, y, x, y, r, torch.Generator().manual_seed(0))
        assert (result.status, result.steps, result.diverged_step) == ("diverged", 0, 1)
        assert len(result.history) == 1  # the step-0 row, kept
