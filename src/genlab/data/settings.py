"""The settings of every dataset generator: pydantic models only, no numpy, no generator code.

Kept apart from the generators so that validating ``params.yaml`` (which every stage does) does not
make every stage depend on every generator's code (see ``genlab.workflow.code_deps``). Each
generator module imports its settings from here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import Field, ValidationError, create_model, model_validator

from genlab.settings import FieldValueError, FrozenModel, Seed


class DigitsSettings(FrozenModel):
    """scikit-learn's 8x8 digits, pixels / 16, split at random into train and test."""

    test_fraction: float = Field(gt=0, lt=1, description="Fraction of the 1797 images held out "
                                 "for testing.")
    seed: Seed = Field(description="Seed of the train/test split and the label corruption.")


class MNIST1DSettings(FrozenModel):
    """MNIST-1D (Greydanus 2020) built by the ``mnist1d`` package's procedural generator.

    The defaults are the package's ``get_dataset_args()``: 5,000 series of length 40, the first
    80% for training (4,000) and the rest for testing (1,000). Field names are the package's."""

    num_samples: int = Field(5000, ge=20, le=10_000_000, description="Series generated, an "
                             "equal number per digit (a multiple of 10), before the split.")
    train_split: float = Field(0.8, gt=0, lt=1, description="Fraction of the series that "
                               "trains; the rest is the test set.")
    template_len: int = Field(12, ge=2, le=10_000, description="Length of a digit template "
                              "before padding (the package's templates have 12 points).")
    padding: tuple[Annotated[int, Field(ge=0, le=100_000)],
                   Annotated[int, Field(ge=0, le=100_000)]] = Field(
        (36, 60), description="[low, high]: each series is padded with a uniform number of "
        "zeros in this range, then dilated to template_len + high points.")
    scale_coeff: float = Field(0.4, ge=0, lt=2, description="Amplitude scaled by "
                               "1 + scale_coeff * (u - 0.5), u ~ U(0, 1).")
    max_translation: int = Field(48, ge=1, le=100_000, description="Circular shift by a "
                                 "uniform k in [0, max_translation).")
    corr_noise_scale: float = Field(0.25, ge=0, le=1e3, description="Std of the Gaussian "
                                    "noise, smoothed (sigma 2), filling the padding.")
    iid_noise_scale: float = Field(0.02, ge=0, le=1e3, description="Std of the i.i.d. "
                                   "Gaussian noise added everywhere.")
    shear_scale: float = Field(0.75, ge=0, le=1e3, description="A linear ramp of slope "
                               "shear_scale * (u - 0.5) is subtracted.")
    shuffle_seq: bool = Field(False, description="Permute the positions of every series by "
                              "one seeded permutation (the spatially shuffled variant): the "
                              "same series, with their spatial structure destroyed.")
    final_seq_length: int = Field(40, ge=2, le=100_000, description="Length each series is "
                                  "resampled to: the input dimension.")
    seed: Seed = Field(description="Seed of the generator (the package seeds NumPy's global "
                       "RNG with it; genlab restores that RNG afterwards) and of the label "
                       "corruption.")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.num_samples % 10:
            raise ValueError(f"num_samples ({self.num_samples}) must be a multiple of 10: the "
                             "generator makes num_samples // 10 series of each digit")
        n_train = int(self.num_samples * self.train_split)
        if not 1 <= n_train <= self.num_samples - 1:
            raise ValueError(f"train_split {self.train_split} of {self.num_samples} series "
                             f"gives {n_train} training series; both splits need at least one")
        low, high = self.padding
        if low > high:
            raise ValueError(f"padding [{low}, {high}]: low exceeds high")
        if self.max_translation > self.template_len + high:
            raise ValueError(f"max_translation ({self.max_translation}) exceeds the dilated "
                             f"series' length (template_len + padding high = "
                             f"{self.template_len + high})")
        return self


class FeatureNoiseSettings(FrozenModel):
    """y = +-1; patches y*u (strong, some points), y*v (weak, every point), N(0, sigma_p^2 I)."""

    patch_dim: int = Field(64, ge=2, le=100_000, description="Patch dimension d (x has 3d "
                           "columns); at least 2 so u = e_1 and v = e_2 are orthogonal.")
    strong_norm: float = Field(1.0, gt=0, le=1e3, description="||u||, u = strong_norm * e_1.")
    weak_norm: float = Field(0.1, gt=0, le=1e3, description="||v||, v = weak_norm * e_2.")
    noise_std: float = Field(ge=0, le=1e3, description="sigma_p, the std of each noise-patch "
                             "coordinate (the paper's experiments use 0.02 and 0.05).")
    n_train: int = Field(16, ge=1, le=10_000_000)
    n_weak_only: int = Field(2, ge=0, le=10_000_000, description="Training points without the "
                             "strong feature; which ones is drawn from the seed.")
    n_test_strong: int = Field(ge=0, le=10_000_000, description="Test points with both features.")
    n_test_weak: int = Field(ge=0, le=10_000_000, description="Test points with the weak feature "
                             "only.")
    seed: Seed = Field(description="Seed of the labels, the noise, the weak-only choice and the "
                       "label corruption.")

    @model_validator(mode="after")
    def _sizes(self) -> Self:
        if self.n_weak_only > self.n_train:
            raise ValueError(f"n_weak_only ({self.n_weak_only}) exceeds n_train ({self.n_train})")
        if self.n_test_strong + self.n_test_weak == 0:
            raise ValueError("the test set is empty: set n_test_strong or n_test_weak")
        return self


