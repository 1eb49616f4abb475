"""Non-uniformity against dense float64 per-example curvatures built with torch.func.

The reference is deliberately naive: the model as a function of one flat parameter vector, each
example's Hessian by ``torch.func.hessian`` of its own loss, each Gauss-Newton matrix as
JᵢᵀH_out,ᵢJᵢ from the example's output Jacobian, then H = mean Hᵢ, Σ = mean Hᵢ² − H² and every
eigenvalue from ``torch.linalg.eigvalsh``. With P ≈ 70 parameters and n = 12 it is instant.
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from pydantic import ValidationError
from torch import Tensor, nn
from torch.func import functional_call, hessian, jacrev
from torch.nn.utils import parameters_to_vector

from genlab.analyses.curvature.hessian import curvature_model
from genlab.analyses.curvature.nonuniformity import (
    NonuniformitySettings,
    PerExampleCurvature,
    nonuniformity,
    nonuniformity_vs_lr,
)
from genlab.losses import loss_value
from genlab.models.mlp import MLP
from genlab.settings import MLPSettings

N, DIM = 12, 5

# name: (loss, output width); targets: floats for regression, class labels otherwise
CASES = {"mse-regression": ("mse", 1), "mse-classes": ("mse", 3),
         "cross_entropy": ("cross_entropy", 3)}


@dataclass(frozen=True)
class Case:
    model: nn.Module  # float32, eval mode: tests that change it work on a copy
    loss_fn: Callable[[Tensor, Tensor], Tensor]
    X: Tensor
    y: Tensor
    hessians: Tensor  # (n, P, P) float64 per-example Hessians
    ggns: Tensor  # (n, P, P) per-example Gauss-Newton matrices


def per_example_curvatures(model: nn.Module, loss: str, X: Tensor,
                           y: Tensor) -> tuple[Tensor, Tensor]:
    """The obviously-correct float64 Hᵢ and Gᵢ of each example's loss w.r.t. the flat
    parameters."""
    net = copy.deepcopy(model).double().eval()
    names = [name for name, _ in net.named_parameters()]
    shapes = [p.shape for p in net.parameters()]
    theta = parameters_to_vector(net.parameters()).detach()

    def output(flat: Tensor, x: Tensor) -> Tensor:  # (1, C)
        pieces = flat.split([math.prod(s) for s in shapes])
        params = {n: t.view(s) for n, t, s in zip(names, pieces, shapes, strict=True)}
        return functional_call(net, params, (x.double()[None],))

    hessians, ggns = [], []
    for x, target in zip(X, y, strict=True):
        def example_loss(out: Tensor, target: Tensor = target) -> Tensor:
            return loss_value(loss, out, target[None])

        hessians.append(hessian(lambda flat, x=x: example_loss(output(flat, x)))(theta))
        out = output(theta, x)
        jacobian = jacrev(output)(theta, x).reshape(out.numel(), -1)  # (C, P)
        output_hessian = hessian(example_loss)(out).reshape(out.numel(), out.numel())
        ggns.append(jacobian.T @ output_hessian @ jacobian)
    return torch.stack(hessians), torch.stack(ggns)


@functools.cache
def case(name: str) -> Case:
    loss, width = CASES[name]
    generator = torch.Generator().manual_seed(0)
    X = torch.randn(N, DIM, generator=generator)
    y = (torch.randn(N, generator=generator) if width == 1
         else torch.randint(0, width, (N,), generator=generator))
    torch.manual_seed(1)
    hidden = 10 if width == 1 else 8  # P = 71, 75, 75
    model = MLP(MLPSettings(hidden=(hidden,), activation="tanh"), DIM, width).eval()
    loss_fn = functools.partial(loss_value, loss)
    return Case(model, loss_fn, X, y, *per_example_curvatures(model, loss, X, y))


def dense_mean_and_variance(per_example: Tensor) -> tuple[Tensor, Tensor]:
    H = per_example.mean(dim=0)
    return H, (per_example @ per_example).mean(dim=0) - H @ H


def per_examples(c: Case, curvature: str) -> Tensor:
    return c.hessians if curvature == "hessian" else c.ggns


# -------------------------------------------------------------------------------- the operator


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("curvature", ["hessian", "ggn"])
def test_operator_is_the_dense_mean_and_variance(name, curvature) -> None:
    """Products with every column of I give Hᵢ, H and Σ exactly; Σ is symmetric PSD, a
    variance, although the operator never forms it."""
    c = case(name)
    Hi = per_examples(c, curvature)
    H, Sigma = dense_mean_and_variance(Hi)
    P = H.shape[0]
    with curvature_model(c.model, torch.float64) as net:
        operator = PerExampleCurvature(net, c.loss_fn, c.X.double(), c.y, curvature,
                                       batch_size=5)  # 12 = 5 + 5 + 2
        identity = torch.eye(P, dtype=torch.float64)
        torch.testing.assert_close(operator.per_example(identity), Hi, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(operator.mean(identity), H, rtol=1e-10, atol=1e-12)
        variance = operator.variance(identity)
        assert operator.products_taken == 5 * N * P  # n for the per-example, n mean, 3n variance
    torch.testing.assert_close(variance, Sigma, rtol=1e-10, atol=1e-12)
    scale = float(variance.abs().max())
    assert float((variance - variance.T).abs().max()) <= 1e-13 * scale
    assert float(torch.linalg.eigvalsh(variance).min()) >= -1e-12 * scale
    # the centred form equals mean Hᵢ² − H², and Σ = mean (Hᵢ − H)²: both sides PSD-consistent
    torch.testing.assert_close(Sigma, ((Hi - H) @ (Hi - H)).mean(dim=0), rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------------------- the analysis


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("curvature", ["hessian", "ggn"])
def test_sharpness_and_nonuniformity_match_dense(name, curvature) -> None:
    c = case(name)
    H, Sigma = dense_mean_and_variance(per_examples(c, curvature))
    P = H.shape[0]
    a_values, s2_values = torch.linalg.eigvalsh(H), torch.linalg.eigvalsh(Sigma)
    # P steps exhaust ℝ^P; the runs stop after 14-32 when the residual reaches 1e-10·θ
    result = nonuniformity(c.model, c.loss_fn, c.X, c.y, curvature, max_iter=P, tol=1e-10)
    # measured: a and s² to ≤ 1.1e-15 relative; 1e-8 is far inside the 1e-6 asked for
    assert result.sharpness == pytest.approx(float(a_values[-1]), rel=1e-8)
    assert result.variance_top_eigenvalue == pytest.approx(float(s2_values[-1]), rel=1e-8)
    assert result.nonuniformity == pytest.approx(math.sqrt(float(s2_values[-1])), rel=1e-8)
    assert result.curvature == curvature and result.num_examples == N
    assert result.num_example_products == (N * (result.sharpness_iterations + 1)
                                            + 3 * N * (result.nonuniformity_iterations + 1))
    # the vectors are eigenvectors of the dense matrices, and the reported residuals are theirs
    for matrix, value, vector, residual in (
            (H, result.sharpness, result.sharpness_vector, result.sharpness_residual),
            (Sigma, result.variance_top_eigenvalue, result.nonuniformity_vector,
             result.variance_residual)):
        assert float(torch.linalg.vector_norm(vector)) == pytest.approx(1.0, rel=1e-12)
        dense_residual = float(torch.linalg.vector_norm(matrix @ vector - value * vector))
        assert dense_residual <= 1e-8 * value
        assert residual == pytest.approx(dense_residual, abs=1e-12)


def test_default_budget_and_batches() -> None:
    """The production cap (30 steps, tol 1e-6) and chunks of 5 examples: measured errors 3e-13
    (a) and 2e-13 (s²) relative on cross-entropy; batching changes only the rounding."""
    c = case("cross_entropy")
    H, Sigma = dense_mean_and_variance(c.hessians)
    capped = nonuniformity(c.model, c.loss_fn, c.X, c.y, batch_size=5)
    assert capped.sharpness_iterations <= 30 and capped.nonuniformity_iterations <= 30
    assert capped.sharpness == pytest.approx(float(torch.linalg.eigvalsh(H)[-1]), rel=1e-8)
    assert capped.variance_top_eigenvalue == pytest.approx(
        float(torch.linalg.eigvalsh(Sigma)[-1]), rel=1e-8)
    whole = nonuniformity(c.model, c.loss_fn, c.X, c.y)
    assert whole.nonuniformity == pytest.approx(capped.nonuniformity, rel=1e-10)


def test_interpolating_minimum_of_the_square_loss() -> None:
    """With its own outputs as targets the model interpolates: every Hᵢ is its Gauss-Newton part
    gᵢgᵢᵀ (gᵢ = ∇f(xᵢ), scalar output), so the two curvatures agree, and Σ has the closed form
    (1/n) Σᵢ ‖gᵢ‖² gᵢgᵢᵀ − H² of Wu, Ma & E's square-loss case."""
    c = case("mse-regression")
    with torch.no_grad():
        targets = copy.deepcopy(c.model).double()(c.X.double())[:, 0]
    hessians, ggns = per_example_curvatures(c.model, "mse", c.X, targets)
    torch.testing.assert_close(hessians, ggns, rtol=1e-10, atol=1e-12)
    net = copy.deepcopy(c.model).double()
    gradients = torch.stack([parameters_to_vector(torch.autograd.grad(
        net(x.double()[None])[0, 0], list(net.parameters()))) for x in c.X])  # (n, P)
    H = gradients.T @ gradients / N
    Sigma = (gradients.T * gradients.square().sum(dim=1)) @ gradients / N - H @ H
    exact = float(torch.linalg.eigvalsh(Sigma)[-1])
    results = [nonuniformity(c.model, c.loss_fn, c.X, targets, curvature, max_iter=71,
                             tol=1e-10) for curvature in ("hessian", "ggn")]
    for result in results:
        assert result.variance_top_eigenvalue == pytest.approx(exact, rel=1e-8)
        assert result.sharpness == pytest.approx(float(torch.linalg.eigvalsh(H)[-1]), rel=1e-8)


