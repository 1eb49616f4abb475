"""Settings of the data-attribution methods (:mod:`genlab.analyses.influence`), shared by the
influence and mislabel-detection studies.

A settings module: pydantic only, no torch, numpy or genlab code, so that the studies'
``settings.py`` can import it.
"""

from __future__ import annotations

from pydantic import Field

from genlab.settings import FrozenModel, Seed


class MethodSettings(FrozenModel):
    """How each attribution method is computed (the damping is the model's λ)."""

    chunk_size: int = Field(256, ge=1, le=1_000_000, description="Examples per chunk of "
                            "per-example gradients and per curvature product.")
    cg_tol: float = Field(1e-10, gt=0, le=1, description="CG stops at relative residual ≤ this.")
    lissa_batch_size: int = Field(64, ge=1, le=1_000_000, description="LiSSA's minibatch.")
    lissa_depth: int | None = Field(None, ge=1, le=100_000, description="LiSSA's recursion "
                                    "depth; null: ⌈(s/λ) ln 10³⌉ (genlab.analyses.influence).")
    lissa_repeats: int = Field(1, ge=1, le=1000, description="Independent LiSSA runs averaged.")
    ekfac_fisher_samples: int = Field(1, ge=1, le=1000, description="Passes of sampled targets "
                                      "for EK-FAC's Fisher estimate.")
    trak_projection_dim: int = Field(256, ge=1, le=1_000_000, description="k: TRAK's random "
                                     "projection of each margin gradient (used by the studies "
                                     "that run TRAK).")
    seed: Seed = Field(0, description="Seed of LiSSA's minibatches, EK-FAC's sampled targets, "
                       "TRAK's projection and (with the run's name) the random baseline.")


class SelfInfluenceSettings(FrozenModel):
    """How the self-influence rankings of the mislabel-detection studies are computed."""

    chunk_size: int = Field(256, ge=1, le=1_000_000, description="Examples per chunk of "
                            "per-example gradients and solves.")
    ekfac_fisher_samples: int = Field(1, ge=1, le=1000, description="Passes of sampled targets "
                                      "for EK-FAC's Fisher estimate.")
    seed: Seed = Field(0, description="Seed of EK-FAC's sampled targets and (with the run's "
                       "name) of the random ranking.")


__all__ = ["MethodSettings", "SelfInfluenceSettings"]
