"""Layer-wise intrinsic dimension of a network's representations on real data (Ansuini, Laio,
Macke & Zoccolan, NeurIPS 2019), on MNIST-1D (Greydanus 2020).

Ansuini et al. estimated, with TwoNN, the intrinsic dimension (ID) of every layer's
representation in trained image classifiers and found (i) a "hunchback" profile: the ID rises
over the first layers, well above the input's, then falls towards the output; and (ii) the last
hidden layer's ID is lower in a network trained on the true labels than in the same network
trained to fit random labels, and it tracks test accuracy.

Setup: MNIST-1D from the package's generator (default arguments: 4,000 training and 1,000 test
series of length 40), and scikit-learn's 8x8 digits (80% of the 1,797 images for training) as a
second real dataset, one draw of each per seed (a run's ``task`` names its dataset); two
architectures, a 1-D CNN (three stride-2 Conv1d layers, MNIST-1D's ConvBase widened to 64 channels
so that it can fit random labels) and an MLP (three hidden ReLU layers); each trained with Adam
until 100% training accuracy within a step budget, on the true labels (``clean``) or on labels all
redrawn uniformly (``random``: the draw's own corruption labels, ``corrupt_labels(p = 1)``). A
seed's clean and random runs share its series and its initialisation. TwoNN (10% of the ratios
discarded, duplicates dropped) of the input, every hidden layer after its nonlinearity (a conv
layer's channels x positions as one vector) and the logits, on the test inputs, at initialisation
and after training (:func:`genlab.analyses.dimension.representations.layer_representations`).
The default preset trains on 1,000 of MNIST-1D's series (the 1,000 test series kept) and checks
the stop every 100 steps, for compute, to run 10 seeds: a declared condition, in its description
in params.yaml.

Claims, per dataset and architecture, over seeds (each its own draw of the data and the random
labels); the cpu preset runs the CNN on MNIST-1D only (a 1-D CNN over an image's flattened
rows would not be the architecture the claim is about):

1. ``hunchback``: in the clean network, the largest hidden-layer ID exceeds both the input's ID
   and the last hidden layer's (statistic: the smaller of the two differences, > 0).
2. ``random_last_higher``: the last hidden layer's ID is higher after fitting random labels than
   after fitting the true ones (statistic: random − clean, paired by seed, > 0).

A run that does not reach 100% training accuracy leaves its seed's statistic undefined for the
claims that use it (Ansuini et al. compare networks that fit their labels).
"""
