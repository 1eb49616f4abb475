"""Settings blocks shared by the studies: the typed pieces ``params.yaml`` is made of.

Kept apart from :mod:`genlab.config` (which assembles the whole file from the study registry) so
study modules can import them without an import cycle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Literal, Self, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from genlab.claim_rules import RULE_FORMS, Rule

SLUG_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
"""Study and run names: lower-case, no path separators (no artifact path can leave the workspace)
and no dots (DVC reads a dot in a params key as nesting)."""

Slug = Annotated[str, Field(pattern=SLUG_PATTERN, max_length=64)]
Seed = Annotated[int, Field(ge=0, lt=2**32)]


def _rule_text(text: str) -> str:
    Rule.parse(text)  # a ValueError naming the forms a rule takes
    return text


ClaimRule = Annotated[str, AfterValidator(_rule_text), Field(
    description=f"What the claim asserts of its effect's 95% interval: {RULE_FORMS}. Declared "
    "before the run; change it only in a commit that says why.")]
"""A claim's rule as params.yaml states it (text, so the file reads as written); parse it with
:meth:`genlab.studies.rules.Rule.parse`."""


class FrozenModel(BaseModel):
    """Base of every settings block: immutable, unknown keys rejected, NaN/inf rejected, and no
    booleans where numbers belong."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=False)

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, data: Any) -> Any:
        # pydantic's lax mode reads True as 1 and YAML reads yes/no/on/off as booleans, so
        # `max_steps: yes` would silently mean one step. (A model validator, not a field one:
        # pydantic forbids "before" validators on the discriminator fields of tagged unions.)
        if not isinstance(data, dict):
            return data
        for name, value in data.items():
            field = cls.model_fields.get(name) if isinstance(name, str) else None
            items = value if isinstance(value, list | tuple) else (value,)
            if field is not None and any(isinstance(v, bool) for v in items) \
                    and _is_numeric(field.annotation):
                raise FieldValueError(name, value, "a number is expected, not a boolean (YAML "
                                      "reads true/false/yes/no/on/off as booleans)")
        return data


class FieldValueError(ValueError):
    """A model-level check's complaint about one key below the model (``field``: a name, or a
    path of names): the error report names it in the key path and ``value`` as what was given."""

    def __init__(self, field: str | tuple[str, ...], value: Any, message: str) -> None:
        self.field = (field,) if isinstance(field, str) else tuple(field)
        self.value, self.message = value, message
        super().__init__(f"{'.'.join(map(str, self.field))}: {message}")  # for a bare pydantic str


def _is_numeric(annotation: Any) -> bool:
    """Whether a field holds numbers (int, float, optional or in a tuple) and never a boolean."""
    if annotation in (int, float):
        return True
    args = [a for a in get_args(annotation) if a not in (type(None), Ellipsis)]
    if get_origin(annotation) is Annotated:
        return _is_numeric(args[0])
    if get_origin(annotation) in (Union, UnionType, tuple, list):
        return bool not in args and any(_is_numeric(a) for a in args)
    return False


class RuntimeSettings(FrozenModel):
    """How to run, never what to compute: changing these reruns nothing."""

    threads: int = Field(1, ge=1, le=1024, description="torch intra-op threads per job (1 is "
                         "fastest for small models on few cores; parallelism comes from jobs).")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="auto = CUDA when present, else CPU.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    checkpoint_minutes: float = Field(
        10.0, ge=0, le=1e6, description="A training job saves a checkpoint at the first "
        "evaluation after this many minutes (0: at every evaluation); a killed job resumes from "
        "it, and ends exactly as an uninterrupted one.")


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


class ResidualMLPSettings(FrozenModel):
    """Linear(d, width) -> activation, then ``blocks`` residual blocks h + act(W h + b), then a
    Linear head: MNIST-1D's MLPBase (Greydanus 2020) with the defaults."""

    width: int = Field(100, ge=1, le=65_536, description="Width of every hidden layer.")
    blocks: int = Field(1, ge=0, le=64, description="Residual blocks after the first layer.")
    activation: Literal["relu", "tanh", "gelu"] = "relu"


