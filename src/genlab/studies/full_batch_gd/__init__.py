"""Full-batch gradient descent against small-batch SGD (Geiping et al., "Stochastic training is
not necessary for generalization", ICLR 2022) on MNIST-1D.

The counter-test to the SGD-noise story behind ``sgd_stability``, ``benign_oscillation`` and
``eos_gd``: if SGD generalizes better than full-batch GD because of an implicit regulariser
(Smith et al. 2021: (η/4)·mean over minibatches of ‖∇L_B‖²), then full-batch GD with that
regulariser made explicit, plus clipping and a longer schedule, should generalize as well. The
paper shows it for a ResNet-18 on CIFAR-10 (SGD 95.70%; full batch 75.42% with SGD's settings,
87.36% trained longer, 93.75% clipped, 95.54% with the penalty; its Table 1, with augmentation).

Setup: each seed draws its own MNIST-1D set (1,000 training and 1,500 test series in the
cpu preset; the package's 4,000 / 1,000 in the paper preset) and initialises MNIST-1D's CNN
(ConvBase, 5,210 parameters, as in ``mnist1d_baselines``); the runs of one seed share both. The
recipes follow the paper's code (``config/hyp``: ``base_sgd``, ``fb2``, ``fbclip``,
``gradreg``) scaled to the budget: SGD with Nesterov momentum 0.9, weight decay 5e-4, peak step
size 0.1, a linear warm-up over 1/60 of the epochs then a cosine decay, batches of 100;
full-batch GD with the same optimizer for 10 times as many steps as SGD has epochs (their 3,000
against 300), warmed up over 2/15 of them (400/3,000) and decayed on a cosine over 4/3 of them
(their 'cosine-4000'), plain, clipped at gradient norm 0.25 (peak step size 0.4), or clipped
with the penalty (0.8; α = 0.5 on blocks of 100 series, exact double backward:
:mod:`genlab.train.penalised_gd`). No data augmentation (the paper's 'fixed dataset' rows). A run
whose final training accuracy is below ``min_train_acc`` (0.99) has not fitted its training set:
it is named and left out of the claims, whose question is how models that fit generalize.

Claims, over seeds by the interval rule, in test-accuracy points on the same draw and
initialisation: SGD minus plain full-batch GD > 0; SGD minus penalised full-batch GD within
±2; penalised minus plain > 0.

Conditions, declared, in the order they were met (nothing was changed after the final run):

1. One-seed pilot at 4,000 training series (1,000 full-batch steps): at the paper's step size
   0.4, plain full-batch GD killed this network (no batch normalisation, unlike the paper's
   ResNet): at 40% train accuracy after 200 steps, its every ReLU died as the step size neared
   its peak and it ended at chance (10.3%, gradient zero). So the claims' plain GD runs at the
   SGD baseline's peak step size 0.1 (recipe ``gd``) and the paper's 0.4 is kept as the
   condition ``gd_lr0_4``, reported beside. Clipped (0.4) and penalised (0.8) GD trained at the
   paper's step sizes (pilot: SGD 94.2%, clipped 92.5%, penalised 93.1%). The ±2-point margin
   of the matching claim was set after this pilot.
2. First default run, 2,000 training series, 500 full-batch steps and 50 SGD epochs, 3 seeds:
   every claim inconclusive (SGD − plain +5.8 [−10.8, 22.5], SGD − penalised +0.3 [−3.9, 4.4],
   penalised − plain +5.6 [−9.4, 20.5]; mean test accuracy SGD 85.9%, penalised 85.6%, plain
   80.0%, clipped 80.7%), and plain and clipped GD had not fitted their training sets (train
   accuracy 97–98%, one plain run 88%): the comparison measured under-training. So the budget
   was doubled (1,000 steps, 100 epochs) on half the data (1,000 series, to keep the cost),
   runs that do not fit were left out by rule (``min_train_acc``), and the seeds raised to 5.
"""