class LogisticTeacherSettings(FrozenModel):
    """x ~ N(0, diag(s)²), P(y = 1 | x) = σ(β wᵀx/‖w ∘ s‖ + b); a fraction of labels flipped."""

    input_dim: int = Field(ge=1, le=100_000, description="Input dimension d.")
    anisotropy: float = Field(0.5, ge=0, le=6, description="Feature standard deviations are "
                              "log-spaced over [10^-a, 10^a]; 0 makes the inputs isotropic.")
    signal: float = Field(3.0, gt=0, le=1e3, description="β: the standard deviation of the "
                          "teacher's logit over the inputs (large = nearly separable).")
    bias: float = Field(0.0, ge=-1e3, le=1e3, description="b: the teacher's logit offset.")
    labels: Literal["bernoulli", "sign"] = Field(
        "bernoulli", description="bernoulli: y ~ Bernoulli(σ(z)); sign: y = 1[z > 0].")
    flip_fraction: float = Field(0.0, ge=0, lt=1, description="Fraction of training labels "
                                 "flipped to the other class (exact when it times n_train is "
                                 "an integer); the clean labels and the flips are recorded.")
    n_train: int = Field(ge=2, le=10_000_000)
    n_test: int = Field(ge=1, le=10_000_000)
    seed: Seed = Field(description="Seed of the teacher, the inputs, the labels and the flips.")


Operation = Literal["add", "sub", "mul", "div"]


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    return all(n % k for k in range(2, math.isqrt(n) + 1))


class ModularSettings(FrozenModel):
    """All pairs (a, b) in [0, p)^2 labelled (a op b) mod p; a random train fraction of them."""

    modulus: int = Field(ge=2, le=1000, description="p, also the number of classes and the "
                         "token vocabulary (must be prime for div).")
    operation: Operation = Field(description="add, sub, mul, or div (a * b^-1, b != 0).")
    train_fraction: float = Field(gt=0, lt=1, description="Fraction of the pairs used for "
                                  "training; the rest is the test set.")
    seed: Seed = Field(description="Seed of the train/test split and the label corruption.")

    @model_validator(mode="after")
    def _check(self) -> Self:
        p = self.modulus
        if self.operation == "div" and not is_prime(p):
            below = next(k for k in range(p - 1, 1, -1) if is_prime(k)) if p > 2 else None
            above = next(k for k in range(p + 1, 2 * p + 2) if is_prime(k))
            raise ValueError(f"operation 'div' needs a prime modulus so that every b != 0 has an "
                             f"inverse mod p; {p} is not prime (nearest primes: {below}, {above})")
        n_pairs = n_pair_count(p, self.operation)
        n_train = train_size(n_pairs, self.train_fraction)
        if not 1 <= n_train <= n_pairs - 1:
            raise ValueError(f"train_fraction {self.train_fraction} of {n_pairs} pairs gives "
                             f"{n_train} training pairs; both splits need at least one")
        return self


class ModularSamplesSettings(FrozenModel):
    """Operands a, b drawn from [0, operand_range), labelled (a op b) mod q: a stream of distinct
    training pairs and a held-out test set (Charton & Kempe 2024's modular multiplication)."""

    operand_range: int = Field(ge=2, le=1_000_000, description="N: operands lie in [0, N); each "
                               "is one token, so N is the model's vocabulary.")
    modulus: int = Field(ge=2, le=10_000, description="q: the label is (a op b) mod q, so q is "
                         "the number of classes.")
    operation: Literal["add", "mul"] = Field(description="add or mul.")
    n_train: int = Field(ge=1, le=100_000_000, description="Length of the stream of distinct "
                         "training pairs (a run uses a prefix of it).")
    n_test: int = Field(ge=1, le=1_000_000, description="Distinct test pairs, never in the "
                        "training stream.")
    seed: Seed = Field(description="Seed of the test pairs and the training stream.")

    @model_validator(mode="after")
    def _room(self) -> Self:
        n_pairs = self.operand_range ** 2
        # distinct pairs are drawn by rejection: leave room so that it ends quickly
        if self.n_train + self.n_test > 0.9 * n_pairs:
            raise FieldValueError("n_train", self.n_train,
                                  f"n_train + n_test must be at most 90% of the "
                                  f"{n_pairs} pairs operand_range^2")
        return self