class Conv1DSettings(FrozenModel):
    """Conv1d -> activation layers on a series read as one channel, flattened into a Linear
    head: MNIST-1D's ConvBase (Greydanus 2020) with the defaults. No pooling, normalisation or
    dropout."""

    channels: tuple[Annotated[int, Field(ge=1, le=4096)], ...] = Field(
        (25, 25, 25), min_length=1, max_length=16, description="Output channels of each layer.")
    kernel_sizes: tuple[Annotated[int, Field(ge=1, le=255)], ...] = Field(
        (5, 3, 3), min_length=1, max_length=16, description="Kernel length of each layer.")
    stride: int = Field(2, ge=1, le=64, description="Stride of every layer.")
    padding: int = Field(1, ge=0, le=255, description="Zeros added at both ends by every layer.")
    activation: Literal["relu", "tanh", "gelu"] = "relu"

    @model_validator(mode="after")
    def _one_kernel_per_layer(self) -> Self:
        if len(self.channels) != len(self.kernel_sizes):
            raise ValueError(f"channels has {len(self.channels)} layers but kernel_sizes has "
                             f"{len(self.kernel_sizes)}: give one kernel length per layer")
        return self


class TransformerSettings(FrozenModel):
    """A causal transformer; the sequence length and the number of classes come from the data."""

    vocab_size: int = Field(ge=1, le=1_000_000, description="Token ids lie in [0, vocab_size).")
    max_len: int = Field(ge=1, le=65_536, description="Longest sequence (positional embeddings).")
    d_model: int = Field(128, ge=1, le=65_536, description="Residual stream width.")
    n_heads: int = Field(4, ge=1, le=1024, description="Attention heads; must divide d_model.")
    n_layers: int = Field(1, ge=1, le=256)
    d_mlp: int = Field(512, ge=1, le=262_144, description="Hidden width of each block's MLP.")
    activation: Literal["relu", "tanh", "gelu"] = "relu"
    layer_norm: bool = Field(True, description="Pre-LN blocks and a final LayerNorm; false "
                             "replaces every LayerNorm by the identity.")
    bias: bool = Field(True, description="Biases in the Linear and LayerNorm layers.")

    @model_validator(mode="after")
    def _heads_divide_width(self) -> TransformerSettings:
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must divide d_model ({self.d_model})")
        return self


class PatchNetSettings(FrozenModel):
    """The ReLU² patch network of Lu et al. 2024 (:mod:`genlab.models.patch_net`)."""

    width: int = Field(8, ge=1, le=65_536, description="Filters m per sign.")
    n_patches: int = Field(3, ge=1, le=1024, description="Patches P per input; the input's "
                           "columns are P consecutive blocks of d.")
    init_std: float = Field(0.01, gt=0, le=10, description="Std of the initial filter entries.")


