"""The registry of generalization measures: one small function per measure, name → function.

Each measure takes one :class:`MeasureInputs` (a trained model and what it was trained and tested
on) and returns a float. **Orientation**: the measures of Jiang et al. (ICLR 2020, appendix C)
are complexity measures, built so that a larger value predicts a larger generalization gap
(1/γ², 1/σ′², 1/α′², norms); the others keep their natural value (an ID, a rotation, an NC
metric), and each :class:`Measure` records in ``sign`` the direction its paper predicts: +1 if a
larger value should go with a larger gap, −1 if with a smaller one (Kendall τ of sign·μ with the
gap is then positive when the paper's claim holds). The rank statistics of
:mod:`genlab.analyses.measures.ranking` are unchanged by any increasing transform, so 1/α′ and
1/α′², or a product and its logarithm, rank models identically.

**Missing inputs.** A measure that cannot be computed from the inputs it was given (no model at
initialisation, no history, no test set, an architecture it does not support, a 10th-percentile
margin ≤ 0, a loss never reached) raises :class:`Unavailable` with the reason;
:func:`compute_measures` turns that into NaN and keeps the reason beside it. Any other exception
is a bug and propagates.

**Shared work.** σ′, α′, γ and the layer norms are needed by several measures: each is computed
once per :class:`MeasureInputs` and kept in its private cache.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev, vmap

from genlab.analyses.curvature.hessian import (
    LossFn,
    curvature_model,
    hessian_top_eigenvalues,
    hessian_trace,
    subsample,
)
from genlab.analyses.dimension.estimators import TwoNN
from genlab.analyses.dimension.representations import layer_representations
from genlab.analyses.measures.collapse import NeuralCollapse, neural_collapse
from genlab.analyses.measures.flatness import pac_bayes_sigma, worst_case_alpha
from genlab.analyses.measures.heavy_tail import (
    EIGENVALUE_FLOOR,
    MIN_EIGENVALUES,
    PowerLawFit,
    layer_fits,
)
from genlab.analyses.measures.norms import (
    LayerNorms,
    layer_norms,
    layer_rotations,
    linear_chain,
    margin_quantile,
    parameter_vector,
    path_norm,
)


class Unavailable(Exception):
    """A measure that these inputs do not define; :func:`compute_measures` records NaN and this
    reason."""


@dataclass(frozen=True)
class MeasureSettings:
    """The knobs of the measures (Jiang et al.'s values by default)."""

    margin_quantile: float = 0.1  # γ = this quantile of the training margins
    flatness_target: float = 0.1  # Δ: the tolerated increase for σ′ and α′
    sigma_loss: str = "error"  # σ′ on the 0-1 training "error" (Jiang et al.) or the "loss"
    sigma_samples: int = 10  # Monte Carlo directions for E L(θ + u)
    sigma_depth: int = 15  # bisection steps for σ′
    magnitude_eps: float = 1e-3  # ε of the magnitude-aware σ′ and α′
    alpha_steps: int = 10  # ascent steps per worst-case evaluation
    alpha_depth: int = 12  # bisection steps for α′
    loss_threshold: float = 0.1  # steps_to_loss: the first evaluated step with loss ≤ this
    lanczos_max_iter: int = 20  # λ_max when not precomputed
    trace_num_matvecs: int = 30  # Hutch++ products for Tr H when not precomputed
    id_max_examples: int | None = 1000  # training examples for the last-layer ID
    jacobian_max_points: int | None = 256  # test points for the input-Jacobian norm
    seed: int = 0

    def __post_init__(self) -> None:
        if self.sigma_loss not in ("error", "loss"):
            raise ValueError(f"sigma_loss must be 'error' or 'loss', got {self.sigma_loss!r}")
        if not 0 <= self.margin_quantile <= 1:
            raise ValueError(f"margin_quantile must be in [0, 1], got {self.margin_quantile}")


@dataclass(frozen=True)
class MeasureInputs:
    """One trained model and what its measures read. Optional fields may be None; a measure
    that needs one that is missing is :class:`Unavailable`.

    ``history``: columns of the training history, at least ``step`` and ``train_loss`` (as
    :class:`genlab.train.loop.EvalRow` names them). ``precomputed``: values other analyses
    already produced, read instead of recomputing: ``lambda_max``, ``trace``,
    ``last_layer_id``. ``loss_fn``: the mean training loss (output, target) ↦ scalar.
    ``num_classes`` is carried for the caller's records; the measures read C from the model's
    output. Every measure is evaluated on the training set, except ``jacobian_norm`` (the test
    inputs).
    """

    model: nn.Module
    X_train: Tensor
    y_train: Tensor
    init_model: nn.Module | None = None
    X_test: Tensor | None = None
    y_test: Tensor | None = None
    loss_fn: LossFn | None = None
    num_classes: int | None = None
    history: Mapping[str, Sequence[float]] | None = None
    precomputed: Mapping[str, float] = field(default_factory=dict)
    settings: MeasureSettings = field(default_factory=MeasureSettings)
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def cached(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per inputs; an :class:`Unavailable` is cached and re-raised too."""
        if key not in self._cache:
            try:
                self._cache[key] = compute()
            except Unavailable as reason:
                self._cache[key] = reason
        value = self._cache[key]
        if isinstance(value, Unavailable):
            raise value
        return value


MeasureFn = Callable[[MeasureInputs], float]


@dataclass(frozen=True)
class Measure:
    name: str
    fn: MeasureFn
    sign: int  # +1: a larger value is predicted to go with a larger gap; −1: a smaller one
    description: str  # the formula and where it comes from


@dataclass(frozen=True)
class MeasureValue:
    value: float
    reason: str | None = None  # why the value is NaN, when it is


MEASURES: dict[str, Measure] = {}


def register(name: str, description: str, sign: int = 1) -> Callable[[MeasureFn], MeasureFn]:
    """Add the decorated function to :data:`MEASURES` under ``name``."""

    def decorate(fn: MeasureFn) -> MeasureFn:
        if name in MEASURES:
            raise ValueError(f"measure {name!r} is already registered")
        MEASURES[name] = Measure(name, fn, sign, description)
        return fn

    return decorate


def compute_measure(name: str, inputs: MeasureInputs) -> MeasureValue:
    """One measure's value, or NaN and the reason it is :class:`Unavailable`."""
    if name not in MEASURES:
        raise ValueError(f"unknown measure {name!r}; known: {sorted(MEASURES)}")
    try:
        return MeasureValue(float(MEASURES[name].fn(inputs)))
    except Unavailable as reason:
        return MeasureValue(math.nan, str(reason))


def compute_measures(inputs: MeasureInputs,
                     names: Iterable[str] | None = None) -> dict[str, MeasureValue]:
    """Every measure in ``names`` (all registered ones by default), sharing intermediate work."""
    return {name: compute_measure(name, inputs)
            for name in (MEASURES if names is None else names)}


# ------------------------------------------------------------------------------ shared pieces


def _need(value: Any, what: str) -> Any:
    if value is None:
        raise Unavailable(f"no {what} given")
    return value


def _norms(inputs: MeasureInputs, with_init: bool = False) -> LayerNorms:
    if with_init:
        _need(inputs.init_model, "model at initialisation")
        return inputs.cached("norms-init", lambda: layer_norms(inputs.model, inputs.init_model))
    return inputs.cached("norms", lambda: layer_norms(inputs.model))


def _margin(inputs: MeasureInputs) -> float:
    def compute() -> float:
        if inputs.y_train.is_floating_point():
            raise Unavailable("the output margin needs class labels")
        gamma = margin_quantile(inputs.model, inputs.X_train, inputs.y_train,
                                inputs.settings.margin_quantile)
        if not gamma > 0:
            raise Unavailable(f"the {inputs.settings.margin_quantile:g}-quantile of the training "
                              f"margins is {gamma:.3g} ≤ 0")
        return gamma

    return inputs.cached("margin", compute)


def _sigma(inputs: MeasureInputs, magnitude: bool) -> float:
    s = inputs.settings

    def compute() -> float:
        if s.sigma_loss == "error":
            if inputs.y_train.is_floating_point():
                raise Unavailable("σ′ on the training error needs class labels")
            loss_fn = None
        else:
            loss_fn = _need(inputs.loss_fn, "loss_fn")
        return pac_bayes_sigma(inputs.model, inputs.X_train, inputs.y_train, loss_fn,
                               target=s.flatness_target,
                               magnitude_eps=s.magnitude_eps if magnitude else None,
                               num_samples=s.sigma_samples, depth=s.sigma_depth, seed=s.seed)

    return inputs.cached(f"sigma-{magnitude}", compute)


def _alpha(inputs: MeasureInputs, adaptive: bool) -> float:
    s = inputs.settings
    loss_fn = _need(inputs.loss_fn, "loss_fn")
    return inputs.cached(f"alpha-{adaptive}", lambda: worst_case_alpha(
        inputs.model, loss_fn, inputs.X_train, inputs.y_train, target=s.flatness_target,
        adaptive=adaptive, eta0=s.magnitude_eps, steps=s.alpha_steps, depth=s.alpha_depth,
        seed=s.seed))


def _product(squared: Tensor) -> float:
    return float(torch.exp(squared.log().sum()))


def _sum_form(squared: Tensor, gamma: float = 1.0) -> float:
    """d (Π_i x_i / γ²)^{1/d}: the sum Σ x_i of a network rebalanced to equal layer norms."""
    d = len(squared)
    return d * math.exp((float(squared.log().sum()) - 2 * math.log(gamma)) / d)


def _pac_bayes_bound(squared_norm: float, sigma: float, m: int) -> float:
    if sigma == 0 or math.isinf(sigma):
        raise Unavailable(f"σ′ = {sigma}: no finite bound")
    return squared_norm / (4 * sigma ** 2) + math.log(m / sigma) + 10


def _flatness(radius: float) -> float:
    return math.inf if radius == 0 else 1.0 / radius ** 2


# ------------------------------------------------------------------------------------ measures

# VC dimension and parameter count (Jiang et al. §C.1)


@register("num_params", "ω: the number of trainable parameters (Jiang et al. eq. 20)")
def num_params(inputs: MeasureInputs) -> float:
    return sum(p.numel() for p in inputs.model.parameters() if p.requires_grad)


# Output (§C.2)


@register("inverse_margin", "1/γ², γ the 10th percentile of the training margins (eq. 22)")
def inverse_margin(inputs: MeasureInputs) -> float:
    return 1.0 / _margin(inputs) ** 2


# Spectral norms (§C.3): the "main" terms, without the log factors of the bounds


@register("spec_init", "Π‖W_i‖₂² Σ_j ‖W_j − W_j⁰‖_F²/‖W_j‖₂² / γ² (eq. 29, main term)")
def spec_init(inputs: MeasureInputs) -> float:
    n = _norms(inputs, with_init=True)
    return _product(n.spec) * float((n.dist_fro / n.spec).sum()) / _margin(inputs) ** 2


@register("spec_orig", "Π‖W_i‖₂² Σ_j ‖W_j‖_F²/‖W_j‖₂² / γ² (eq. 30, main term)")
def spec_orig(inputs: MeasureInputs) -> float:
    n = _norms(inputs)
    return _product(n.spec) * float((n.fro / n.spec).sum()) / _margin(inputs) ** 2


@register("prod_of_spec_over_margin", "Π‖W_i‖₂² / γ² (eq. 31)")
def prod_of_spec_over_margin(inputs: MeasureInputs) -> float:
    return _product(_norms(inputs).spec) / _margin(inputs) ** 2


@register("prod_of_spec", "Π‖W_i‖₂² (eq. 32)")
def prod_of_spec(inputs: MeasureInputs) -> float:
    return _product(_norms(inputs).spec)


@register("fro_over_spec", "Σ‖W_i‖_F²/‖W_i‖₂² (eq. 33)")
def fro_over_spec(inputs: MeasureInputs) -> float:
    n = _norms(inputs)
    return float((n.fro / n.spec).sum())


@register("sum_of_spec_over_margin", "d (Π‖W_i‖₂² / γ²)^{1/d} (eq. 34)")
def sum_of_spec_over_margin(inputs: MeasureInputs) -> float:
    return _sum_form(_norms(inputs).spec, _margin(inputs))


@register("sum_of_spec", "d (Π‖W_i‖₂²)^{1/d} (eq. 35)")
def sum_of_spec(inputs: MeasureInputs) -> float:
    return _sum_form(_norms(inputs).spec)


# Frobenius norms (§C.4)


@register("prod_of_fro_over_margin", "Π‖W_i‖_F² / γ² (eq. 36)")
def prod_of_fro_over_margin(inputs: MeasureInputs) -> float:
    return _product(_norms(inputs).fro) / _margin(inputs) ** 2


@register("prod_of_fro", "Π‖W_i‖_F² (eq. 37)")
def prod_of_fro(inputs: MeasureInputs) -> float:
    return _product(_norms(inputs).fro)


@register("sum_of_fro_over_margin", "d (Π‖W_i‖_F² / γ²)^{1/d} (eq. 38)")
def sum_of_fro_over_margin(inputs: MeasureInputs) -> float:
    return _sum_form(_norms(inputs).fro, _margin(inputs))


@register("sum_of_fro", "d (Π‖W_i‖_F²)^{1/d} (eq. 39)")
def sum_of_fro(inputs: MeasureInputs) -> float:
    return _sum_form(_norms(inputs).fro)


@register("frobenius_distance", "Σ‖W_i − W_i⁰‖_F², distance from initialisation (eq. 40)")
def frobenius_distance(inputs: MeasureInputs) -> float:
    return float(_norms(inputs, with_init=True).dist_fro.sum())


@register("spectral_distance", "Σ‖W_i − W_i⁰‖₂² (eq. 41)")
def spectral_distance(inputs: MeasureInputs) -> float:
    return float(_norms(inputs, with_init=True).dist_spec.sum())


@register("param_norm", "Σ‖W_i‖_F² (eq. 42)")
def param_norm(inputs: MeasureInputs) -> float:
    return float(_norms(inputs).fro.sum())


# Path norm (§C.5)


def _path_norm(inputs: MeasureInputs) -> float:
    def compute() -> float:
        try:
            return path_norm(inputs.model, tuple(inputs.X_train.shape[1:]))
        except ValueError as error:
            raise Unavailable(str(error)) from error

    return inputs.cached("path-norm", compute)


@register("path_norm_over_margin", "Σ_paths Π w² / γ² (eq. 43)")
def path_norm_over_margin(inputs: MeasureInputs) -> float:
    return _path_norm(inputs) / _margin(inputs) ** 2


@register("path_norm", "Σ_paths Π w² = Σ f_{w²}(𝟏) for ReLU networks (eq. 44)")
def path_norm_measure(inputs: MeasureInputs) -> float:
    return _path_norm(inputs)


# Heavy-tailed spectra (Martin & Mahoney 2021; not in Jiang et al.'s comparison)


def _power_law_fits(inputs: MeasureInputs) -> list[PowerLawFit]:
    def compute() -> list[PowerLawFit]:
        fits = layer_fits(inputs.model)
        if not fits:
            raise Unavailable(f"no Linear layer has {MIN_EIGENVALUES} eigenvalues above "
                              f"{EIGENVALUE_FLOOR:g} (weightwatcher's power-law fit needs them)")
        return fits

    return inputs.cached("power-law", compute)


@register("alpha_mean", "mean over Linear layers of the power-law exponent α of the ESD's tail "
          "(Martin & Mahoney 2021; weightwatcher's fit; layers with < 20 eigenvalues left out)")
def alpha_mean(inputs: MeasureInputs) -> float:
    return float(np.mean([fit.alpha for fit in _power_law_fits(inputs)]))


@register("alpha_weighted", "mean over Linear layers of α log10 λ_max, weightwatcher's α̂ "
          "(Martin & Mahoney 2021)")
def alpha_weighted(inputs: MeasureInputs) -> float:
    return float(np.mean([fit.alpha_weighted for fit in _power_law_fits(inputs)]))


# Flatness (§C.6-7)


@register("pacbayes_init", "‖w − w⁰‖²/(4σ′²) + log(m/σ′) + 10 (eq. 48)")
def pacbayes_init(inputs: MeasureInputs) -> float:
    distance = parameter_vector(inputs.model) - parameter_vector(
        _need(inputs.init_model, "model at initialisation"))
    return _pac_bayes_bound(float(distance.square().sum()), _sigma(inputs, False),
                            len(inputs.X_train))


@register("pacbayes_orig", "‖w‖²/(4σ′²) + log(m/σ′) + 10 (eq. 49)")
def pacbayes_orig(inputs: MeasureInputs) -> float:
    return _pac_bayes_bound(float(parameter_vector(inputs.model).square().sum()),
                            _sigma(inputs, False), len(inputs.X_train))


@register("pacbayes_flatness", "1/σ′², σ′ the largest σ with E L(θ + σz) ≤ L(θ) + 0.1 (eq. 53)")
def pacbayes_flatness(inputs: MeasureInputs) -> float:
    return _flatness(_sigma(inputs, False))


@register("pacbayes_mag_flatness", "1/σ′², u_i ~ N(0, σ′²θ_i² + ε²) magnitude-aware (eq. 61)")
def pacbayes_mag_flatness(inputs: MeasureInputs) -> float:
    return _flatness(_sigma(inputs, True))


@register("sharpness_flatness", "1/α′², α′ the largest ℓ₂ radius with worst-case loss increase "
          "≤ 0.1 (§C.7; an ℓ₂ ball, not Jiang et al.'s box)")
def sharpness_flatness(inputs: MeasureInputs) -> float:
    return _flatness(_alpha(inputs, False))


@register("sharpness_mag_flatness", "1/α′² in the metric T = diag(|θ| + ε), magnitude-aware "
          "(§C.7; an ℓ₂ ball, not a box)")
def sharpness_mag_flatness(inputs: MeasureInputs) -> float:
    return _flatness(_alpha(inputs, True))


# Optimization (§C.8)


@register("steps_to_loss", "the first evaluated step whose training loss ≤ 0.1 (§C.8)")
def steps_to_loss(inputs: MeasureInputs) -> float:
    history = _need(inputs.history, "training history")
    if "step" not in history or "train_loss" not in history:
        raise Unavailable("the history lacks 'step' or 'train_loss'")
    threshold = inputs.settings.loss_threshold
    for step, loss in zip(history["step"], history["train_loss"], strict=True):
        if loss <= threshold:
            return float(step)
    raise Unavailable(f"the training loss never reached {threshold:g}")


# Curvature (genlab.analyses.curvature.hessian), representations, rotation, sensitivity


@register("lambda_max", "λ_max of the training-loss Hessian (Keskar et al. 2017; Lanczos)")
def lambda_max(inputs: MeasureInputs) -> float:
    if "lambda_max" in inputs.precomputed:
        return inputs.precomputed["lambda_max"]
    loss_fn = _need(inputs.loss_fn, "loss_fn or precomputed lambda_max")
    return hessian_top_eigenvalues(inputs.model, loss_fn, inputs.X_train, inputs.y_train,
                                   max_iter=inputs.settings.lanczos_max_iter,
                                   seed=inputs.settings.seed).eigenvalues[0]


@register("hessian_trace", "Tr H of the training-loss Hessian (Hutch++; Wu & Su 2023)")
def hessian_trace_measure(inputs: MeasureInputs) -> float:
    if "trace" in inputs.precomputed:
        return inputs.precomputed["trace"]
    loss_fn = _need(inputs.loss_fn, "loss_fn or precomputed trace")
    return hessian_trace(inputs.model, loss_fn, inputs.X_train, inputs.y_train,
                         num_matvecs=inputs.settings.trace_num_matvecs,
                         seed=inputs.settings.seed).estimate


def _representations(inputs: MeasureInputs, X: Tensor) -> list[tuple[str, Tensor]]:
    """The input, every hidden layer and the output of an MLP, in eval mode."""
    try:
        layers = layer_representations(inputs.model, X)
    except ValueError as error:
        raise Unavailable(str(error)) from error
    if len(layers) < 3:
        raise Unavailable("the model has no hidden layer")
    return layers


@register("last_layer_id", "TwoNN intrinsic dimension of the last hidden layer on training "
          "inputs (Ansuini et al. 2019: lower goes with better test accuracy)")
def last_layer_id(inputs: MeasureInputs) -> float:
    if "last_layer_id" in inputs.precomputed:
        return inputs.precomputed["last_layer_id"]
    X, _ = subsample(inputs.X_train, inputs.y_train, inputs.settings.id_max_examples,
                     inputs.settings.seed)
    features = _representations(inputs, X)[-2][1]
    return float(TwoNN(duplicates="drop").fit(features).dimension_)


@register("layer_rotation", "mean over layers of 1 − cos(w_l, w_l⁰) (Carbonnelle & De "
          "Vleeschouwer 2019: larger goes with better generalization)", sign=-1)
def layer_rotation(inputs: MeasureInputs) -> float:
    init = _need(inputs.init_model, "model at initialisation")
    return float(layer_rotations(inputs.model, init).mean())


@register("jacobian_norm", "mean over test points of ‖∂f(x)/∂x‖_F of the logits (Novak et al. "
          "2018)")
def jacobian_norm(inputs: MeasureInputs) -> float:
    X = _need(inputs.X_test, "test set")
    X = X[: inputs.settings.jacobian_max_points]
    with curvature_model(inputs.model, torch.float64) as net:
        params = {name: p.detach() for name, p in net.named_parameters()}

        def f(x: Tensor) -> Tensor:
            return functional_call(net, params, (x[None],))[0]

        jacobians = vmap(jacrev(f))(X.to(torch.float64))  # (n, C, d…)
    return float(jacobians.reshape(len(X), -1).norm(dim=1).mean())


# Neural collapse (Papyan et al. 2020) of the last hidden layer on the training set


def _collapse(inputs: MeasureInputs) -> NeuralCollapse:
    def compute() -> NeuralCollapse:
        if inputs.y_train.is_floating_point():
            raise Unavailable("neural collapse needs class labels")
        chain = linear_chain(inputs.model)
        if chain is None:
            raise Unavailable("neural collapse is implemented for sequential fully connected "
                              "models")
        layers = _representations(inputs, inputs.X_train)
        head = chain[-1]
        counts = torch.bincount(inputs.y_train, minlength=head.out_features)
        if bool((counts == 0).any()) or len(counts) > head.out_features:
            raise Unavailable(f"neural collapse needs examples of every one of the "
                              f"{head.out_features} classes, got counts {counts.tolist()}")
        return neural_collapse(layers[-2][1], inputs.y_train, head.weight, head.bias,
                               predictions=layers[-1][1].argmax(dim=1))

    return inputs.cached("collapse", compute)


@register("nc1", "NC1 = Tr(Σ_W Σ_B†)/C of the last hidden layer (Papyan et al. 2020)")
def nc1(inputs: MeasureInputs) -> float:
    return _collapse(inputs).nc1


@register("nc2_equinorm", "NC2 std/mean of the centred class-mean norms (Papyan et al. 2020)")
def nc2_equinorm(inputs: MeasureInputs) -> float:
    return _collapse(inputs).nc2_equinorm


@register("nc2_max_angle", "NC2 mean |cos(μ_c − μ_G, μ_c′ − μ_G) + 1/(C − 1)| (Papyan et al.)")
def nc2_max_angle(inputs: MeasureInputs) -> float:
    return _collapse(inputs).nc2_max_angle


@register("nc3", "NC3 = ‖W/‖W‖_F − M/‖M‖_F‖_F², self-duality (Papyan et al. 2020)")
def nc3(inputs: MeasureInputs) -> float:
    return _collapse(inputs).nc3


@register("nc4", "NC4: nearest-class-centre disagreement with the network (Papyan et al. 2020)")
def nc4(inputs: MeasureInputs) -> float:
    return _collapse(inputs).nc4


__all__ = ["MEASURES", "Measure", "MeasureFn", "MeasureInputs", "MeasureSettings", "MeasureValue",
           "Unavailable", "compute_measure", "compute_measures", "register"]