def n_pair_count(p: int, operation: Operation) -> int:
    return p * (p - 1) if operation == "div" else p * p


def train_size(n_pairs: int, train_fraction: float) -> int:
    """round(train_fraction * n_pairs): the nearest whole number of pairs (ties to even)."""
    return round(train_fraction * n_pairs)


class TeacherSettings(FrozenModel):
    """What a random tanh teacher computes; shared with :mod:`genlab.data.manifolds`."""

    task: Literal["classification", "regression"] = Field(
        description="classification: y = argmax of C teacher outputs; regression: one output.")
    n_classes: int | None = Field(None, ge=2, le=1000, description="Classes C (classification "
                                  "only; must be omitted for regression).")
    teacher_hidden: tuple[Annotated[int, Field(ge=1, le=65_536)], ...] = Field(
        max_length=64, description="Hidden widths of the tanh teacher, input to output; empty "
        "makes the teacher linear.")
    target_noise_std: float = Field(0.0, ge=0, le=1e3, description="Std sigma of the Gaussian "
                                    "noise added to regression targets (regression only).")

    @model_validator(mode="after")
    def _fields_match_task(self) -> Self:
        if self.task == "classification" and self.n_classes is None:
            raise ValueError("task 'classification' needs n_classes (>= 2)")
        if self.task == "regression" and self.n_classes is not None:
            raise ValueError("task 'regression' has no classes; omit n_classes")
        if self.task == "classification" and self.target_noise_std != 0:
            raise ValueError("target_noise_std applies to regression only; for noisy class "
                             "labels use label corruption")
        return self

    @property
    def n_outputs(self) -> int:
        return self.n_classes if self.n_classes is not None else 1

    @property
    def dataset_classes(self) -> int:
        """``Dataset.n_classes``: C for classification, 0 for regression."""
        return self.n_classes if self.n_classes is not None else 0


class TeacherStudentSettings(TeacherSettings):
    """x ~ N(0, I_d) labelled by a random tanh MLP (argmax of C outputs, or one output + noise)."""

    input_dim: int = Field(ge=1, le=100_000, description="Input dimension d.")
    random_inputs: bool = Field(False, description="Replace every input, after labelling, by "
                                "fresh N(0, I) noise independent of its label.")
    n_train: int = Field(ge=1, le=10_000_000)
    n_test: int = Field(ge=1, le=10_000_000)
    seed: Seed = Field(description="Seed of the teacher, the inputs, the target noise and the "
                       "label corruption.")


class ManifoldSettings(TeacherSettings):
    """z ~ N(0, I_d) or U(cube) embedded in R^D by Q z or tanh(scale Q z + b); teacher on z."""

    intrinsic_dim: int = Field(ge=1, le=10_000, description="Latent dimension d.")
    ambient_dim: int = Field(ge=1, le=100_000, description="Input dimension D (>= d).")
    latent: Literal["gaussian", "uniform"] = Field(
        "gaussian", description="z ~ N(0, I_d), or uniform on [-sqrt(3), sqrt(3)]^d (unit "
        "variance per coordinate).")
    embedding: Literal["linear", "tanh"] = Field(
        description="linear: x = Q z (distance-preserving); tanh: x = tanh(scale Q z + b).")
    embedding_scale: float = Field(1.0, gt=0, le=1e3, description="tanh embedding only: the "
                                   "scale of A = scale * Q; larger bends the manifold more.")
    embedding_bias_std: float = Field(1.0, ge=0, le=1e3, description="tanh embedding only: "
                                      "b ~ N(0, bias_std^2 I_D).")
    ambient_noise_std: float = Field(0.0, ge=0, le=1e3, description="Std of isotropic N(0, I_D) "
                                     "noise added to x after embedding (0: exactly on the "
                                     "manifold).")
    n_train: int = Field(ge=1, le=10_000_000)
    n_test: int = Field(ge=1, le=10_000_000)
    seed: Seed = Field(description="Seed of the embedding, the teacher, the latents, the noises "
                       "and the label corruption.")

    @model_validator(mode="after")
    def _dims(self) -> Self:
        if self.intrinsic_dim > self.ambient_dim:
            raise ValueError(f"intrinsic_dim ({self.intrinsic_dim}) exceeds ambient_dim "
                             f"({self.ambient_dim}): an embedding needs d <= D")
        return self


