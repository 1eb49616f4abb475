"""Curvature of a trained model's training loss: its Hessian and Gauss-Newton matrix, and how
sharp the loss is around the trained parameters.

Import from the submodules (this package imports nothing, so that using one analysis does not
import them all):

- :mod:`~genlab.analyses.curvature.hessian`: top eigenvalues, trace and spectral density of the
  Hessian or GGN through curvlinops' operators; the stability threshold of an optimizer.
- :mod:`~genlab.analyses.curvature.analysis`: the per-run sharpness analysis the pipeline's
  ``analyze sharpness`` stage runs (:func:`sharpness_record`).
- :mod:`~genlab.analyses.curvature.lanczos`: Lanczos with full reorthogonalisation: Ritz pairs
  and Gauss quadrature.
- :mod:`~genlab.analyses.curvature.trace`: Hutchinson and Hutch++ trace estimators with standard
  errors.
- :mod:`~genlab.analyses.curvature.worst_case`: worst-case (SAM) and adaptive sharpness.
- :mod:`~genlab.analyses.curvature.nonuniformity`: the nonuniformity of per-example curvature
  (Wu, Ma & E 2018).
- :mod:`~genlab.analyses.curvature.ggn`: the generalised Gauss-Newton matrix from per-example
  Jacobians.
"""
