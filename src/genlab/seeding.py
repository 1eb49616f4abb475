"""Seeds derive from ``params.yaml``: one base seed per dataset or run, split by purpose.

Deriving every stream from (base seed, purpose) with a hash keeps streams independent: adding a new
random draw for one purpose never shifts the numbers another purpose sees.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where a generator is made: the settings derive seeds too
    import numpy as np


def derive_seed(base: int, *purpose: str | int) -> int:
    """A 63-bit seed for ``purpose`` under ``base``: sha256 of their canonical text."""
    text = ":".join([str(base), *map(str, purpose)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def numpy_rng(base: int, *purpose: str | int) -> np.random.Generator:
    import numpy as np

    return np.random.default_rng(derive_seed(base, *purpose))


def torch_generator(base: int, *purpose: str | int, device: str = "cpu"):  # -> torch.Generator
    import torch  # torch is heavy; config loading must not pay for it

    gen = torch.Generator(device=device)
    gen.manual_seed(derive_seed(base, *purpose))
    return gen


def subsample(X, y, max_examples: int | None, seed: int = 0):  # tensors -> (X, y)
    """At most ``max_examples`` examples drawn without replacement from ``seed`` (kept in their
    original order), or all of them for None: the curvature of a big training set is estimated
    on a subsample, as Cohen et al. do on 5k examples."""
    import torch

    if max_examples is None or max_examples >= len(X):
        return X, y
    generator = torch_generator(seed, "sharpness", "subsample")
    keep = torch.randperm(len(X), generator=generator)[:max_examples].sort().values
    keep = keep.to(X.device)
    return X[keep], y[keep.to(y.device)]