# --------------------------------------------------------------------- the stability criterion


def test_minibatch_curvature_variance_is_the_finite_population_factor_times_sigma() -> None:
    """E_S[(H_S − H)²] over all batches S of B distinct examples is (n − B)/(B(n − 1)) Σ, the
    factor in Wu, Ma & E's condition and in :func:`nonuniformity_vs_lr`: checked by enumerating
    every batch, for random symmetric Hᵢ."""
    n, P = 7, 4
    generator = torch.Generator().manual_seed(3)
    A = torch.randn(n, P, P, generator=generator, dtype=torch.float64)
    Hi = A @ A.transpose(1, 2)
    H, Sigma = dense_mean_and_variance(Hi)
    for B in range(1, n + 1):
        deviations = [Hi[list(batch)].mean(dim=0) - H
                      for batch in itertools.combinations(range(n), B)]
        second_moment = torch.stack([d @ d for d in deviations]).mean(dim=0)
        factor = (n - B) / (B * (n - 1))
        torch.testing.assert_close(second_moment, factor * Sigma, rtol=1e-10, atol=1e-12)
        # one dimension (the top eigenvector w of Σ held fixed is not the dynamics, but the
        # ratio is the square root of the factor times s², over 1/η²)
        s = math.sqrt(float(torch.linalg.eigvalsh(Sigma)[-1]))
        assert nonuniformity_vs_lr(s, 0.1, B, n) == pytest.approx(0.1 * s * math.sqrt(factor),
                                                                 abs=1e-15)


