"""Deep double descent in width on real data (Nakkiran, Kaplun, Bansal, Yang, Barak & Sutskever,
ICLR 2020), on MNIST-1D with the protocol of the dataset's own notebook (Greydanus 2020,
``notebooks/deep-double-descent.ipynb``; Prince, Understanding Deep Learning, section 8.4).

Nakkiran et al. found that, with label noise, test error as a function of model size falls,
then rises to a peak where the model first becomes able to fit its training set (the
interpolation threshold), then falls again as the model grows further.

Setup (the notebook's): MNIST-1D with 16,000 series, 25% for training (4,000) and 75% for
testing (12,000: a smooth test curve); each training label redrawn uniformly over the ten
classes with probability 0.15 (the draw's own corruption draws, so wrong for ~13.5%); a ReLU
MLP with two hidden layers of the run's width (the notebook sweeps 2-300) trained by SGD (lr
0.01, momentum 0.9, batches of 100) for a fixed number of steps (the notebook: 500 epochs,
20,000 steps; the cpu preset halves it for a CPU budget, the paper preset keeps it), no
stop; the paper preset adds the notebook's CNN (MNIST-1D's ConvBase, the width as channels).
The default preset shrinks the series, the steps and the evaluation interval eightfold (500
training series, the same 250 epochs) for compute, to run 10 seeds: a declared condition, in its
description in params.yaml.

Claims, per architecture, over seeds (each its own series, label noise, initialisation and
minibatch order). The interpolation threshold of a seed is the narrowest width whose final
training error on its noisy labels is at most ``fit_error`` (chosen by the training error
alone, so the test error at it is not selected):

1. ``threshold_peak``: the test error at the threshold exceeds the best narrower network's.
   The best narrower width is picked on one half of the test set and its error measured on the
   other (both ways, averaged), so the minimum's selection luck does not inflate the rise.
2. ``second_descent``: the test error at the threshold exceeds the widest network's.

A seed with a diverged run, or with no width that fits, leaves its statistics undefined.
"""
