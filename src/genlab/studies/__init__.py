"""The study registry. A study is one scientific question: data, model, recipe, grid, claims.

Adding a study = one module here (its settings model, run naming, training, summary and claims),
one line in :data:`STUDIES`, one block in ``params.yaml`` and one stage block in ``dvc.yaml``.
"""

from __future__ import annotations

from genlab.studies import (
    benign_oscillation,
    double_descent,
    eos_gd,
    influence,
    intrinsic_dim,
    measures_grid,
    mislabel_detection,
    neural_collapse,
    random_labels,
    sgd_stability,
)
from genlab.studies.base import ClaimResult, StudySpec

STUDIES: dict[str, StudySpec] = {
    spec.name: spec
    for spec in (random_labels.SPEC, benign_oscillation.SPEC, double_descent.SPEC, eos_gd.SPEC,
                 sgd_stability.SPEC, intrinsic_dim.SPEC, influence.SPEC,
                 mislabel_detection.SPEC, measures_grid.SPEC, neural_collapse.SPEC)
}

__all__ = ["STUDIES", "ClaimResult", "StudySpec"]
