"""Training on a stream with repeated examples: the data stream, the samplers' reads, and the
fixed-budget loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from genlab.data.modular import distinct_pairs, modular_samples
from genlab.data.settings import ModularSamplesSettings
from genlab.models.registry import build_seeded_model
from genlab.settings import TransformerSettings
from genlab.train.loop import MinibatchSampler
from genlab.train.repetition import TwoSetSampler, sampler_for, train_on_stream
from genlab.train.repetition_settings import Regime, RepetitionRecipe


def stream_settings(**changes) -> ModularSamplesSettings:
    return ModularSamplesSettings(**{"operand_range": 40, "modulus": 7, "operation": "mul",
                                     "n_train": 600, "n_test": 100, "seed": 3, **changes})


def test_stream_is_distinct_pairs_disjoint_from_the_test_pairs_with_their_labels() -> None:
    ds = modular_samples(stream_settings())
    train = ds.train.x[:, 0].astype(np.int64) * 40 + ds.train.x[:, 1].astype(np.int64)
    test = ds.test.x[:, 0].astype(np.int64) * 40 + ds.test.x[:, 1].astype(np.int64)
    assert len(np.unique(train)) == 600 and len(np.unique(test)) == 100
    assert not np.isin(train, test).any()
    for split in (ds.train, ds.test):
        a, b = split.x[:, 0].astype(np.int64), split.x[:, 1].astype(np.int64)
        assert np.array_equal(split.y, (a * b) % 7)
        assert a.min() >= 0 and max(a.max(), b.max()) < 40
    added = modular_samples(stream_settings(operation="add"))
    a, b = added.train.x[:, 0].astype(np.int64), added.train.x[:, 1].astype(np.int64)
    assert np.array_equal(added.train.y, (a + b) % 7)
    assert ds.n_classes == 7 and ds.info["vocab_size"] == 40
    # seeded: the same seed draws the same stream, another seed another
    assert np.array_equal(modular_samples(stream_settings()).train.x, ds.train.x)
    assert not np.array_equal(modular_samples(stream_settings(seed=4)).train.x, ds.train.x)


def test_distinct_pairs_are_uniform_over_the_pairs_left() -> None:
    # all 9 pairs of a 3 x 3 space but the excluded two, each drawn first about equally often
    rng = np.random.default_rng(0)
    exclude = np.array([0, 4])
    firsts = [distinct_pairs(rng, 3, 7, exclude=exclude) for _ in range(2100)]
    assert all(sorted(f) == [1, 2, 3, 5, 6, 7, 8] for f in firsts)
    counts = np.bincount([f[0] for f in firsts], minlength=9)
    assert counts[0] == counts[4] == 0
    assert counts[[1, 2, 3, 5, 6, 7, 8]] == pytest.approx(np.full(7, 300), abs=75)  # ~4.6 sd


def test_a_stream_too_long_for_the_pair_space_is_refused() -> None:
    with pytest.raises(ValidationError, match="n_train.*at most 90% of the 1600 pairs"):
        stream_settings(n_train=1500)


RECIPE = RepetitionRecipe(lr=1e-3, batch_size=8, steps=50, eval_every=10, n_eval_seen=16)


def reads(sampler, steps: int, n: int) -> np.ndarray:
    """How many times each of the first ``n`` indices was read in ``steps`` batches."""
    idx = torch.cat([sampler.next() for _ in range(steps)]).numpy()
    return np.bincount(idx, minlength=n)


def test_single_use_reads_every_example_once_and_a_budget_each_equally_often() -> None:
    g = torch.Generator().manual_seed(0)
    single = sampler_for(Regime(), RECIPE, 1000, g)
    assert isinstance(single, MinibatchSampler)
    assert np.array_equal(reads(single, 50, 400), np.ones(400))  # 50 x 8: each example once
    budget = sampler_for(Regime(data_budget=40), RECIPE, 1000, g)
    counts = reads(budget, 50, 1000)
    assert np.array_equal(counts[:40], np.full(40, 10)) and not counts[40:].any()
    assert Regime(data_budget=40).repetitions(RECIPE) == 10
    with pytest.raises(ValueError, match="data budget 400 exceeds the stream's 399"):
        sampler_for(Regime(), RECIPE, 399, g)


def test_two_set_reads_the_repeated_set_with_probability_p_and_fresh_examples_once() -> None:
    sampler = TwoSetSampler(size=20, p=0.25, batch_size=64, n_available=20 + 64 * 200,
                            generator=torch.Generator().manual_seed(1))
    counts = reads(sampler, 200, 20 + 64 * 200)
    repeated = counts[:20].sum()
    # binomial(12,800, 0.25): sd ~49
    assert repeated == pytest.approx(0.25 * 64 * 200, abs=200)
    fresh = counts[20:]
    n_fresh = 64 * 200 - repeated
    assert np.array_equal(fresh[:n_fresh], np.ones(n_fresh)) and not fresh[n_fresh:].any()
    short = TwoSetSampler(size=20, p=0.25, batch_size=64, n_available=100,
                          generator=torch.Generator().manual_seed(1))
    short.next()
    with pytest.raises(ValueError, match="the stream's 100 examples ran out"):
        short.next()


def test_regime_settings_name_the_key_at_fault() -> None:
    with pytest.raises(ValidationError, match="needs both repeated_set and repeated_prob"):
        Regime(repeated_set=10)
    with pytest.raises(ValidationError, match="data_budget.*omit data_budget"):
        Regime(data_budget=10, repeated_set=10, repeated_prob=0.5)
    with pytest.raises(ValidationError, match="eval_every.*exceeds steps"):
        RepetitionRecipe(lr=1e-3, batch_size=8, steps=5, eval_every=10)
    two_set = Regime(repeated_set=40, repeated_prob=0.25)
    assert two_set.repetitions(RECIPE) == pytest.approx(2.5)  # 400 reads x 0.25 / 40
    assert two_set.examples_needed(RECIPE) == 440


def tiny_run(regime: Regime, recipe: RepetitionRecipe = RECIPE):
    ds = modular_samples(stream_settings())
    model = build_seeded_model("transformer", TransformerSettings(
        vocab_size=40, max_len=2, d_model=16, n_heads=2, d_mlp=32), 2, 7, seed=0)

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a)

    return train_on_stream(model, t(ds.train.x), t(ds.train.y), t(ds.test.x), t(ds.test.y),
                           regime, recipe, torch.Generator().manual_seed(2))


def test_the_loop_takes_exactly_the_budget_and_is_deterministic() -> None:
    result = tiny_run(Regime(data_budget=40))
    assert result.status == "budget" and result.steps == 50
    assert [r.step for r in result.history] == [0, 10, 20, 30, 40, 50]
    # the repeated examples are learned first: memorised well above the test pairs
    assert result.final.train_acc > result.final.test_acc
    again = tiny_run(Regime(data_budget=40))
    assert [r.as_dict() for r in again.history] == [r.as_dict() for r in result.history]
    other = tiny_run(Regime(repeated_set=16, repeated_prob=0.5))
    assert [r.test_acc for r in other.history] != [r.test_acc for r in result.history]


def test_a_run_whose_loss_overflows_is_recorded_as_diverged() -> None:
    huge = RECIPE.model_copy(update={"lr": 1e9})
    result = tiny_run(Regime(), huge)
    assert result.status == "diverged" and result.diverged_step is not None
    assert result.steps < 50
