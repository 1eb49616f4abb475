"""Small influence problems shared by tests/analyses/influence/test_*.py: ridge regression and
L2 logistic regression at their exact optima, and a tanh MLP at initialisation; and the influence
studies' check that a run retrains bit for bit."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from genlab.analyses.influence.exact import loss_function
from genlab.models.mlp import MLP
from genlab.settings import MLPSettings

D = torch.float64


def cosines(a: Tensor, b: Tensor) -> Tensor:
    """Row-wise cosine similarities."""
    return (a * b).sum(dim=1) / (a.norm(dim=1) * b.norm(dim=1))


def pearson(a: Tensor, b: Tensor) -> float:
    return float(np.corrcoef(a.reshape(-1).numpy(), b.reshape(-1).numpy())[0, 1])


# --------------------------------------------------------------------------------- problems


@dataclass(frozen=True)
class Problem:
    model: nn.Module  # at the exact optimum of the L2-regularised objective
    X: Tensor
    y: Tensor
    X_test: Tensor
    y_test: Tensor
    damping: float  # = the L2 coefficient of the training objective


@functools.cache
def ridge() -> Problem:
    """Ridge regression, (1/n)Σ ½(x̃ᵢᵀθ − yᵢ)² + (λ/2)‖θ‖², x̃ = [x, 1] (the bias penalised too,
    as the damping is): θ̂ solved in closed form with numpy."""
    rng = np.random.default_rng(0)
    n, d, lam = 40, 5, 0.1
    X = rng.normal(size=(n, d)) * np.linspace(0.5, 2.0, d)
    y = X @ rng.normal(size=d) + 0.5 * rng.normal(size=n)
    X_test = rng.normal(size=(7, d)) * np.linspace(0.5, 2.0, d)
    y_test = X_test @ rng.normal(size=d)
    Xa = np.hstack([X, np.ones((n, 1))])
    theta = np.linalg.solve(Xa.T @ Xa / n + lam * np.eye(d + 1), Xa.T @ y / n)
    model = nn.Linear(d, 1).double()
    with torch.no_grad():
        model.weight.copy_(torch.from_numpy(theta[:d])[None])
        model.bias.copy_(torch.from_numpy(theta[d:]))
    return Problem(model, *(torch.from_numpy(a) for a in (X, y, X_test, y_test)), lam)


def ridge_influence_numpy(p: Problem) -> np.ndarray:
    """−(r_t x̃_t)ᵀ (X̃ᵀX̃/n + λI)⁻¹ (rᵢ x̃ᵢ), r the residual f − y."""
    X, y, Xt, yt = (a.numpy() for a in (p.X, p.y, p.X_test, p.y_test))
    n = len(X)
    Xa, Xta = np.hstack([X, np.ones((n, 1))]), np.hstack([Xt, np.ones((len(Xt), 1))])
    theta = np.concatenate([p.model.weight.detach().numpy()[0], p.model.bias.detach().numpy()])
    g_train = (Xa @ theta - y)[:, None] * Xa
    g_test = (Xta @ theta - yt)[:, None] * Xta
    A = Xa.T @ Xa / n + p.damping * np.eye(Xa.shape[1])
    return -g_test @ np.linalg.solve(A, g_train.T)


@functools.cache
def logistic() -> Problem:
    """Binary logistic regression, d = 10, n = 300, λ = 1e-2, anisotropic features, trained by
    Newton's method to a gradient norm below 1e-13 (the torch Linear model holds θ̂)."""
    generator = torch.Generator().manual_seed(0)
    n, d, lam = 300, 10, 1e-2
    scales = torch.logspace(-0.5, 0.5, d, dtype=D)
    w = torch.randn(d, generator=generator, dtype=D)

    def sample(m: int) -> tuple[Tensor, Tensor]:
        X = torch.randn(m, d, generator=generator, dtype=D) * scales
        return X, torch.bernoulli(torch.sigmoid(X @ w + 0.3), generator=generator)

    X, y = sample(n)
    X_test, y_test = sample(50)
    Xa = torch.cat([X, torch.ones(n, 1, dtype=D)], dim=1)
    theta = torch.zeros(d + 1, dtype=D)
    for _ in range(50):
        p = torch.sigmoid(Xa @ theta)
        gradient = Xa.T @ (p - y) / n + lam * theta
        if gradient.norm() < 1e-13:
            break
        hessian = (Xa.T * (p * (1 - p))) @ Xa / n + lam * torch.eye(d + 1, dtype=D)
        theta = theta - torch.linalg.solve(hessian, gradient)
    model = nn.Linear(d, 1).double()
    with torch.no_grad():
        model.weight.copy_(theta[:d][None])
        model.bias.copy_(theta[d:])
    return Problem(model, X, y, X_test, y_test, lam)


@functools.cache
def mlp() -> Problem:
    """A tanh MLP 4–8–3 (P = 67) with cross entropy, at its initialisation: the GGN is PSD but
    far from the Hessian, and nothing is special about the point."""
    generator = torch.Generator().manual_seed(1)
    X = torch.randn(30, 4, generator=generator, dtype=D)
    y = torch.randint(0, 3, (30,), generator=generator)
    torch.manual_seed(2)
    model = MLP(MLPSettings(hidden=(8,), activation="tanh"), 4, 3).double().eval()
    return Problem(model, X, y, X[:10] + 0.1, y[:10], 0.05)


BCE = loss_function("binary_cross_entropy")
MSE = loss_function("mse")
CE = loss_function("cross_entropy")


def assert_same_artifacts(again, first) -> None:
    """Two trainings of one run gave the same metrics (but their wall times), history and
    weights, bit for bit."""
    from genlab.io import dumps_json

    def without_times(m: dict) -> str:
        return dumps_json({k: v for k, v in m.items() if k != "seconds"})

    assert without_times(again.metrics) == without_times(first.metrics)
    assert again.history.equals(first.history)
    assert all(torch.equal(again.weights[k], first.weights[k]) for k in first.weights)


def train_every_run(spec, cfg) -> dict:
    """Every run of a study's settings trained on its one dataset (the tiny end-to-end runs), or,
    for a study whose runs pick their data (``DATA_FIELDS``), on its own draw as the pipeline
    trains it."""
    from genlab.data.draws import data_fields, draw_settings, run_draw_id

    if not data_fields(cfg):
        dataset = spec.synthesize(cfg)
        return {name: spec.train_run(cfg, name, dataset, torch.device("cpu"))
                for name in cfg.runs}
    out = {}
    for name in cfg.runs:
        draw = draw_settings(cfg, run_draw_id(cfg, name))
        out[name] = spec.train_run(draw, name, spec.synthesize(draw), torch.device("cpu"))
    return out
