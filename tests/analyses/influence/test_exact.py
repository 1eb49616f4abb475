"""Influence scores against references computed independently: numpy closed forms for ridge
regression (where the Hessian is XᵀX/n + λI exactly), dense float64 solves and explicit
per-example autograd loops; and the streamed (chunked) scores against materialised ones.
kronfluence's K-FAC/EK-FAC: tests/analyses/influence/test_kfac.py.

Sign convention under test (genlab.analyses.influence.exact): I[t, i] = −∇ℓ_tᵀ(H + λI)⁻¹∇ℓᵢ,
positive = upweighting zᵢ raises test loss t; removing zᵢ changes it by ≈ −I[t, i]/n.
"""

from __future__ import annotations

import copy

import numpy as np
import pyarrow as pa
import pytest
import torch
from influence_support import BCE, CE, MSE, D, cosines, logistic, mlp, ridge, ridge_influence_numpy
from torch import Tensor, nn

from genlab.analyses.influence.exact import (
    curvature_matrix,
    exact_influence,
    exact_self_influence,
    gradient_dot,
    gradient_products,
    gradient_self_dot,
    inverse_hvp,
    loss_function,
    per_example_gradients,
    random_scores,
    scores_table,
)

# ---------------------------------------------------------------------- exact references


@pytest.mark.parametrize("curvature", ["ggn", "hessian"])
@pytest.mark.parametrize("solver", ["dense", "cg"])
def test_ridge_influence_is_the_closed_form(curvature, solver) -> None:
    """Linear model + squared loss: H = X̃ᵀX̃/n for both curvatures, so I is known exactly."""
    p = ridge()
    scores = exact_influence(p.model, MSE, p.X, p.y, p.X_test, p.y_test, p.damping, curvature,
                             solver)
    np.testing.assert_allclose(scores.numpy(), ridge_influence_numpy(p), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("problem", "loss_fn"), [(ridge, MSE), (logistic, BCE)])
def test_ggn_equals_hessian_for_a_linear_model(problem, loss_fn) -> None:
    """f linear in θ: the Hessian's (∂ℓ/∂f)∇²f term vanishes, whatever the loss."""
    p = problem()
    ggn = curvature_matrix(p.model, loss_fn, p.X, p.y, "ggn")
    torch.testing.assert_close(ggn, curvature_matrix(p.model, loss_fn, p.X, p.y, "hessian"),
                               rtol=1e-12, atol=1e-14)
    if problem is ridge:
        Xa = torch.cat([p.X, torch.ones(len(p.X), 1, dtype=D)], dim=1)
        torch.testing.assert_close(ggn, Xa.T @ Xa / len(p.X), rtol=1e-12, atol=1e-14)


def test_influence_is_symmetric_and_its_diagonal_is_self_influence() -> None:
    """g_iᵀ(H + λ)⁻¹g_j is symmetric in i, j; the MLP's GGN makes it nontrivial."""
    p = mlp()
    scores = exact_influence(p.model, CE, p.X, p.y, p.X, p.y, p.damping)
    torch.testing.assert_close(scores, scores.T, rtol=1e-10, atol=1e-12)
    own = exact_self_influence(p.model, CE, p.X, p.y, p.damping)
    torch.testing.assert_close(own, scores.diagonal(), rtol=1e-10, atol=1e-12)
    assert bool((own < 0).all())  # upweighting an example lowers its own loss


