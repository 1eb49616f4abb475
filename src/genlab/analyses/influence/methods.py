"""Every attribution method's (n_test, n_train) scores on one trained model, side by side.

The methods (scores in :mod:`genlab.analyses.influence.exact`'s convention: positive =
upweighting training point i raises test loss t; the damping is the model's L2 coefficient λ):

- ``exact``: the damped Gauss-Newton matrix G + λI, dense Cholesky solve;
- ``exact_hessian``: the true Hessian + λI, dense (LU where indefinite);
- ``cg`` and ``lissa``: the GGN system solved by conjugate gradients and by LiSSA;
- ``ekfac``: kronfluence's EK-FAC approximation of the Fisher (= GGN for these losses);
- ``grad_dot``: −∇ℓ_tᵀ∇ℓᵢ, TracIn at the final checkpoint (the curvature replaced by I);
- ``trak``: TRAK on the model alone (:mod:`genlab.analyses.influence.trak`), its margin
  gradients randomly projected to ``trak_projection_dim`` dimensions;
- ``random``: standard normal scores (the chance baseline).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from genlab.analyses.influence.exact import (
    LossKind,
    gradient_dot,
    gradient_products,
    inverse_hvp,
    loss_function,
    per_example_gradients,
    random_scores,
)
from genlab.seeding import derive_seed

METHODS = ("exact", "exact_hessian", "cg", "lissa", "ekfac", "grad_dot", "trak", "random")
SOLVERS = ("exact", "exact_hessian", "cg", "lissa")  # through an inverse curvature product


def attribution_scores(model: nn.Module, loss: LossKind, X: Tensor, y: Tensor, X_test: Tensor,
                       y_test: Tensor, l2: float, s: Any, run: str = "",
                       methods: Sequence[str] = METHODS
                       ) -> tuple[dict[str, Tensor], dict[str, float], dict[str, Any]]:
    """Each of ``methods``' (n_test, n_train) scores (float64, on the CPU), its wall time, and
    the iterative solvers' agreement with the dense inverse-HVP (cosine per test gradient,
    relative residuals; with ``exact`` among the methods). ``s``: the
    :class:`~genlab.analyses.attribution_settings.MethodSettings`. The random baseline is drawn
    per run, from the methods' seed and the run's name (not its seed alone, which two models of
    one seed share)."""
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; known: {', '.join(METHODS)}")
    loss_fn = loss_function(loss)
    scores: dict[str, Tensor] = {}
    seconds: dict[str, float] = {}
    solved: dict[str, Any] = {}
    solvers = {"exact": ("ggn", "dense", {}), "exact_hessian": ("hessian", "dense", {}),
               "cg": ("ggn", "cg", {"tol": s.cg_tol}),
               "lissa": ("ggn", "lissa", {"depth": s.lissa_depth, "repeats": s.lissa_repeats,
                                          "lissa_batch_size": s.lissa_batch_size,
                                          "seed": s.seed})}
    for name in [m for m in methods if m in SOLVERS]:
        curvature, method, options = solvers[name]
        start = time.perf_counter()
        G_test = per_example_gradients(model, loss_fn, X_test, y_test, chunk_size=s.chunk_size)
        result = inverse_hvp(model, loss_fn, X, y, G_test, l2, curvature, method,
                             batch_size=s.chunk_size, **options)
        scores[name] = -gradient_products(model, loss_fn, X, y, result.solution,
                                          chunk_size=s.chunk_size)
        seconds[name] = time.perf_counter() - start
        solved[name] = result
    for name in [m for m in methods if m not in SOLVERS]:
        start = time.perf_counter()
        scores[name] = _other(name, model, loss, loss_fn, X, y, X_test, y_test, l2, s, run)
        seconds[name] = time.perf_counter() - start

    report: dict[str, Any] = {}
    if "exact" in solved:
        dense = solved["exact"].solution
        for name in [m for m in ("cg", "lissa") if m in solved]:
            result = solved[name]
            cosine = ((result.solution * dense).sum(1)
                      / (result.solution.norm(dim=1) * dense.norm(dim=1)))
            report[name] = {
                "min_cosine": float(cosine.min()), "mean_cosine": float(cosine.mean()),
                "max_relative_residual": float(result.relative_residuals.max()),
                "iterations": result.iterations, "scale": result.scale}
    if "exact_hessian" in solved:
        report["exact_hessian"] = {"positive_definite": solved["exact_hessian"].positive_definite}
    return ({k: v.to(torch.float64).cpu() for k, v in scores.items()}, seconds, report)


def _other(name: str, model: nn.Module, loss: LossKind, loss_fn: Any, X: Tensor, y: Tensor,
           X_test: Tensor, y_test: Tensor, l2: float, s: Any, run: str) -> Tensor:
    if name == "ekfac":
        from genlab.analyses.influence.kfac import kronfluence_influence

        return kronfluence_influence(model, loss, X, y, X_test, y_test, "ekfac", l2,
                                     fisher_samples=s.ekfac_fisher_samples, seed=s.seed,
                                     batch_size=s.chunk_size)
    if name == "grad_dot":
        return gradient_dot(model, loss_fn, X, y, X_test, y_test, chunk_size=s.chunk_size)
    if name == "trak":
        from genlab.analyses.influence.trak import trak_scores

        return trak_scores(model, X, y, X_test, y_test, projection_dim=s.trak_projection_dim,
                           seed=s.seed, chunk_size=s.chunk_size)
    return random_scores((len(X_test), len(X)), seed=derive_seed(s.seed, "run", run))


__all__ = ["METHODS", "SOLVERS", "attribution_scores"]