def test_nonuniformity_vs_lr() -> None:
    assert nonuniformity_vs_lr(20.0, 0.1, 4) == pytest.approx(1.0)  # s = √B/η: the edge
    assert nonuniformity_vs_lr(5.0, 0.2, 16) == pytest.approx(0.25)
    # finite n: the bound (1/η)√(B(n − 1)/(n − B)) is looser, so the ratio is smaller
    assert nonuniformity_vs_lr(20.0, 0.1, 4, 100) == pytest.approx(math.sqrt(96 / 99))
    assert nonuniformity_vs_lr(20.0, 0.1, 100, 100) == 0.0  # full batch: no sampling noise
    with pytest.raises(ValueError, match="positive"):
        nonuniformity_vs_lr(1.0, 0.0, 4)
    with pytest.raises(ValueError, match="positive"):
        nonuniformity_vs_lr(1.0, 0.1, 0)
    with pytest.raises(ValueError, match="cannot be drawn"):
        nonuniformity_vs_lr(1.0, 0.1, 8, 4)


# --------------------------------------------------------------------- modes, dtypes, settings


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_model_modes_and_parameters_are_left_as_found(dtype) -> None:
    """A float32 model is converted on a copy; a float64 one is used in place and restored.
    Dropout in train mode would make the products random; in eval mode it is the identity."""
    c = case("cross_entropy")
    model = nn.Sequential(nn.Dropout(0.5), copy.deepcopy(c.model)).to(dtype).train()
    model[1].net[1].eval()  # a mixed state must come back exactly, not as all-train
    flags = [m.training for m in model.modules()]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():  # as a caller evaluating a model might; the products need autograd
        dropped = nonuniformity(model, c.loss_fn, c.X, c.y, max_iter=5, tol=0.0, seed=2)
    assert [m.training for m in model.modules()] == flags
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) and after[k].dtype == dtype for k in before)
    assert all(p.grad is None for p in model.parameters())
    plain = nonuniformity(c.model, c.loss_fn, c.X, c.y, max_iter=5, tol=0.0, seed=2)
    assert dropped.nonuniformity == pytest.approx(plain.nonuniformity, rel=1e-6)