@pytest.mark.parametrize("solver", ["dense", "cg", "lissa"])
def test_streamed_scores_equal_materialised_ones(solver) -> None:
    """Chunked gradients and solves (chunk 7 of 30 train and 10 test examples, both sides
    solved: 50 test rows exceed 30 train ones) give the materialised −G_t (H + λ)⁻¹ G_iᵀ; LiSSA
    draws the same minibatches for every chunk, so its result does not depend on the chunking
    either."""
    p = mlp()
    options = {"depth": 30, "lissa_batch_size": 8, "seed": 2} if solver == "lissa" else {}
    G, G_test = (per_example_gradients(p.model, CE, X, y) for X, y in
                 ((p.X, p.y), (p.X_test, p.y_test)))
    solved = inverse_hvp(p.model, CE, p.X, p.y, G_test, p.damping, "ggn", solver, **options)
    reference = -solved.solution @ G.T
    whole = exact_influence(p.model, CE, p.X, p.y, p.X_test, p.y_test, p.damping, "ggn", solver,
                            **options)
    torch.testing.assert_close(whole, reference, rtol=1e-10, atol=1e-12)
    chunked = exact_influence(p.model, CE, p.X, p.y, p.X_test, p.y_test, p.damping, "ggn",
                              solver, chunk_size=7, batch_size=8, **options)
    torch.testing.assert_close(chunked, reference, rtol=1e-8, atol=1e-10)
    many = torch.cat([p.X_test] * 5), torch.cat([p.y_test] * 5)  # 50 > 30: solves train side
    flipped = exact_influence(p.model, CE, p.X, p.y, *many, p.damping, "ggn", solver,
                              chunk_size=7, **options)
    if solver != "lissa":  # LiSSA's noise differs between the two sides' recursions
        torch.testing.assert_close(flipped, reference.repeat(5, 1), rtol=1e-8, atol=1e-10)
    own = exact_self_influence(p.model, CE, p.X, p.y, p.damping, "ggn", solver, chunk_size=7,
                               **options)
    own_reference = -(inverse_hvp(p.model, CE, p.X, p.y, G, p.damping, "ggn", solver,
                                  **options).solution * G).sum(dim=1)
    torch.testing.assert_close(own, own_reference, rtol=1e-8, atol=1e-10)


