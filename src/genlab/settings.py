"""Settings blocks shared by the studies: the typed pieces ``params.yaml`` is made of.

Kept apart from :mod:`genlab.config` (which assembles the whole file from the study registry) so
study modules can import them without an import cycle.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

SLUG_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
"""Study and run names: lower-case, no path separators (no artifact path can leave the workspace)
and no dots (DVC reads a dot in a params key as nesting)."""

Slug = Annotated[str, Field(pattern=SLUG_PATTERN, max_length=64)]
Seed = Annotated[int, Field(ge=0, lt=2**32)]


class FrozenModel(BaseModel):
    """Base of every settings block: immutable, unknown keys rejected, NaN/inf rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=False)


class RuntimeSettings(FrozenModel):
    """How to run, never what to compute: changing these reruns nothing."""

    threads: int = Field(1, ge=1, le=1024, description="torch intra-op threads per job (1 is "
                         "fastest for small models on few cores; parallelism comes from jobs).")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="auto = CUDA when present, else CPU.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class GaussianMixtureSettings(FrozenModel):
    """C Gaussian classes in R^d: mu_c ~ mean_scale * N(0, I), x = mu_y + N(0, I)."""

    n_classes: int = Field(ge=2, le=1000)
    dim: int = Field(ge=1, le=100_000)
    mean_scale: float = Field(gt=0, le=1e3, description="Std of the class means.")
    n_train: int = Field(ge=1, le=10_000_000)
    n_test: int = Field(ge=1, le=10_000_000)
    seed: Seed = Field(description="Seed of the means, the samples and the label corruption.")


class MLPSettings(FrozenModel):
    """A fully connected network; the input and output widths come from the dataset."""

    hidden: tuple[Annotated[int, Field(ge=1, le=65_536)], ...] = Field(
        min_length=1, max_length=64, description="Hidden layer widths, input to output.")
    activation: Literal["relu", "tanh", "gelu"] = "relu"
    bias: bool = True


class SGDSettings(FrozenModel):
    """Minibatch SGD with heavy-ball momentum, cross-entropy loss, a step budget."""

    optimizer: Literal["sgd"] = "sgd"
    lr: float = Field(gt=0, le=1e3)
    momentum: float = Field(0.0, ge=0, lt=1)
    weight_decay: float = Field(0.0, ge=0, le=1e3)
    batch_size: int = Field(ge=1, le=10_000_000)
    max_steps: int = Field(ge=1, le=100_000_000, description="Step budget.")
    eval_every: int = Field(ge=1, le=100_000_000, description="Steps between evaluations "
                            "(history rows and the stop check).")
    stop_at_train_acc: float | None = Field(
        1.0, gt=0, le=1, description="Stop at the first evaluation whose train accuracy reaches "
        "this value; null trains for max_steps.")


class ReportSettings(FrozenModel):
    title: str = Field("genlab report", max_length=200)


def format_float_slug(value: float) -> str:
    """A float as it appears in run ids: Python's shortest round-trip form, so two different values
    never share an id, with ``_`` for the decimal point (0.5 -> 0_5, 1.0 -> 1, 1e-05 -> 1e-05)."""
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {value}")
    text = repr(float(value)).replace("+", "")
    return text.removesuffix(".0").replace(".", "_")
