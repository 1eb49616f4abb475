"""Generalization measures of trained models and how well they rank models by their gap.

After Jiang, Neyshabur, Mobahi, Krishnan & Bengio, "Fantastic generalization measures and where
to find them" (ICLR 2020), plus measures from later analyses (curvature, intrinsic dimension,
layer rotation, input sensitivity, neural collapse):

Import from the submodules (this package imports nothing, so that using one measure does not
import them all):

- :mod:`~genlab.analyses.measures.registry`: :data:`MEASURES`, one small registered function per
  measure over a :class:`MeasureInputs`; :func:`compute_measures` (NaN and a reason where the
  inputs do not define a measure).
- :mod:`~genlab.analyses.measures.norms`: layer norms, output margins, path norm, layer rotation.
- :mod:`~genlab.analyses.measures.flatness`: PAC-Bayes σ′ and worst-case α′ by bisection.
- :mod:`~genlab.analyses.measures.collapse`: neural collapse NC1-NC4 (Papyan et al. 2020).
- :mod:`~genlab.analyses.measures.ranking`: Kendall τ, granulated Kendall Ψ, conditional mutual
  information.
"""