def test_gradient_products_and_self_dot_stream_the_gradients() -> None:
    p = mlp()
    G = per_example_gradients(p.model, CE, p.X, p.y)
    V = torch.randn(4, G.shape[1], generator=torch.Generator().manual_seed(0), dtype=D)
    torch.testing.assert_close(gradient_products(p.model, CE, p.X, p.y, V, chunk_size=4),
                               V @ G.T, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(gradient_self_dot(p.model, CE, p.X, p.y, chunk_size=4),
                               -G.square().sum(dim=1), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(
        gradient_dot(p.model, CE, p.X, p.y, p.X_test, p.y_test, chunk_size=3),
        -per_example_gradients(p.model, CE, p.X_test, p.y_test) @ G.T, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="V must be"):
        gradient_products(p.model, CE, p.X, p.y, V[:, :5])


def test_damping_shrinks_influence_towards_gradient_dot() -> None:
    """For PSD G, gᵀ(G + λ)⁻¹g falls strictly with λ (derivative −gᵀ(G + λ)⁻²g); and
    λ(G + λ)⁻¹ = I − G/λ + O(λ⁻²), so λ·I(λ) → −g_tᵀg_i within ‖G‖₂/λ relative."""
    p = mlp()
    magnitudes = [exact_self_influence(p.model, CE, p.X, p.y, lam).abs()
                  for lam in (1e-3, 1e-2, 1e-1, 1.0, 10.0)]
    for smaller, larger in zip(magnitudes[:-1], magnitudes[1:], strict=True):
        assert bool((larger < smaller).all())
    top = float(torch.linalg.eigvalsh(curvature_matrix(p.model, CE, p.X, p.y)).max())
    lam = 1e4 * top
    scaled = lam * exact_influence(p.model, CE, p.X, p.y, p.X_test, p.y_test, lam)
    dot = gradient_dot(p.model, CE, p.X, p.y, p.X_test, p.y_test)
    assert float((scaled - dot).norm() / dot.norm()) <= 2 * top / lam


def test_dense_and_cg_agree_on_an_mlp_ggn() -> None:
    p = mlp()
    vectors = per_example_gradients(p.model, CE, p.X_test, p.y_test)
    dense = inverse_hvp(p.model, CE, p.X, p.y, vectors, p.damping, "ggn", "dense")
    cg = inverse_hvp(p.model, CE, p.X, p.y, vectors, p.damping, "ggn", "cg", tol=1e-12)
    assert dense.positive_definite
    assert float(dense.relative_residuals.max()) < 1e-12
    assert float(cg.relative_residuals.max()) < 1e-11
    assert float(cosines(cg.solution, dense.solution).min()) > 0.999999
    assert cg.iterations <= 67  # P: exact arithmetic needs no more


def test_dense_solves_an_indefinite_hessian_by_lu() -> None:
    p = mlp()
    top_negative = float(torch.linalg.eigvalsh(curvature_matrix(p.model, CE, p.X, p.y,
                                                                "hessian")).min())
    assert top_negative < -1e-3  # the MLP's Hessian at initialisation is indefinite
    vectors = per_example_gradients(p.model, CE, p.X_test, p.y_test)
    result = inverse_hvp(p.model, CE, p.X, p.y, vectors, 0.0, "hessian", "dense")
    assert result.positive_definite is False
    assert float(result.relative_residuals.max()) < 1e-9
    with pytest.raises(ValueError, match="non-positive curvature"):
        inverse_hvp(p.model, CE, p.X, p.y, vectors, 0.0, "hessian", "cg")


def test_lissa_converges_to_the_dense_solve() -> None:
    """Logistic regression, λ = 1e-2. Full batch, LiSSA is Richardson iteration: the error of
    each eigencomponent shrinks by (1 − μ/s) per step, so after J steps the relative error is at
    most (1 − μ_min/s)^J, with μ_min = λ_min(H) + λ from the dense matrix (0.0224 here, and the
    default s = 1.25: J = 300 leaves ≤ 4.3e-3, J = 400 ≤ 7e-4, measured 4.8e-4 at J = 400). With
    minibatches (J = 400) the recursion is unbiased but noisy: the worst cosine over 8 test
    gradients was 0.9989 with batches of 128 (0.9992 with two repeats, 0.9964 with one of 64)."""
    p = logistic()
    vectors = per_example_gradients(p.model, BCE, p.X_test[:8], p.y_test[:8])
    dense = inverse_hvp(p.model, BCE, p.X, p.y, vectors, p.damping, "ggn", "dense").solution
    full = inverse_hvp(p.model, BCE, p.X, p.y, vectors, p.damping, "ggn", "lissa", depth=300,
                       lissa_batch_size=len(p.X), seed=1)
    mu_min = float(torch.linalg.eigvalsh(curvature_matrix(p.model, BCE, p.X, p.y))[0])
    bound = (1 - (mu_min + p.damping) / full.scale) ** 300
    assert bound < 5e-3
    error = (full.solution - dense).norm(dim=1) / dense.norm(dim=1)
    assert float(error.max()) <= bound
    noisy = inverse_hvp(p.model, BCE, p.X, p.y, vectors, p.damping, "ggn", "lissa", depth=400,
                        lissa_batch_size=128, seed=1)
    assert float(cosines(noisy.solution, dense).min()) >= 0.99
    again = inverse_hvp(p.model, BCE, p.X, p.y, vectors[:2], p.damping, "ggn", "lissa",
                        depth=20, lissa_batch_size=128, seed=3)
    same = inverse_hvp(p.model, BCE, p.X, p.y, vectors[:2], p.damping, "ggn", "lissa",
                       depth=20, lissa_batch_size=128, seed=3)
    torch.testing.assert_close(again.solution, same.solution, rtol=0, atol=0)  # seeded


def test_lissa_from_the_examples_factors_is_lissa_from_each_minibatchs_jacobians(
        monkeypatch) -> None:
    """LiSSA keeps every example's GGN factors and builds each minibatch's product from them;
    with the bound at 0 it takes each minibatch's Jacobians afresh (the path for large n·C·P).
    The same minibatches, the same recursion: equal to float64 rounding (measured max
    relative difference ~1e-15 on this MLP; 1e-10 leaves room for 40 steps' accumulation)."""
    import genlab.analyses.influence.exact as exact

    p = mlp()
    vectors = per_example_gradients(p.model, CE, p.X_test[:4], p.y_test[:4])
    kept = inverse_hvp(p.model, CE, p.X, p.y, vectors, p.damping, "ggn", "lissa", depth=40,
                       lissa_batch_size=16, seed=5)
    monkeypatch.setattr(exact, "LISSA_CACHED_ENTRIES", 0)
    fresh = inverse_hvp(p.model, CE, p.X, p.y, vectors, p.damping, "ggn", "lissa", depth=40,
                        lissa_batch_size=16, seed=5)
    assert kept.scale == fresh.scale and kept.iterations == fresh.iterations == 40
    assert not torch.equal(kept.solution, torch.zeros_like(kept.solution))
    torch.testing.assert_close(kept.solution, fresh.solution, rtol=1e-10, atol=0)


# ------------------------------------------------------------------------ gradients, baselines


def explicit_gradients(model: nn.Module, loss_fn, X: Tensor, y: Tensor) -> Tensor:
    rows = []
    for x, t in zip(X, y, strict=True):
        loss = loss_fn(model(x[None]), t[None])
        rows.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(
            loss, list(model.parameters()))]))
    return torch.stack(rows)


