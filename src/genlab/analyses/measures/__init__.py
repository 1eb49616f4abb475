"""Generalization measures of trained models and how well they rank models by their gap.

After Jiang, Neyshabur, Mobahi, Krishnan & Bengio, "Fantastic generalization measures and where
to find them" (ICLR 2020), plus measures from later analyses (curvature, intrinsic dimension,
layer rotation, input sensitivity, neural collapse):

- :mod:`~genlab.analyses.measures.registry`: :data:`MEASURES`, one small registered function per
  measure over a :class:`MeasureInputs`; :func:`compute_measures` (NaN and a reason where the
  inputs do not define a measure).
- :mod:`~genlab.analyses.measures.norms`: layer norms, output margins, path norm, layer rotation.
- :mod:`~genlab.analyses.measures.flatness`: PAC-Bayes σ′ and worst-case α′ by bisection.
- :mod:`~genlab.analyses.measures.collapse`: neural collapse NC1-NC4 (Papyan et al. 2020).
- :mod:`~genlab.analyses.measures.ranking`: Kendall τ, granulated Kendall Ψ, conditional mutual
  information.
"""

from genlab.analyses.measures.collapse import NeuralCollapse, neural_collapse
from genlab.analyses.measures.flatness import largest_below, pac_bayes_sigma, worst_case_alpha
from genlab.analyses.measures.norms import (
    LayerNorms,
    layer_norms,
    layer_rotations,
    layer_weights,
    margin_quantile,
    margins,
    path_norm,
)
from genlab.analyses.measures.ranking import (
    ConditionalMI,
    GranulatedKendall,
    conditional_mutual_information,
    granulated_kendall,
    kendall_tau,
)
from genlab.analyses.measures.registry import (
    MEASURES,
    Measure,
    MeasureInputs,
    MeasureSettings,
    MeasureValue,
    Unavailable,
    compute_measure,
    compute_measures,
    register,
)

__all__ = ["MEASURES", "ConditionalMI", "GranulatedKendall", "LayerNorms", "Measure",
           "MeasureInputs", "MeasureSettings", "MeasureValue", "NeuralCollapse", "Unavailable",
           "compute_measure", "compute_measures", "conditional_mutual_information",
           "granulated_kendall", "kendall_tau", "largest_below", "layer_norms",
           "layer_rotations", "layer_weights", "margin_quantile", "margins", "neural_collapse",
           "pac_bayes_sigma", "path_norm", "register", "worst_case_alpha"]
