"""genlab: a reproducible laboratory for the science of generalization in deep learning."""

__version__ = "0.1.0"
