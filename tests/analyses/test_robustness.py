"""L∞ PGD (genlab.analyses.robustness) against the closed form for linear models and the
properties every L∞ attack must have.

Reference: a two-class affine model z = x Wᵀ + b. The cross-entropy of label y is
softplus(−m) with the margin m(x) = w·x + c, w = w_y − w_o, c = b_y − b_o, a strictly decreasing
function of m, so the worst point of the ball ‖δ‖∞ ≤ ε minimises the margin:
min m(x + δ) = m(x) − ε‖w‖₁, at δ = −ε·sign(w) (and, with bounds [low, high], at the corner of
the ball-box intersection in that direction). The input gradient is −(1 − p_y)·w, whose signs are
−sign(w) at every iterate, so each PGD step moves every coordinate towards that corner, and
2.5ε of total travel reaches it from any random start: the attack must land on it exactly.
Margins are kept well below 37, where float64's p_y − 1 rounds to 0 (module docstring).

MLP properties (ball, bounds, monotonicity, PGD vs FGSM) use small random tanh networks in float64
with weights scaled ×2, so the loss is visibly non-linear over the balls used.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from genlab.analyses.robustness import pgd_linf, robust_accuracy

DIM = 8


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _linear(seed: int) -> nn.Linear:
    """Two-class affine model in float64 with N(0, 1) weights and biases."""
    g = _generator(seed)
    model = nn.Linear(DIM, 2).double()
    with torch.no_grad():
        model.weight.copy_(torch.randn(2, DIM, generator=g, dtype=torch.float64))
        model.bias.copy_(torch.randn(2, generator=g, dtype=torch.float64))
    return model


def _margin_parts(model: nn.Linear, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per point, w = w_y − w_o (n, D) and c = b_y − b_o (n,)."""
    W, b = model.weight.detach(), model.bias.detach()
    sign = (1 - 2 * y).to(W.dtype)  # +1 for y = 0, −1 for y = 1
    return sign[:, None] * (W[0] - W[1]), sign * (b[0] - b[1])


def _margin(model: nn.Linear, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """m = z_y − z_o evaluated through the model itself."""
    with torch.no_grad():
        z = model(x)
    return z.gather(1, y[:, None])[:, 0] - z.gather(1, (1 - y)[:, None])[:, 0]


def _mlp(seed: int, in_dim: int = 10, hidden: int = 32, classes: int = 3) -> nn.Sequential:
    """torch's default initialisation, U(±1/√fan_in), scaled ×2, drawn from a local generator
    (the global RNG is left alone)."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(in_dim, hidden), nn.Tanh(),
                          nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, classes))
    model = model.double()
    g = _generator(seed)
    with torch.no_grad():
        for layer in (model[1], model[3], model[5]):
            bound = 2.0 / layer.in_features**0.5
            for p in (layer.weight, layer.bias):
                p.copy_(bound * (2 * torch.rand(p.shape, generator=g, dtype=p.dtype) - 1))
    return model


def _mlp_data(model: nn.Module, seed: int, n: int = 400, shape: tuple[int, ...] = (10,),
              flip: float = 0.2) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian inputs labelled by the model, a fraction ``flip`` relabelled to another class so
    that some points are misclassified before any attack."""
    g = _generator(1000 + seed)
    x = torch.randn(n, *shape, generator=g, dtype=torch.float64)
    with torch.no_grad():
        y = model(x).argmax(dim=1)
    flipped = torch.rand(n, generator=g) < flip
    return x, torch.where(flipped, (y + 1) % 3, y)


# ------------------------------------------------------------------------- linear: closed form


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("eps", [0.05, 0.3, 1.0])
def test_linear_margin_matches_closed_form(seed: int, eps: float) -> None:
    model = _linear(seed)
    g = _generator(seed + 10)
    x = torch.randn(64, DIM, generator=g, dtype=torch.float64)
    y = torch.randint(0, 2, (64,), generator=g)
    w, c = _margin_parts(model, y)
    m = (w * x).sum(1) + c
    assert m.abs().max() < 30  # far from float64's softmax saturation (module docstring)

    x_adv = pgd_linf(model, x, y, eps, generator=_generator(seed))

    # The optimum is the corner x − ε·sign(w); the clamp to [x − ε, x + ε] returns the floats
    # x − ε and x + ε themselves, so the corner is reproduced bit for bit.
    assert torch.equal(x_adv, x - eps * torch.sign(w))
    # The attained margin against m − ε‖w‖₁: the two sides differ only by the rounding of a
    # length-8 dot product of O(10) terms, ~1e-14, so 1e-12 leaves two orders of slack.
    expected = m - eps * w.abs().sum(1)
    torch.testing.assert_close(_margin(model, x_adv, y), expected, rtol=0, atol=1e-12)


def test_linear_with_bounds_reaches_the_clamped_corner() -> None:
    model, eps, low, high = _linear(3), 0.4, -0.5, 1.0
    g = _generator(13)
    x = low + (high - low) * torch.rand(64, DIM, generator=g, dtype=torch.float64)
    y = torch.randint(0, 2, (64,), generator=g)
    w, _ = _margin_parts(model, y)

    x_adv = pgd_linf(model, x, y, eps, generator=_generator(3), bounds=(low, high))

    # The margin is linear, so over the box [max(x − ε, low), min(x + ε, high)] its minimum is
    # the corner in direction −sign(w); the coordinates the bounds cut are at low or high.
    assert torch.equal(x_adv, (x - eps * torch.sign(w)).clamp(low, high))
    assert bool(((x_adv >= low) & (x_adv <= high)).all())
    assert (x_adv - x).abs().max() <= eps + 1e-15


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.4, 1.5])
def test_linear_robust_accuracy_matches_closed_form(eps: float) -> None:
    model = _linear(5)
    g = _generator(15)
    x = torch.randn(1000, DIM, generator=g, dtype=torch.float64)
    y = torch.randint(0, 2, (1000,), generator=g)
    w, c = _margin_parts(model, y)
    m = (w * x).sum(1) + c
    threshold = eps * w.abs().sum(1)
    # Keep points whose worst-case margin is not within 1e-6 of 0: there the model's argmax and
    # the closed form could disagree through rounding (~1e-14) or the tie at exactly 0.
    keep = (m - threshold).abs() > 1e-6
    x, y, m, threshold = x[keep], y[keep], m[keep], threshold[keep]
    assert len(x) > 900

    expected = (m > threshold).double().mean().item()
    # batch_size 128 splits the points into 8 batches, so the batching is exercised too.
    got = robust_accuracy(model, x, y, eps, batch_size=128, generator=_generator(0))
    assert got == expected  # both are counts over len(x): exact equality
    assert 0 < expected < 1 or eps == 0


