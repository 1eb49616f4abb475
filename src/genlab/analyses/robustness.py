"""Adversarial robustness of a classifier: the L∞ PGD attack and the accuracy that survives it.

Projected gradient descent (PGD) on the negative loss, from Madry, Makelov, Schmidt, Tsipras &
Vladu, "Towards Deep Learning Models Resistant to Adversarial Attacks", ICLR 2018 (§2.1): for a
classifier with logits f(x), a label y, the cross-entropy loss L(x) = ℓ(f(x), y) and a radius ε,
it looks for a point of the ball S = {x' : ‖x' − x‖∞ ≤ ε} (intersected here with the box
[low, high] when ``bounds`` are given) where the loss is high, by the iteration

    x⁰ = x + u,  u ~ Uniform([−ε, ε]^D)                   (random start; x⁰ = x without one)
    x^{t+1} = Π_S(x^t + α · sign(∇ₓ L(x^t))),   t = 0, …, T − 1,

with Π_S the Euclidean projection onto S, which for a box is the coordinatewise clamp to
[max(x − ε, low), min(x + ε, high)], and sign(0) = 0. The step defaults to α = 2.5 ε / T, the
Madry lab's rule of thumb (the evaluations of their ``robustness`` library, Engstrom, Ilyas,
Salman, Santurkar & Tsipras 2019; the 2018 paper set α by hand, e.g. 40 steps of 0.01 at
ε = 0.3 on MNIST): 2.5 ε of travel in all lets an iterate cross the ball from any start and
still take steps on its faces. The attack returns the last iterate x^T, as Madry et al.'s code
does; with T = 1, α = ε and no random start it is FGSM (Goodfellow, Shlens & Szegedy 2015).

The loss is summed over the batch, so each point's gradient is its own (the points do not
interact, and the sign makes the scale irrelevant except against underflow). The gradient is
taken with respect to the input only (``torch.autograd.grad``): nothing accumulates into the
parameters' ``.grad``. The model runs in eval mode (dropout off, batch norm on its running
statistics, so each point's logits depend on that point alone), and every module's training
flag is restored afterwards.

**It is a lower bound on the worst case.** The maximisation is non-concave in general and PGD is
a local method with a fixed budget: the returned point is feasible and its loss is attained, but
a stronger attack may find a higher one, so :func:`robust_accuracy` is an upper bound on the true
robust accuracy. For a linear (affine) two-class model it is exact: the loss is a decreasing
function of the margin m(x) = (w_y − w_o)·x + (b_y − b_o), whose minimum over the ball is
m(x) − ε‖w_y − w_o‖₁ at x − ε·sign(w_y − w_o), and every sign step moves each coordinate towards
that corner.

**Saturated softmax.** The gradient of the cross-entropy with respect to the logits is p − e_y,
and p_y − 1 rounds to 0 once the margin exceeds about 17 (float32) or 37 (float64), while the
other probabilities are still representable: the input gradient then points along the other
classes' weights alone, and its signs can be wrong. Points classified that confidently are far
from the boundary for a small ε, but a very confident model can mask its own gradients this way
(Carlini & Wagner 2017 attack the logits for this reason).

Inputs are not assumed to be images in [0, 1]: ``bounds=None`` (the default) applies no clamp.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["pgd_linf", "robust_accuracy"]


@contextlib.contextmanager
def _eval_mode(model: nn.Module) -> Iterator[None]:
    """``model`` in eval mode inside the block; each module's own training flag back after it
    (``model.train(flag)`` would set every submodule to the top module's flag)."""
    flags = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, flag in flags:
            module.training = flag


def _check(x: Tensor, y: Tensor, eps: float, bounds: tuple[float, float] | None) -> None:
    if x.ndim < 1:
        raise ValueError("x must have a leading batch dimension, shape (n, ...)")
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"y must have shape ({x.shape[0]},), got {tuple(y.shape)}")
    if y.dtype != torch.int64:
        raise ValueError(f"y must hold int64 class indices, got {y.dtype}")
    if not eps >= 0:  # also refuses NaN
        raise ValueError(f"eps must be >= 0, got {eps}")
    if bounds is not None:
        low, high = bounds
        if not low <= high:
            raise ValueError(f"bounds must satisfy low <= high, got {bounds}")
        if x.numel() and not bool(((x >= low) & (x <= high)).all()):
            raise ValueError(f"x lies outside bounds {bounds}: the ball and the box would not "
                             "meet")