def test_per_example_gradients_and_gradient_dot_match_an_autograd_loop() -> None:
    p = mlp()
    model = copy.deepcopy(p.model)
    G = explicit_gradients(model, CE, p.X, p.y)
    G_test = explicit_gradients(model, CE, p.X_test, p.y_test)
    torch.testing.assert_close(per_example_gradients(p.model, CE, p.X, p.y, chunk_size=7), G,
                               rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(
        gradient_dot(p.model, CE, p.X, p.y, p.X_test, p.y_test, lr=0.3),
        -0.3 * G_test @ G.T, rtol=1e-12, atol=1e-14)


def test_a_float32_model_is_left_as_it_was() -> None:
    p = mlp()
    model = copy.deepcopy(p.model).float().train()
    before = [q.detach().clone() for q in model.parameters()]
    scores = exact_influence(model, CE, p.X.float(), p.y, p.X_test.float(), p.y_test, 0.05)
    assert scores.dtype == D and scores.shape == (10, 30)
    assert model.training and all(q.dtype == torch.float32 for q in model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    reference = exact_influence(p.model, CE, p.X, p.y, p.X_test, p.y_test, 0.05)
    torch.testing.assert_close(scores, reference, rtol=1e-4, atol=1e-6)  # float32 weights


def test_random_scores_are_seeded_standard_normal() -> None:
    a, b = random_scores((40, 500), seed=3), random_scores((40, 500), seed=3)
    assert torch.equal(a, b) and a.shape == (40, 500) and a.dtype == D
    assert not torch.equal(a, random_scores((40, 500), seed=4))
    assert abs(float(a.mean())) < 0.02 and abs(float(a.std()) - 1) < 0.02  # 4σ at n = 20 000


def test_scores_table_is_long_and_round_trips() -> None:
    scores = torch.arange(6, dtype=D).reshape(2, 3)
    table = scores_table(scores, "exact-ggn", train_ids=[10, 11, 12], test_ids=[7, 8])
    assert table.column_names == ["train_id", "test_id", "score", "method"]
    assert table.schema.field("train_id").type == pa.int64()
    assert table.schema.field("score").type == pa.float64()
    rows = table.to_pylist()
    assert rows[0] == {"train_id": 10, "test_id": 7, "score": 0.0, "method": "exact-ggn"}
    assert rows[5] == {"train_id": 12, "test_id": 8, "score": 5.0, "method": "exact-ggn"}
    back = np.zeros((2, 3))
    for row in rows:
        back[row["test_id"] - 7, row["train_id"] - 10] = row["score"]
    np.testing.assert_array_equal(back, scores.numpy())
    with pytest.raises(ValueError, match="match"):
        scores_table(scores, "x", train_ids=[1, 2])


def test_invalid_arguments_are_rejected() -> None:
    p = ridge()
    with pytest.raises(ValueError, match="damping"):
        exact_influence(p.model, MSE, p.X, p.y, p.X_test, p.y_test, -1.0)
    with pytest.raises(ValueError, match="unknown method"):
        exact_influence(p.model, MSE, p.X, p.y, p.X_test, p.y_test, 0.1, solver="qr")
    with pytest.raises(ValueError, match="same nonzero number"):
        exact_influence(p.model, MSE, p.X, p.y[:3], p.X_test, p.y_test, 0.1)
    with pytest.raises(ValueError, match="unknown loss"):
        loss_function("hinge")
