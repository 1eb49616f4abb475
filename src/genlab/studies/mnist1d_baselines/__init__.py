"""MNIST-1D's baselines (Greydanus, "Scaling down deep learning", 2020): the training engine
against a published table, on someone else's data.

The dataset paper's table gives the test accuracy of logistic regression, an MLP and a CNN on
MNIST-1D (32%, 68%, 94%) and on its spatially shuffled variant (32%, 68%, 56%): the CNN's
spatial prior helps on ordered series and hurts once the positions are permuted, while the
models without one do not care. The study trains the three models as the paper's code defines
them (``notebooks/models.py``: LinearBase, MLPBase with 100 hidden units and one residual block,
ConvBase with three stride-2 convolutions of 25 channels) with its recipe (``notebooks/train.py``
and the classification notebook: Adam, step size 0.01, no weight decay, batches of 100, 6,000
steps, the final model's test accuracy), on MNIST-1D built by the package's generator with its
default arguments, one draw per seed (plain and shuffled share a seed's series).

Departures, declared: minibatches are drawn by genlab's seeded sampler (a fresh permutation each
epoch) where the paper's loop walks the training set in one fixed order; each seed has its own
data draw and initialisation where the paper reports one run on one dataset (its pickle).
"""