# ---------------------------------------------------------------- the ball, bounds, eps = 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("eps", [0.01, 0.3, 2.0])
def test_perturbation_stays_in_the_ball(dtype: torch.dtype, eps: float) -> None:
    model = _mlp(0)
    # x of shape (n, 2, 5): the attack works on any input shape (the model flattens it).
    x, y = _mlp_data(model, 0, n=200, shape=(2, 5))
    model, x = model.to(dtype), x.to(dtype)

    x_adv = pgd_linf(model, x, y, eps, generator=_generator(1))

    assert x_adv.shape == x.shape and x_adv.dtype == dtype and not x_adv.requires_grad
    # x_adv lies in [fl(x − ε), fl(x + ε)]: two roundings (forming x ± ε, subtracting x back) of
    # at most half an ulp of max|x| + ε each.
    tol = torch.finfo(dtype).eps * (float(x.abs().max()) + eps)
    assert float((x_adv - x).abs().max()) <= eps + tol
    # The ball is used, not just respected: with 2.5ε of travel most coordinates end on a face.
    assert float((x_adv - x).abs().max()) >= eps - tol


def test_bounds_are_respected() -> None:
    model = _mlp(1)
    g = _generator(2)
    x = torch.rand(200, 10, generator=g, dtype=torch.float64)
    with torch.no_grad():
        y = model(x).argmax(dim=1)
    for eps in (0.05, 0.5, 3.0):  # 3.0: the ball covers the whole box [0, 1]
        x_adv = pgd_linf(model, x, y, eps, generator=_generator(3), bounds=(0.0, 1.0))
        assert float(x_adv.min()) >= 0.0 and float(x_adv.max()) <= 1.0
        assert float((x_adv - x).abs().max()) <= eps + 1e-15
    with pytest.raises(ValueError, match="outside bounds"):
        pgd_linf(model, x + 2.0, y, 0.1, generator=_generator(3), bounds=(0.0, 1.0))


def test_eps_zero_returns_x_and_clean_accuracy() -> None:
    model = _mlp(2)
    x, y = _mlp_data(model, 2)
    x_adv = pgd_linf(model, x, y, 0.0, generator=_generator(0))
    assert torch.equal(x_adv, x) and x_adv is not x

    with torch.no_grad():
        clean = (model(x).argmax(dim=1) == y).double().mean().item()
    assert clean < 1  # the flipped labels make some points wrong before any attack
    assert robust_accuracy(model, x, y, 0.0, generator=_generator(0)) == clean


