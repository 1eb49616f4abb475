"""Random-subspace training (Li et al. 2018): the projection against a dense reconstruction from
its documented recipe, the reparametrised model, and training on a tiny teacher task.

Task: x ~ N(0, I₄), labels the argmax of a random 4-16-3 tanh teacher, 200 training and 500 test
points; student a 4-32-3 tanh MLP (D = 259), full-batch Adam (lr 0.02) for 400 steps. Measured:
full training reaches train/test accuracy 1.0/0.928; in the subspace, d = 1, 2, 4, 8, 16, 32, 64,
259 reach train 0.50, 0.56, 0.72, 0.77, 0.88, 0.95, 0.995, 1.0 (test 0.51 … 0.85 at d = 16 …
0.93), so d_int90 (test, 0.9 × 0.928) is 16. Each run takes about 0.5 s.
"""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

from genlab.analyses.dimension.subspace import (
    PROJECTION_PURPOSE,
    RandomProjection,
    SubspaceModel,
    d_int90,
    train_in_subspace,
)
from genlab.models.mlp import MLP
from genlab.seeding import derive_seed
from genlab.settings import MLPSettings, TrainSettings
from genlab.train.loop import train_classifier

SETTINGS = TrainSettings(optimizer="adam", lr=0.02, batch_size=200, max_steps=400,
                         eval_every=50, stop_at_train_acc=None)


def dense_reference(D: int, d: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """P built column by column from the recipe in RandomProjection's docstring."""
    columns = []
    for c in range(d):
        generator = torch.Generator().manual_seed(derive_seed(seed, PROJECTION_PURPOSE, c))
        g = torch.randn(D, generator=generator, dtype=dtype)
        columns.append(g / torch.linalg.vector_norm(g))
    return torch.stack(columns, dim=1)


@functools.cache
def task() -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    w1 = torch.randn(4, 16, generator=generator)
    w2 = torch.randn(16, 3, generator=generator)

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, 4, generator=generator)
        return x, (torch.tanh(x @ w1) @ w2).argmax(dim=1)

    return (*draw(200), *draw(500))


def student() -> MLP:
    torch.manual_seed(1)
    return MLP(MLPSettings(hidden=(32,), activation="tanh"), 4, 3)


# ----------------------------------------------------------------------------- projection


@pytest.mark.parametrize("cached", [True, False])
def test_projection_equals_dense_reconstruction(cached: bool) -> None:
    D, d = 300, 17
    projection = RandomProjection(D, d, seed=5, dtype=torch.float64,
                                  max_cached_entries=D * d if cached else 0,
                                  max_block_entries=4 * D)  # blocks of 4 columns when streamed
    assert projection.cached is cached
    P = dense_reference(D, d, 5, torch.float64)
    torch.testing.assert_close(projection.dense(), P, rtol=0, atol=1e-15)
    torch.testing.assert_close(torch.linalg.vector_norm(P, dim=0),
                               torch.ones(d, dtype=torch.float64))
    z = torch.randn(d, dtype=torch.float64, requires_grad=True)
    g = torch.randn(D, dtype=torch.float64)
    out = projection(z)
    torch.testing.assert_close(out, P @ z.detach(), rtol=1e-13, atol=1e-13)
    (out @ g).backward()
    torch.testing.assert_close(z.grad, P.T @ g, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(projection.rmatvec(g), P.T @ g, rtol=1e-13, atol=1e-13)


def test_columns_do_not_depend_on_d_or_block_size() -> None:
    small = RandomProjection(50, 3, seed=2, max_cached_entries=0, max_block_entries=50)
    large = RandomProjection(50, 8, seed=2, max_block_entries=50 * 5)
    torch.testing.assert_close(small.dense(), large.dense()[:, :3], rtol=0, atol=0)


def test_streamed_projection_never_holds_p_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """D·d = 4·10⁶ numbers, over the cache limit: products regenerate P in blocks of at most
    max_block_entries, in the forward and the backward pass alike."""
    D, d, budget = 20_000, 200, 20_000 * 16
    projection = RandomProjection(D, d, seed=0, max_cached_entries=10**6,
                                  max_block_entries=budget)
    assert not projection.cached and projection.block_columns == 16
    sizes: list[int] = []
    original = RandomProjection.column_block

    def recording(self: RandomProjection, start: int, stop: int) -> torch.Tensor:
        block = original(self, start, stop)
        sizes.append(block.numel())
        return block

    monkeypatch.setattr(RandomProjection, "column_block", recording)
    z = torch.randn(d, requires_grad=True)
    projection(z).sum().backward()
    assert max(sizes) <= budget
    assert sum(sizes) == 2 * D * d  # every column drawn once forward, once backward
    assert z.grad.shape == (d,)


# -------------------------------------------------------------------------- subspace model


def test_subspace_model_starts_at_the_model_and_leaves_it_untouched() -> None:
    model = student()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    wrapped = SubspaceModel(model, 12, seed=0)
    assert [name for name, _ in wrapped.named_parameters()] == ["z"]
    x = task()[0]
    torch.testing.assert_close(wrapped(x), model(x), rtol=0, atol=0)
    with torch.no_grad():
        wrapped.z.add_(1.0)
    assert not torch.equal(wrapped(x), model(x))
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name])