class TrainSettings(FrozenModel):
    """One training recipe: optimizer, loss, step-size schedule, step budget, evaluation cadence.

    ``gd`` is full-batch gradient descent (batch_size must be omitted); ``sgd`` has heavy-ball
    momentum with torch.optim.SGD's semantics; ``adam`` is torch.optim.Adam (L2 weight decay);
    ``layca`` is SGD whose step turns each layer's weights by a controlled angle and trains no
    bias (:mod:`genlab.train.layca`; no weight decay: it keeps the norms).
    Losses: ``cross_entropy``; ``mse`` = ½‖f(x) − onehot(y)‖² per example for class labels (Cohen
    et al. 2021) and ½(f(x) − y)² for float regression targets; ``squared_margin`` =
    (1 − y f(x))² for a scalar-output binary model, y = ±1.
    """

    optimizer: Literal["sgd", "gd", "adam", "layca"] = "sgd"
    loss: Literal["cross_entropy", "mse", "squared_margin"] = "cross_entropy"
    lr: float = Field(gt=0, le=1e3)
    momentum: float = Field(0.0, ge=0, lt=1, description="SGD/GD heavy-ball momentum.")
    betas: tuple[float, float] = Field((0.9, 0.999), description="Adam's (β1, β2).")
    weight_decay: float = Field(0.0, ge=0, le=1e3)
    batch_size: int | None = Field(None, ge=1, le=10_000_000, description="Minibatch size "
                                   "(sgd, adam); omit for gd.")
    schedule: Literal["constant", "step", "multistep", "cosine"] = Field(
        "constant", description="step: multiply lr by step_gamma every step_every steps; "
        "multistep: by step_gamma after each step listed in step_at; cosine: from lr to 0 over "
        "max_steps.")
    step_every: int | None = Field(None, ge=1, le=100_000_000)
    step_at: tuple[Annotated[int, Field(ge=1, le=100_000_000)], ...] | None = Field(
        None, description="multistep: the steps after which lr is multiplied by step_gamma, "
        "increasing.")
    step_gamma: float = Field(0.1, gt=0, le=1)
    max_steps: int = Field(ge=1, le=100_000_000, description="Step budget.")
    eval_every: int = Field(ge=1, le=100_000_000, description="Steps between evaluations "
                            "(history rows and the stop check).")
    stop_at_train_acc: float | None = Field(
        1.0, gt=0, le=1, description="Stop at the first evaluation whose train accuracy reaches "
        "this value; null trains for max_steps.")
    stop_at_train_loss: float | None = Field(
        None, gt=0, le=1e6, description="Stop at the first evaluation whose train loss is at or "
        "below this value (for regression, where accuracy means nothing).")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.optimizer == "gd" and self.batch_size is not None:
            raise ValueError("optimizer 'gd' is full-batch: omit batch_size")
        if self.optimizer != "gd" and self.batch_size is None:
            raise ValueError(f"optimizer {self.optimizer!r} needs batch_size")
        if self.optimizer == "adam" and self.momentum:
            raise ValueError("momentum is for sgd/gd; Adam's is betas[0]")
        if self.optimizer == "layca" and self.weight_decay:
            raise ValueError("layca keeps each layer's norm: weight_decay must be 0")
        if self.schedule == "step" and self.step_every is None:
            raise ValueError("schedule 'step' needs step_every")
        if self.schedule == "multistep" and (
                not self.step_at or list(self.step_at) != sorted(set(self.step_at))):
            raise ValueError("schedule 'multistep' needs step_at, increasing")
        if not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must be in [0, 1), got {self.betas}")
        return self


class AdamFitRecipe(FrozenModel):
    """Adam on the cross-entropy until the training accuracy reaches ``stop_at_train_acc`` (or
    the step budget ends): the recipe of studies that train each model to fit its training set."""

    lr: float = Field(gt=0, le=1e3, description="Adam's step size.")
    batch_size: int = Field(ge=1, le=10_000_000)
    max_steps: int = Field(ge=1, le=100_000_000, description="Step budget.")
    eval_every: int = Field(ge=1, le=100_000_000, description="Steps between evaluations (the "
                            "stop check and history rows).")
    stop_at_train_acc: float = Field(1.0, gt=0, le=1, description="Stop once the training "
                                     "accuracy reaches this.")

    def train_settings(self) -> TrainSettings:
        """The recipe as the training loop (genlab.train.loop) takes it."""
        return TrainSettings(optimizer="adam", loss="cross_entropy", lr=self.lr,
                             batch_size=self.batch_size, max_steps=self.max_steps,
                             eval_every=self.eval_every,
                             stop_at_train_acc=self.stop_at_train_acc)


class ReportSettings(FrozenModel):
    title: str = Field("genlab report", max_length=200)


def format_float_slug(value: float) -> str:
    """A float as it appears in run ids: Python's shortest round-trip form, so two different values
    never share an id, with ``_`` for the decimal point (0.5 -> 0_5, 1.0 -> 1, 1e-05 -> 1e-05)."""
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {value}")
    text = repr(float(value)).replace("+", "")
    return text.removesuffix(".0").replace(".", "_")


@dataclass(frozen=True)
class Resources:
    """What a stage asks a scheduler for (Snakemake ``resources:``; SLURM through its executor).
    Snakemake-only: DVC never reads them, so editing them reruns nothing."""

    mem_mb: int
    runtime: int  # minutes