# -------------------------------------------------------------------------- monotonicity in ε


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_robust_accuracy_non_increasing_in_eps(seed: int) -> None:
    """The true robust accuracy is non-increasing in ε because the balls are nested. PGD only
    bounds it from above, and the search it runs at a larger ε is a different one, so a single
    point can survive at ε₂ the attack that broke it at ε₁ < ε₂: measured on 20 such models
    (seeds 0-19) × 7 consecutive pairs of this grid × 400 points, 5 point-level reversals,
    always outnumbered by the points newly broken at the larger ε, so the accuracy itself never
    rose. The attack is deterministic given the generator's seed, so this check is not flaky on
    a given build; the endpoint check below is the weaker property that would survive any
    reversal."""
    model = _mlp(seed)
    x, y = _mlp_data(model, seed)
    grid = [0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5]
    accs = [robust_accuracy(model, x, y, eps, generator=_generator(0)) for eps in grid]
    assert all(b <= a for a, b in zip(accs, accs[1:], strict=False)), accs
    # Largest against smallest: clean 0.76-0.83, at ε = 0.5 at most 0.19 over seeds 0-19.
    assert accs[-1] < accs[0] - 0.3, accs


def test_misclassified_points_stay_errors() -> None:
    """A point the attack happens to move into the right class still counts as an error.

    Logits (sin x, 0) on ℝ with y = 0: at x = −0.5, sin x < 0, so the point is misclassified.
    The loss gradient's sign there is −sign(cos x) = −1, so one step of ε = 3 lands at −3.5,
    where sin(−3.5) = 0.35 > 0: classified correctly after the attack, wrong before it."""

    class Sine(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat([torch.sin(x), torch.zeros_like(x)], dim=1)

    model = Sine()
    x, y = torch.tensor([[-0.5]], dtype=torch.float64), torch.tensor([0])
    x_adv = pgd_linf(model, x, y, 3.0, steps=1, step_size=3.0, random_start=False)
    assert torch.equal(x_adv, torch.tensor([[-3.5]], dtype=torch.float64))
    assert model(x_adv).argmax(dim=1).item() == 0 and model(x).argmax(dim=1).item() == 1
    assert robust_accuracy(model, x, y, 3.0, steps=1, step_size=3.0, random_start=False) == 0.0


def test_random_start_is_uniform_in_the_ball() -> None:
    """With one step of α = 1e-9·ε the result is the random start to within α (the clamp to
    the ball moves it by no more than that), so |δ|/ε should be uniform on [0, 1]: over 4000
    coordinates its mean has standard error 0.29/√4000 ≈ 0.005 and the fraction below 1/2 one
    of 0.5/√4000 ≈ 0.008; ±0.03 is over 3.5 of either."""
    model = _mlp(8)
    x, y = _mlp_data(model, 8)
    eps = 0.1
    x_adv = pgd_linf(model, x, y, eps, steps=1, step_size=1e-9 * eps, generator=_generator(4))
    ratio = (x_adv - x).abs() / eps
    assert float(ratio.max()) <= 1 + 1e-12
    assert abs(float(ratio.mean()) - 0.5) < 0.03
    assert abs(float((ratio < 0.5).double().mean()) - 0.5) < 0.03


# ------------------------------------------------------------- reproducibility, model state


def test_reproducible_with_the_same_seed() -> None:
    model = _mlp(3)
    x, y = _mlp_data(model, 3)
    first = pgd_linf(model, x, y, 0.2, generator=_generator(7))
    again = pgd_linf(model, x, y, 0.2, generator=_generator(7))
    other = pgd_linf(model, x, y, 0.2, generator=_generator(8))
    assert torch.equal(first, again)
    assert not torch.equal(first, other)  # the random start matters
    # Without a random start no generator is needed and the attack is deterministic.
    plain = pgd_linf(model, x, y, 0.2, random_start=False)
    assert torch.equal(plain, pgd_linf(model, x, y, 0.2, random_start=False))
    assert robust_accuracy(model, x, y, 0.2, generator=_generator(7)) == robust_accuracy(
        model, x, y, 0.2, generator=_generator(7))
    with pytest.raises(ValueError, match="generator"):
        pgd_linf(model, x, y, 0.2)


def test_no_parameter_gradients_and_flags_restored() -> None:
    model = _mlp(4)
    x, y = _mlp_data(model, 4)
    x_in = x.clone().requires_grad_(True)

    model.train()
    model[2].eval()  # mixed flags: each module's own flag must come back, not the top one's
    flags = [module.training for module in model.modules()]
    pgd_linf(model, x_in, y, 0.1, generator=_generator(0))
    robust_accuracy(model, x, y, 0.1, batch_size=100, generator=_generator(0))
    with torch.no_grad():  # works inside a no_grad block too
        pgd_linf(model, x, y, 0.1, generator=_generator(0))

    assert [module.training for module in model.modules()] == flags
    assert all(p.grad is None for p in model.parameters())
    assert x_in.grad is None and torch.equal(x_in.detach(), x)  # the input is not modified


def test_attack_runs_in_eval_mode() -> None:
    """Dropout in train mode would make every forward pass random; the attack must see the eval
    model, which equals the same network without the dropout layer."""
    with_dropout = _mlp(5)
    with_dropout.insert(3, nn.Dropout(0.5))
    without = _mlp(5)
    x, y = _mlp_data(without, 5)
    with_dropout.train()
    attacked = pgd_linf(with_dropout, x, y, 0.2, generator=_generator(1))
    assert torch.equal(attacked, pgd_linf(without, x, y, 0.2, generator=_generator(1)))
    assert with_dropout.training


# ------------------------------------------------------------------------ update rule, FGSM


def _fgsm(model: nn.Module, x: torch.Tensor, y: torch.Tensor, eps: float) -> torch.Tensor:
    """Goodfellow et al.'s single step x + ε·sign(∇ₓ ℓ), written out independently."""
    x = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(F.cross_entropy(model(x), y, reduction="sum"), x)
    return (x + eps * grad.sign()).detach()


def test_single_step_is_fgsm_and_step_size_default() -> None:
    model = _mlp(6)
    x, y = _mlp_data(model, 6)
    # One step of α = ε from x is FGSM; the clamp to the ball cannot bind (|α·sign| = ε).
    one = pgd_linf(model, x, y, 0.3, steps=1, step_size=0.3, random_start=False)
    torch.testing.assert_close(one, _fgsm(model, x, y, 0.3), rtol=0, atol=0)
    # A step shorter than ε is not clipped: x + α·sign(g).
    short = pgd_linf(model, x, y, 0.3, steps=1, step_size=0.1, random_start=False)
    assert torch.equal(short - x, _fgsm(model, x, y, 0.1) - x)
    # The default step is 2.5ε/steps.
    default = pgd_linf(model, x, y, 0.3, steps=8, generator=_generator(2))
    explicit = pgd_linf(model, x, y, 0.3, steps=8, step_size=2.5 * 0.3 / 8,
                        generator=_generator(2))
    assert torch.equal(default, explicit)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_pgd_at_least_as_strong_as_fgsm(seed: int) -> None:
    """PGD is not guaranteed to beat FGSM point by point (the ascent is local, and on these
    models 2-9% of points end with a slightly lower loss), but in aggregate it should: over
    seeds 0-19 at ε = 0.3 its mean loss was higher by 0.016-0.040 (FGSM's 0.95-1.11). The 1e-3
    tolerance is an order of magnitude under the smallest gap and far above float64 rounding."""
    model = _mlp(seed)
    x, y = _mlp_data(model, seed, flip=0.0)
    eps = 0.3
    x_pgd = pgd_linf(model, x, y, eps, generator=_generator(seed))
    x_fgsm = _fgsm(model, x, y, eps)
    with torch.no_grad():
        loss_pgd = F.cross_entropy(model(x_pgd), y).item()
        loss_fgsm = F.cross_entropy(model(x_fgsm), y).item()
        loss_clean = F.cross_entropy(model(x), y).item()
    assert loss_fgsm > loss_clean
    assert loss_pgd >= loss_fgsm - 1e-3, (loss_pgd, loss_fgsm)


# ------------------------------------------------------------------------------- validation


def test_invalid_arguments() -> None:
    model = _mlp(7)
    x, y = _mlp_data(model, 7, n=10)
    g = _generator(0)
    with pytest.raises(ValueError, match="eps"):
        pgd_linf(model, x, y, -0.1, generator=g)
    with pytest.raises(ValueError, match="steps"):
        pgd_linf(model, x, y, 0.1, steps=0, generator=g)
    with pytest.raises(ValueError, match="step_size"):
        pgd_linf(model, x, y, 0.1, step_size=0.0, generator=g)
    with pytest.raises(ValueError, match="int64"):
        pgd_linf(model, x, y.int(), 0.1, generator=g)
    with pytest.raises(ValueError, match="shape"):
        pgd_linf(model, x, y[:5], 0.1, generator=g)
    with pytest.raises(ValueError, match="low <= high"):
        pgd_linf(model, x, y, 0.1, generator=g, bounds=(1.0, 0.0))
    with pytest.raises(ValueError, match="batch_size"):
        robust_accuracy(model, x, y, 0.1, batch_size=0, generator=g)
    with pytest.raises(ValueError, match="no points"):
        robust_accuracy(model, x[:0], y[:0], 0.1, generator=g)
