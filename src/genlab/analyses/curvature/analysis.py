"""The sharpness analysis of one trained model, as the pipeline's ``analyze sharpness`` stage
runs it: every curvature measure the settings ask for, beside the stability threshold of the
optimizer that trained the model (:func:`genlab.analyses.curvature.hessian.stability_threshold`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from genlab.analyses.curvature.hessian import (
    DensityResult,
    EigenResult,
    LossFn,
    TraceResult,
    hessian_top_eigenvalues,
    hessian_trace,
    spectral_density,
    stability_threshold,
    subsample,
)
from genlab.analyses.curvature.nonuniformity import (
    NonuniformityResult,
    nonuniformity,
    nonuniformity_vs_lr,
)
from genlab.analyses.curvature.worst_case import WorstCaseResult, worst_case_sharpness
from genlab.analyses.settings import SharpnessSettings


@dataclass(frozen=True)
class SharpnessAnalysis:
    """Every curvature analysis of one trained model, as :func:`analyze_sharpness` runs them."""

    top: EigenResult
    trace: TraceResult
    density: DensityResult
    n_examples: int  # training examples the loss was evaluated on (after max_examples)
    n_parameters: int
    threshold: float  # stability_threshold(lr, momentum) of the run that produced the model
    worst_case: WorstCaseResult | None = None
    nonuniformity: NonuniformityResult | None = None
    nonuniformity_ratio: float | None = None  # nonuniformity_vs_lr: s·η/√B, with (n−B)/(n−1)

    @property
    def lambda_over_threshold(self) -> float:
        """λ_max / ((2 + 2β)/η): 1 is the edge of stability of the run's own optimizer."""
        return self.top.eigenvalues[0] / self.threshold

    @property
    def trace_over_threshold(self) -> float:
        """Tr / ((2 + 2β)/η): at most 1 at a minimum stable for SGD with batch size 1 and no
        momentum (Wu & Su 2023); for other batch sizes only a reference point."""
        return self.trace.estimate / self.threshold


def analyze_sharpness(model: nn.Module, loss_fn: LossFn, X_all: Tensor, y_all: Tensor,
                      settings: SharpnessSettings, lr: float, momentum: float = 0.0,
                      batch_size: int | None = None) -> SharpnessAnalysis:
    """Top-k eigenvalues, trace and spectral density of one model's training-loss curvature,
    with the settings params.yaml gives, on the subsample ``settings.max_examples`` picks, next
    to the stability threshold of the optimizer (``lr``, ``momentum``) that trained it; and,
    where the settings ask, its worst-case sharpness and the non-uniformity against the run's
    batch size (``batch_size``; None = full batch, where SGD's noise and the bound vanish)."""
    dtype = {"float64": torch.float64, "float32": torch.float32}[settings.dtype]
    X, y = subsample(X_all, y_all, settings.max_examples, settings.seed)
    common = {"curvature": settings.curvature, "seed": settings.seed, "dtype": dtype}
    top = hessian_top_eigenvalues(model, loss_fn, X, y, k=settings.k, max_iter=settings.max_iter,
                                  tol=settings.tol, **common)
    trace = hessian_trace(model, loss_fn, X, y, num_matvecs=settings.trace_num_matvecs,
                          method=settings.trace_method, **common)
    density = spectral_density(model, loss_fn, X, y, num_repeats=settings.density_num_repeats,
                               num_steps=settings.density_num_steps,
                               grid=settings.density_grid_size,
                               kernel_width=settings.density_kernel_width, **common)
    worst_case = None
    if (worst := settings.worst_case) is not None:
        Xw, yw = subsample(X_all, y_all, worst.max_examples, worst.seed)
        worst_case = worst_case_sharpness(
            model, loss_fn, Xw, yw, worst.rho, adaptive=worst.adaptive, eta0=worst.eta0,
            normalize_biases=worst.normalize_biases, steps=worst.steps,
            step_size=worst.step_size, start=worst.start, seed=worst.seed, dtype=dtype)
    spread = ratio = None
    if (nu := settings.nonuniformity) is not None:
        Xn, yn = subsample(X_all, y_all, nu.max_examples, nu.seed)
        spread = nonuniformity(model, loss_fn, Xn, yn, nu.curvature, nu.max_iter, tol=nu.tol,
                               seed=nu.seed, dtype=dtype)
        ratio = nonuniformity_vs_lr(spread.nonuniformity, lr, batch_size or len(X_all),
                                    len(X_all))
    return SharpnessAnalysis(top=top, trace=trace, density=density, n_examples=len(X),
                             n_parameters=sum(p.numel() for p in model.parameters()
                                              if p.requires_grad),
                             threshold=stability_threshold(lr, momentum), worst_case=worst_case,
                             nonuniformity=spread, nonuniformity_ratio=ratio)


def sharpness_record(model: nn.Module, objective, settings: SharpnessSettings,
                     untrained) -> tuple[dict, dict]:
    """The ``sharpness`` entry of the analysis registry: :func:`analyze_sharpness` of one run on
    its training objective, as its JSON record and its ``density`` table."""
    import pyarrow as pa

    result = analyze_sharpness(model, objective.loss_fn, objective.X, objective.y, settings,
                               objective.lr, objective.momentum, objective.batch_size)
    top, trace, density = result.top, result.trace, result.density
    record = {
        "status": "done", "curvature": settings.curvature,
        "n_examples": result.n_examples, "n_parameters": result.n_parameters,
        "lr": objective.lr, "momentum": objective.momentum,
        "batch_size": objective.batch_size, "weight_decay": objective.weight_decay,
        "threshold": result.threshold,
        "top_eigenvalues": list(top.eigenvalues),
        "top_residual_norms": list(top.residual_norms), "lanczos_iterations": top.iterations,
        "lambda_max": top.eigenvalues[0], "lambda_over_threshold": result.lambda_over_threshold,
        "trace": trace.estimate, "trace_stderr": trace.standard_error,
        "trace_method": trace.method, "trace_num_matvecs": trace.num_matvecs,
        "trace_over_threshold": result.trace_over_threshold,
        "density_sigma": density.sigma,
    }
    if (worst := result.worst_case) is not None:
        record |= {"worst_case_sharpness": worst.sharpness, "sam_sharpness": worst.sam_sharpness,
                   "worst_case_rho": worst.rho, "worst_case_adaptive": worst.adaptive,
                   "worst_case_evaluations": worst.num_evaluations}
    if (spread := result.nonuniformity) is not None:
        record |= {"nonuniformity": spread.nonuniformity,
                   "nonuniformity_sharpness": spread.sharpness,
                   "nonuniformity_ratio": result.nonuniformity_ratio,
                   "nonuniformity_residual": spread.variance_residual}
    table = pa.table({"eigenvalue": density.grid.cpu().double().numpy(),
                      "density": density.density.cpu().double().numpy()})
    return record, {"density": table}