def test_streamed_and_cached_training_agree() -> None:
    X_train, y_train, X_test, y_test = task()
    settings = SETTINGS.model_copy(update={"max_steps": 20, "eval_every": 10})
    results = []
    for cache in (10**9, 0):
        wrapped = SubspaceModel(student(), 24, seed=3, max_cached_entries=cache,
                                max_block_entries=259 * 5)
        train_classifier(wrapped, X_train, y_train, X_test, y_test, settings,
                         torch.Generator().manual_seed(0))
        results.append(wrapped.z.detach())
    torch.testing.assert_close(results[0], results[1], rtol=1e-4, atol=1e-5)


# -------------------------------------------------------------------------------- training


@functools.cache
def full_training() -> tuple[float, float]:
    model = student()
    final = train_classifier(model, *task(), SETTINGS, torch.Generator().manual_seed(0)).final
    return final.train_acc, final.test_acc


def test_full_rank_subspace_fits_like_the_full_model_and_small_d_does_not() -> None:
    full_train, _ = full_training()
    D = sum(p.numel() for p in student().parameters())
    model = student()
    model.eval()
    whole = train_in_subspace(model, D, *task(), SETTINGS, seed=0)
    assert (whole.dim, whole.num_params) == (259, 259)
    assert whole.train_acc >= full_train - 0.02  # measured 1.0 and 1.0
    assert not model.training  # flags restored
    tiny = train_in_subspace(student(), 2, *task(), SETTINGS, seed=0)
    assert tiny.train_acc <= full_train - 0.2  # measured 0.56
    assert tiny.test_acc < whole.test_acc


def test_training_is_deterministic() -> None:
    a = train_in_subspace(student(), 8, *task(), SETTINGS, seed=4)
    b = train_in_subspace(student(), 8, *task(), SETTINGS, seed=4)
    c = train_in_subspace(student(), 8, *task(), SETTINGS, seed=5)
    assert torch.equal(a.z, b.z) and a.test_acc == b.test_acc
    assert not torch.equal(a.z, c.z)


# --------------------------------------------------------------------------------- d_int90


def test_d_int90() -> None:
    accuracies = {1: 0.5, 4: 0.72, 16: 0.85, 32: 0.83, 64: 0.93}
    assert d_int90(accuracies, 0.928) == 16  # target 0.8352
    assert d_int90(accuracies, 0.928, threshold=0.95) == 64  # target 0.8816
    assert d_int90(accuracies, 1.2) is None  # nothing reaches 1.08
    assert d_int90({64: 0.9, 8: 0.9}, 1.0) == 8  # unordered input; ≥ counts
    assert d_int90({}, 0.9) is None
    with pytest.raises(ValueError):
        d_int90(accuracies, 0.9, threshold=0)


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        RandomProjection(0, 3, seed=0)
    with pytest.raises(ValueError, match="no trainable parameters"):
        SubspaceModel(nn.Linear(2, 2).requires_grad_(False), 3, seed=0)