def test_same_seed_same_result_and_float32() -> None:
    c = case("mse-classes")
    a, b = (nonuniformity(c.model, c.loss_fn, c.X, c.y, seed=3) for _ in range(2))
    assert a.nonuniformity == b.nonuniformity and a.sharpness == b.sharpness
    assert torch.equal(a.nonuniformity_vector, b.nonuniformity_vector)
    single = nonuniformity(c.model, c.loss_fn, c.X, c.y, dtype=torch.float32, seed=3)
    assert single.nonuniformity_vector.dtype == torch.float32
    assert single.nonuniformity == pytest.approx(a.nonuniformity, rel=1e-4)


def test_rejects_bad_arguments() -> None:
    c = case("cross_entropy")
    with pytest.raises(ValueError, match="unknown curvature"):
        nonuniformity(c.model, c.loss_fn, c.X, c.y, curvature="fisher")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mean"):
        nonuniformity(c.model, nn.CrossEntropyLoss(reduction="sum"), c.X, c.y)
    with pytest.raises(ValueError, match="same nonzero number"):
        nonuniformity(c.model, c.loss_fn, c.X, c.y[:-1])
    with pytest.raises(ValueError, match="batch_size"):
        nonuniformity(c.model, c.loss_fn, c.X, c.y, batch_size=0)


def test_settings() -> None:
    settings = NonuniformitySettings()
    assert (settings.curvature, settings.max_iter, settings.tol) == ("hessian", 30, 1e-6)
    assert settings.max_examples is None
    for bad in ({"curvature": "fisher"}, {"max_iter": 0}, {"tol": 1.0}, {"max_examples": 0},
                {"lanczos_steps": 3}):  # unknown keys are rejected
        with pytest.raises(ValidationError):
            NonuniformitySettings(**bad)
