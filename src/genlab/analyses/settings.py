"""Settings of the post-hoc analyses, one block per analysis (the registry,
:mod:`genlab.analyses.registry`, assembles them into a study's ``analyses`` block).

Kept apart from the analyses themselves so that validating params.yaml never imports torch
(Snakemake validates at every parse; see genlab.config).
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator

from genlab.settings import FrozenModel, Seed

Curvature = Literal["hessian", "ggn"]
TraceMethod = Literal["hutchinson", "hutchpp"]
Start = Literal["sam", "random"]


class WorstCaseSettings(FrozenModel):
    """The worst-case (SAM) sharpness of one trained model, on its training loss."""

    rho: float = Field(0.05, gt=0, le=1e6, description="Radius ρ of the ball ‖T⁻¹ε‖₂ ≤ ρ.")
    adaptive: bool = Field(False, description="T = diag(|θ| + eta0) (adaptive, ASAM) rather "
                           "than the identity.")
    eta0: float = Field(0.01, ge=0, le=1e6, description="η₀ of the adaptive scaling (ASAM's "
                        "0.01); 0 makes it exactly invariant under neuron rescalings.")
    normalize_biases: bool = Field(
        True, description="Adaptive: scale every trainable parameter; false = Kwon et al.'s code, "
        "which scales only parameters named '*weight*' (T = 1 on biases).")
    steps: int = Field(20, ge=0, le=100_000, description="Projected gradient ascent steps after "
                       "the start (one forward and backward pass each); 0 = the start alone.")
    step_size: float | None = Field(
        None, gt=0, le=1e6, description="Length α of the first ascent step in the scaled "
        "metric, doubled after each accepted step and halved after each refused one; null = 2ρ, "
        "the diameter of the ball.")
    start: Start = Field("sam", description="sam = the first-order SAM point; random = a random "
                         "point of the sphere (also used where the gradient is 0).")
    seed: Seed = Field(0, description="Seed of the random start and subsample.")
    max_examples: int | None = Field(
        None, ge=1, description="Evaluate the loss on a random subsample of this many training "
        "examples; null = all of them.")


class NonuniformitySettings(FrozenModel):
    """The sharpness and non-uniformity of one trained model, on its training loss."""

    curvature: Curvature = Field(
        "hessian", description="Per-example hessian, or ggn = Jᵢᵀ(∇²ℓ)Jᵢ (equal at an "
        "interpolating minimum of the square loss).")
    max_iter: int = Field(
        30, ge=1, le=100_000, description="Cap on Lanczos steps for each of a and s²; a step "
        "of s² costs 3n per-example products, one of a costs n.")
    tol: float = Field(
        1e-6, ge=0, lt=1, description="Stop Lanczos once the top Ritz residual ≤ tol·|θ|; 0 "
        "always takes max_iter steps.")
    seed: Seed = Field(0, description="Seed of the start vectors and subsample.")
    max_examples: int | None = Field(
        None, ge=1, description="Use a random subsample of this many training examples; null = "
        "all of them. Σ is a variance over examples: a subsample estimates it, with noise.")


class SharpnessSettings(FrozenModel):
    """The curvature analyses of one trained model, on its training loss."""

    curvature: Curvature = Field(
        "hessian", description="hessian = ∇²L; ggn = the Gauss-Newton matrix (PSD).")
    k: int = Field(1, ge=1, le=1000, description="How many top eigenvalues to compute.")
    max_iter: int = Field(
        20, ge=1, le=100_000, description="Cap on Lanczos steps (curvature-vector products) for "
        "the top eigenvalues: uncapped ARPACK took 100-300 s per call on 2 cores.")
    tol: float = Field(
        1e-6, ge=0, lt=1, description="Stop Lanczos early once every top-k Ritz residual "
        "‖Hv − λv‖ ≤ tol·max|λ|; 0 always takes max_iter steps.")
    trace_method: TraceMethod = "hutchpp"
    trace_num_matvecs: int = Field(
        99, ge=2, le=1_000_000, description="Curvature-vector products for the trace (a "
        "multiple of 3, at least 6, for hutchpp).")
    density_num_repeats: int = Field(
        5, ge=1, le=10_000, description="Random probes averaged by stochastic Lanczos quadrature.")
    density_num_steps: int = Field(
        30, ge=1, le=10_000, description="Lanczos steps (quadrature nodes) per probe.")
    density_grid_size: int = Field(512, ge=2, le=1_000_000,
                                   description="Points of the density's eigenvalue grid.")
    density_kernel_width: float = Field(
        0.01, gt=0, le=1, description="Std of the Gaussian smoothing each quadrature node, as a "
        "fraction of the spread of the nodes.")
    seed: Seed = Field(0, description="Seed of the probes, start vectors and subsample.")
    max_examples: int | None = Field(
        None, ge=1, description="Evaluate the loss on a random subsample of this many training "
        "examples (the same one for every analysis); null = all of them.")
    dtype: Literal["float64", "float32"] = Field(
        "float64", description="Precision of the curvature products: float64 unless the model is "
        "too big for it to be affordable.")
    worst_case: WorstCaseSettings | None = Field(
        None, description="Also the worst-case (SAM / adaptive) sharpness; null = skip.")
    nonuniformity: NonuniformitySettings | None = Field(
        None, description="Also Wu, Ma & E's non-uniformity s (3n per-example products per "
        "Lanczos step: for small n); null = skip.")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.trace_method == "hutchpp" and (self.trace_num_matvecs % 3
                                               or self.trace_num_matvecs < 6):
            raise ValueError("hutchpp needs trace_num_matvecs a multiple of 3 and at least 6, "
                             f"got {self.trace_num_matvecs}")
        if self.k > self.max_iter:
            raise ValueError(f"k={self.k} eigenvalues need max_iter ≥ k, got {self.max_iter}")
        return self


class RepresentationSettings(FrozenModel):
    """The intrinsic dimension of each layer's representations of the training inputs, for the
    trained model and the same architecture at its initialisation (Ansuini et al. 2019)."""

    estimator: Literal["twonn", "mle"] = Field(
        "twonn", description="twonn (Facco et al. 2017, as Ansuini et al.) or mle (MacKay-"
        "Ghahramani average with k neighbours).")
    discard_fraction: float = Field(0.1, ge=0, lt=1, description="TwoNN: the largest ratios "
                                    "left out of the fit.")
    k: int = Field(20, ge=3, le=10_000, description="MLE: neighbours per point.")
    max_examples: int | None = Field(
        1000, ge=10, description="Training examples whose representations are measured (a "
        "seeded subsample); null = all.")
    label_sharpness_samples: int = Field(
        1000, ge=2, le=1_000_000, description="Points M over whose pairs the label sharpness "
        "K_F of the training inputs and labels is taken (classification only).")
    seed: Seed = Field(0, description="Seed of the subsamples.")
