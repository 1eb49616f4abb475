"""The mislabel_mnist1d study's report figure: the mislabel-detection study's detection curves
(the same summary table), here on MNIST-1D."""

from genlab.studies.mislabel_detection.figures import figures

__all__ = ["figures"]
