"""Label sharpness, intrinsic dimension and adversarial robustness (Konz & Mazurowski, "The
effect of intrinsic dataset properties on generalization", ICLR 2024).

The paper's law: test loss L = O(K_F N^(-1/d_data)), with K_F the label sharpness, the
Lipschitz constant of the labelling estimated as max 1{y_j != y_k} / |x_j - x_k| over sampled
training pairs (:func:`genlab.analyses.dimension.estimators.label_sharpness`); models trained
on data of higher K_F are less robust to adversarial attack (their Fig.: Pearson r = 0.70
between K_F and the loss increase under FGSM, one point per dataset); and the intrinsic
dimension of the learned representation is bounded by the data's, d_repr <= d_data.

Where this differs from the paper (its code: mazurowski-lab/intrinsic-properties): they train
ResNets and VGGs on 224x224 images (N = 500 to 1,750) and attack with one FGSM step at
eps = 2/255, reporting the loss increase; here small MLPs on 32- to 64-dimensional inputs, and
the accuracy under a 20-step PGD attack (the stronger attack of the same norm). Their K_F takes
the max over ~2,000 random pairs; this over every pair of the sampled points, never smaller.

Setup: three kinds of binary dataset, inputs scaled to a root-mean-square entry of 1 so that
K_F, the attack radius and the dimensions compare across them: synthetic d-planes in R^32 whose
labels are the sign of a random sum of plane waves of frequency omega
(:mod:`genlab.data.fourier_labels`; d and omega set separately), and two-class subsets of
MNIST-1D and of scikit-learn's digits. Each seed draws its own data (its own waves, latents and
split) and initialises its own MLP. On the synthetic data an MLP is trained at each training
set size (the first N points) to fit its training set (Adam, up to a step budget); on the real
pairs at their whole training split. Each model is measured: test loss and accuracy, accuracy
under a 20-step L-inf PGD attack (:mod:`genlab.analyses.robustness`), K_F over (up to) 1,000
training points, and TwoNN's intrinsic dimension of the training inputs and of the last hidden
layer's representations of them.

Claims over seeds by the interval rule: Spearman(d, alpha) < 0 over the synthetic datasets
(alpha the fitted exponent of test loss ~ N^-alpha, which the law puts at 1/d); Spearman(K_F,
robust accuracy) < 0 over every dataset; the same within each d (mean over d) < 0; on the real
pairs the largest d_repr - d_data minus the estimator's error (its largest error on the
synthetic data of the seed, whose dimension is known) <= 0. Control: the same bound against the
known d on the synthetic data, which holds for any Lipschitz network.

Conditions, declared (chosen with a one-seed pilot's numbers in view, on seed 0's draws):

1. The pilot (d in {2, 4, 8}, omega in {1, 4}, N = 250 to 2,000) showed that K_F measured on
   1,000 points is set far more by the sampling density, and so by d, than by the labelling's
   frequency (d = 2: 3.5 to 18; d = 4: 1.1 to 2.6; d = 8: 0.4 to 0.8, either omega), while the
   accuracy under attack falls with omega at every d. So the claim across datasets compares
   datasets whose K_F differ mostly through d, and the within-d claim was added to separate
   the two; both are reported.
2. The attack radius 0.05 (inputs at RMS 1) is the middle of the pilot's 0.02, 0.05 and 0.1,
   where the accuracy under attack was neither the clean accuracy nor chance; the others are
   measured and reported.
"""