def pgd_linf(model: nn.Module, x: Tensor, y: Tensor, eps: float, *, steps: int = 20,
             step_size: float | None = None, random_start: bool = True,
             generator: torch.Generator | None = None,
             bounds: tuple[float, float] | None = None) -> Tensor:
    """L∞ PGD attack on the cross-entropy loss (Madry et al. 2018; update rule in the module
    docstring).

    Args:
        model: A classifier mapping inputs (n, ...) to logits (n, C). Run in eval mode during the
            attack; its modules' training flags are restored afterwards and its parameters get
            no gradient.
        x: Clean inputs, shape (n, ...), in the dtype and on the device of ``model``.
        y: True labels, int64 class indices of shape (n,).
        eps: Radius of the L∞ ball around each point; 0 returns (a copy of) ``x``.
        steps: Number T ≥ 1 of sign-gradient steps.
        step_size: The step α; None for the Madry lab's 2.5·eps/steps.
        random_start: Start from x plus noise uniform in [−eps, eps] per coordinate (clamped to
            ``bounds``), drawn from ``generator``; else start from x.
        generator: The ``torch.Generator`` the random start is drawn from (on its own device,
            then moved to x's); required when ``random_start`` is True, so a seed fixes the
            result.
        bounds: (low, high) to clamp every iterate to, e.g. (0, 1) for images; None (default)
            for no clamp. ``x`` itself must lie within them.

    Returns:
        The adversarial inputs x^T, detached, of x's shape, dtype and device, with
        ‖x^T − x‖∞ ≤ eps (up to the rounding of x ± eps) and within ``bounds``.

    Raises:
        ValueError: On a negative eps, steps < 1, a non-positive step size, labels of the wrong
            shape or dtype, x outside ``bounds``, or a random start without a generator.
    """
    _check(x, y, eps, bounds)
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if random_start and generator is None:
        raise ValueError("random_start=True needs a torch.Generator (generator=) so the attack "
                         "is reproducible")
    x = x.detach()
    if eps == 0:
        return x.clone()
    alpha = 2.5 * eps / steps if step_size is None else float(step_size)
    if not alpha > 0:
        raise ValueError(f"step_size must be > 0, got {step_size}")

    lower, upper = x - eps, x + eps
    if bounds is not None:
        lower, upper = lower.clamp(min=bounds[0]), upper.clamp(max=bounds[1])

    if random_start:
        assert generator is not None
        noise = torch.rand(x.shape, generator=generator, dtype=x.dtype, device=generator.device)
        x_adv = torch.clamp(x + eps * (2 * noise.to(x.device) - 1), lower, upper)
    else:
        x_adv = x.clone()

    with _eval_mode(model), torch.enable_grad():
        for _ in range(steps):
            x_adv.requires_grad_(True)
            loss = F.cross_entropy(model(x_adv), y, reduction="sum")
            (grad,) = torch.autograd.grad(loss, x_adv)
            x_adv = torch.clamp(x_adv.detach() + alpha * grad.sign(), lower, upper)
    return x_adv.detach()


def robust_accuracy(model: nn.Module, x: Tensor, y: Tensor, eps: float, *,
                    batch_size: int = 4096, **pgd_kwargs) -> float:
    """Fraction of points classified correctly both clean and after :func:`pgd_linf`.

    A point already misclassified counts as an error whatever the attack does to it. Since PGD
    is a lower bound on the worst case, this is an upper bound on the true robust accuracy
    (exact for a linear two-class model).

    Args:
        model: A classifier mapping inputs (n, ...) to logits (n, C); evaluated in eval mode, its
            training flags restored afterwards.
        x: Inputs, shape (n, ...), n ≥ 1.
        y: True labels, int64 of shape (n,).
        eps: Radius of the L∞ ball; 0 gives the clean accuracy.
        batch_size: Points attacked and evaluated at once. A generator in ``pgd_kwargs`` is
            drawn from batch after batch, so the random starts (and, slightly, the result)
            depend on it.
        **pgd_kwargs: Passed to :func:`pgd_linf` (steps, step_size, random_start, generator,
            bounds).

    Returns:
        The robust accuracy in [0, 1].
    """
    _check(x, y, eps, pgd_kwargs.get("bounds"))
    if x.shape[0] == 0:
        raise ValueError("robust accuracy of no points is undefined")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    correct = 0
    with _eval_mode(model):
        for start in range(0, x.shape[0], batch_size):
            xb, yb = x[start:start + batch_size].detach(), y[start:start + batch_size]
            x_adv = pgd_linf(model, xb, yb, eps, **pgd_kwargs)
            with torch.no_grad():
                clean = model(xb).argmax(dim=1) == yb
                attacked = model(x_adv).argmax(dim=1) == yb
            correct += int((clean & attacked).sum())
    return correct / x.shape[0]