class FourierLabelSettings(FrozenModel):
    """z uniform on the cube [-sqrt(3), sqrt(3)]^d, x = Q z in R^D (an isometry), and the binary
    label 1[sum_k a_k cos(frequency * w_k . z + phi_k) > 0]: the frequency sets how finely the
    classes interleave (the label sharpness), independently of the dimension d."""

    intrinsic_dim: int = Field(ge=1, le=1000, description="Latent dimension d.")
    ambient_dim: int = Field(ge=1, le=100_000, description="Input dimension D (>= d).")
    frequency: float = Field(gt=0, le=1e3, description="omega: the labelling's spatial "
                             "frequency (waves w_k ~ N(0, I_d / d), so |w_k| ~ 1).")
    n_waves: int = Field(32, ge=1, le=10_000, description="K: cosines summed.")
    n_train: int = Field(ge=1, le=10_000_000)
    n_test: int = Field(ge=1, le=10_000_000)
    seed: Seed = Field(description="Seed of the embedding, the waves and the latents.")

    @model_validator(mode="after")
    def _dims(self) -> Self:
        if self.intrinsic_dim > self.ambient_dim:
            raise FieldValueError("intrinsic_dim", self.intrinsic_dim,
                                  f"exceeds ambient_dim ({self.ambient_dim}): an embedding "
                                  "needs d <= D")
        return self


# --------------------------------------------------------------------------------------------
# A study's data block when its runs name one of several datasets (a data condition): one seed
# and one seedless settings block per dataset; each run's ``task`` picks its block and the run's
# seed its draw (genlab.data.draws sets ``task`` and ``seed`` of each draw's copy of the block).
# A study subclasses TaskData, declaring one optional field per dataset typed with seedless(),
# and lists the generators' settings classes in TASK_SETTINGS.
# --------------------------------------------------------------------------------------------


def seedless(settings: type[FrozenModel]) -> type[FrozenModel]:
    """``settings`` without its ``seed`` field: one dataset's block, whose seed is each draw's
    (the data block's ``seed`` and the run's seed)."""
    fields = {name: (field.annotation, field) for name, field in settings.model_fields.items()
              if name != "seed"}
    return create_model(settings.__name__.removesuffix("Settings") + "Task",
                        __base__=FrozenModel, __doc__=settings.__doc__, **fields)


MNIST1DTask = seedless(MNIST1DSettings)
"""MNIST-1D's block in a TaskData (MNIST1DSettings without the seed)."""
DigitsTask = seedless(DigitsSettings)
"""The digits' block in a TaskData (DigitsSettings without the seed)."""


class TaskData(FrozenModel):
    """The seed of every draw, the draw's task, and (in subclasses) one block per task."""

    TASK_SETTINGS: ClassVar[dict[str, type[FrozenModel]]] = {}
    """Task name -> its generator's settings class; each task is an optional field."""

    seed: Seed = Field(description="Base of every draw's seed: a run's data is drawn with "
                       "derive_seed(seed, 'draw', run seed), the same for every task.")
    task: str | None = Field(None, description="The task of one draw, set from the run's task "
                             "(genlab.data.draws); leave unset in params.yaml.")

    def missing(self, tasks: Iterable[str]) -> list[str]:
        """The tasks among ``tasks`` this block has no settings for, sorted."""
        return sorted({task for task in tasks if getattr(self, task, None) is None})

    def settings(self, task: str | None = None) -> Any:
        """The generator's settings of ``task`` (default: this draw's) with this seed."""
        task = task or self.task
        if task is None:
            raise ValueError("no task: name one, or read a draw's data block")
        block = getattr(self, task)
        if block is None:
            raise ValueError(f"data.{task} is not set")
        return self.TASK_SETTINGS[task](**block.model_dump(), seed=self.seed)

    @model_validator(mode="after")
    def _valid_tasks(self) -> Self:
        for task in self.TASK_SETTINGS:
            if getattr(self, task) is None:
                continue
            try:
                self.settings(task)
            except ValidationError as error:
                reasons = "; ".join(e["msg"].removeprefix("Value error, ")
                                    for e in error.errors())
                raise ValueError(f"{task}: {reasons}") from None
        return self


RealTask = Literal["mnist1d", "digits"]


class RealTaskData(TaskData):
    """The real datasets a run may name: MNIST-1D and scikit-learn's 8x8 digits; a run trains
    on its dataset's draw of its seed (the data block of layer_id and mislabel_mnist1d)."""

    TASK_SETTINGS: ClassVar[dict[str, type[FrozenModel]]] = {"mnist1d": MNIST1DSettings,
                                                             "digits": DigitsSettings}
    task: RealTask | None = Field(None, description="The dataset of one draw, set from the "
                                  "run's task (genlab.data.draws); leave unset in params.yaml.")
    mnist1d: MNIST1DTask | None = Field(  # type: ignore[valid-type]
        None, description="MNIST-1D (MNIST1DSettings without seed).")
    digits: DigitsTask | None = Field(  # type: ignore[valid-type]
        None, description="scikit-learn's 8x8 digits, flattened to 64 pixels (DigitsSettings "
        "without seed).")
