"""Modular arithmetic tables: the algorithmic datasets of the grokking study.

Power, Burda, Edwards, Babuschkin, Misra. "Grokking: Generalization Beyond Overfitting on Small
Algorithmic Datasets", arXiv:2201.02177, 2022. Every pair (a, b) with a, b in {0, ..., p-1} is one
example with label

    add: (a + b) mod p      sub: (a - b) mod p      mul: (a * b) mod p
    div: (a * b^{-1}) mod p, b != 0,  b^{-1} the inverse of b modulo p (p must be prime)

so the dataset is the whole operation table: p^2 examples (p (p - 1) for div). A seeded random
fraction of the pairs is the training set; the rest is the test set. Splits are nested in the
fraction: with the same seed, a larger train_fraction adds pairs to train and never removes any.

x holds the two operands as integer token ids in float32 columns, shape (n, 2): models are meant
to embed each as a token from a vocabulary of size p, not read them as magnitudes. There are
p classes, the result's residue.
"""

from __future__ import annotations

import numpy as np

from genlab.data.dataset import Dataset, Split, corruption_draws
from genlab.data.settings import ModularSamplesSettings, ModularSettings, Operation, train_size
from genlab.seeding import numpy_rng


def operation_table(p: int, operation: Operation) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair (a, b), in lexicographic order, and its label (a op b) mod p, all int64."""
    tokens = np.arange(p, dtype=np.int64)
    a, b = (g.ravel() for g in np.meshgrid(tokens, tokens, indexing="ij"))
    if operation == "add":
        return a, b, (a + b) % p
    if operation == "sub":
        return a, b, (a - b) % p  # numpy's % takes the sign of the divisor: result in [0, p)
    if operation == "mul":
        return a, b, (a * b) % p
    keep = b != 0
    a, b = a[keep], b[keep]
    inverse = np.zeros(p, dtype=np.int64)
    inverse[1:] = [pow(k, -1, p) for k in range(1, p)]
    return a, b, (a * inverse[b]) % p


def modular(settings: ModularSettings) -> Dataset:
    """The operation table, split at random into train and test.

    Args:
        settings: the modulus p, the operation, the training fraction and the seed.

    Returns:
        x = (a, b) token ids as float32 (n, 2), y = (a op b) mod p as int64, ``n_classes = p``.
        Both splits are sorted by (a, b); training points carry label-corruption draws.
    """
    s = settings
    a, b, label = operation_table(s.modulus, s.operation)
    n_pairs = len(label)
    n_train = train_size(n_pairs, s.train_fraction)
    # The first n_train pairs of one seeded permutation: a larger fraction only adds pairs.
    order = numpy_rng(s.seed, "split").permutation(n_pairs)
    train_idx, test_idx = np.sort(order[:n_train]), np.sort(order[n_train:])
    # One draw per pair of the whole table, so a pair's corruption draw does not depend on the
    # fraction (a pair in train at two fractions is corrupted alike).
    u_corrupt, y_random = corruption_draws(numpy_rng(s.seed, "label-corruption"), n_pairs,
                                           s.modulus)
    x = np.stack([a, b], axis=1).astype(np.float32)  # exact: token ids < 2^24
    info = {
        "generator": "modular",
        "n_classes": s.modulus,
        "input_dim": 2,
        "input_encoding": "tokens",  # columns are token ids in [0, p), to be embedded
        "vocab_size": s.modulus,
        "modulus": s.modulus,
        "operation": s.operation,
        "n_pairs": n_pairs,
        "train_fraction": s.train_fraction,
        "realised_train_fraction": n_train / n_pairs,
    }
    return Dataset(
        train=Split(x[train_idx], label[train_idx], y_random=y_random[train_idx],
                    u_corrupt=u_corrupt[train_idx]),
        test=Split(x[test_idx], label[test_idx]),
        n_classes=s.modulus,
        info=info,
    )


def distinct_pairs(rng: np.random.Generator, n_range: int, n: int,
                   exclude: np.ndarray | None = None) -> np.ndarray:
    """``n`` distinct pair codes ``a * n_range + b`` drawn uniformly, none of them in
    ``exclude``, in the order drawn (so the first k of them are k distinct uniform pairs)."""
    space = n_range * n_range
    codes = np.empty(0, dtype=np.int64)
    while len(codes) < n:
        # draw a batch, keep first occurrences not seen before, in draw order
        batch = rng.integers(0, space, size=2 * (n - len(codes)) + 16, dtype=np.int64)
        merged = np.concatenate([codes, batch])
        _, first = np.unique(merged, return_index=True)
        keep = np.zeros(len(merged), dtype=bool)
        keep[first] = True
        if exclude is not None:
            keep &= ~np.isin(merged, exclude)
        codes = merged[keep]  # boolean indexing keeps the draw order
    return codes[:n]


def modular_samples(settings: ModularSamplesSettings) -> Dataset:
    """Operand pairs from a space too large to enumerate, as Charton & Kempe's tasks.

    The test set is ``n_test`` distinct uniform pairs; the training split is a stream of
    ``n_train`` further distinct pairs, in the order drawn, none of them a test pair. A run that
    trains on k examples takes the stream's first k, so data budgets are nested in k, and a run
    that reads each example once sees no pair twice.

    Returns:
        x = (a, b) token ids as float32 (n, 2), y = (a op b) mod q as int64, ``n_classes = q``.
    """
    s = settings
    rng = numpy_rng(s.seed, "modular-samples")
    test = distinct_pairs(rng, s.operand_range, s.n_test)
    train = distinct_pairs(rng, s.operand_range, s.n_train, exclude=test)

    def split(codes: np.ndarray) -> Split:
        a, b = np.divmod(codes, s.operand_range)
        label = (a + b) % s.modulus if s.operation == "add" else (a * b) % s.modulus
        return Split(np.stack([a, b], axis=1).astype(np.float32), label.astype(np.int64))

    info = {
        "generator": "modular_samples",
        "n_classes": s.modulus,
        "input_dim": 2,
        "input_encoding": "tokens",
        "vocab_size": s.operand_range,
        "operand_range": s.operand_range,
        "modulus": s.modulus,
        "operation": s.operation,
        "n_pairs": s.operand_range ** 2,
    }
    return Dataset(train=split(train), test=split(test), n_classes=s.modulus, info=info)
