"""Influence of training examples on a trained model's test losses.

Import from the submodules (this package imports nothing, so that using one method does not
import them all, nor kronfluence):

- :mod:`~genlab.analyses.influence.exact`: influence functions with the exact (damped) Hessian or
  GGN, solved densely, by CG or by LiSSA; per-example gradients, TracIn-style gradient products,
  random baselines, and the sign convention every score here follows.
- :mod:`~genlab.analyses.influence.kfac`: K-FAC and EK-FAC influence through kronfluence.
- :mod:`~genlab.analyses.influence.ground_truth`: leave-one-out retraining and the linear
  datamodeling score, against which the scores are checked.
"""
