"""What the influence and mislabel_detection studies share beyond the training engine
(:mod:`genlab.train.binary`): the training objective of their binary classifiers. A helper
module, not a study (a study is a package with a ``settings.py``)."""

from __future__ import annotations

from typing import Any

from genlab.analyses.influence.exact import loss_function
from genlab.data.dataset import Dataset, corrupt_labels
from genlab.studies.base import TrainingObjective
from genlab.train.binary import Problem, model_settings
from genlab.train.binary_settings import LOSS, BinaryMLPSettings, LogisticSettings, ModelKind


def binary_objective(dataset: Dataset, flip_fraction: float, kind: ModelKind,
                     logistic: LogisticSettings, mlp: BinaryMLPSettings,
                     device: Any) -> TrainingObjective:
    """The data loss a binary run minimised: the mean binary cross-entropy of its logit on the
    labels it was fitted to (``flip_fraction`` of them flipped, as its training drew them), in
    float64 as it was trained. The fit minimised that plus (λ/2)‖θ‖²: the penalty is left out,
    λ recorded as ``weight_decay`` (so that at a converged fit the data loss's gradient is
    −λθ). The fit is full batch (L-BFGS, then Newton steps) and has no step size or momentum
    of its own: ``lr`` is 1, Newton's unit step, so the threshold (2 + 2β)/η = 2 that the
    sharpness analysis prints beside the curvature does not describe this optimizer."""
    labels, _ = corrupt_labels(dataset.train, flip_fraction)
    problem = Problem.from_dataset(dataset, labels, device)
    _, _, l2 = model_settings(kind, logistic, mlp)
    return TrainingObjective(X=problem.X, y=problem.y, loss_fn=loss_function(LOSS), lr=1.0,
                             momentum=0.0, batch_size=None, weight_decay=l2)
