"""Intrinsic dimension: of a point cloud, of a network's layer representations, and of a
training objective's landscape.

Import from the submodules (this package imports nothing, so that using one estimator does not
import them all, nor numba):

- :mod:`~genlab.analyses.dimension.estimators`: TwoNN and MLE estimators of a point cloud's
  intrinsic dimension, and the label sharpness of a labelled one.
- :mod:`~genlab.analyses.dimension.neighbors`: the exact, blocked k-nearest-neighbour search the
  estimators read their distances from.
- :mod:`~genlab.analyses.dimension.neighbor_screen`: its compiled (numba) float32 screen passes
  and exact distances.
- :mod:`~genlab.analyses.dimension.representations`: intrinsic dimension of every layer's
  representations (Ansuini et al. 2019), the ``intrinsic_dim`` analysis
  (:func:`layer_id_record`).
- :mod:`~genlab.analyses.dimension.subspace`: objective-landscape intrinsic dimension by
  training in random subspaces (Li et al. 2018).
"""
