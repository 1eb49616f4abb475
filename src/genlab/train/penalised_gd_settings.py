"""Settings of :mod:`genlab.train.penalised_gd`: one training recipe of Geiping et al. (2022),
either small-batch SGD or full-batch gradient descent with clipping and the gradient-norm
penalty.

A settings module: pydantic only, no torch, numpy or genlab code, so that a study's
``settings.py`` can import it cheaply.
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from genlab.settings import FrozenModel


class PenalisedGDRecipe(FrozenModel):
    """SGD with Nesterov momentum and weight decay, a linear warm-up then a cosine decay of the
    step size, optional clipping of the gradient's L2 norm and, in full-batch mode, the
    gradient-norm penalty on fixed blocks of the training set (Geiping et al. 2022,
    ``fullbatch/training`` and ``config/hyp`` of their code).

    A schedule step is an epoch of minibatches when ``stochastic`` (the step size is set once
    per epoch, as in their SGD baseline), one full-batch gradient step otherwise.
    """

    stochastic: bool = Field(description="true: minibatches of batch_size, reshuffled each "
                             "epoch (the SGD baseline); false: full-batch gradient descent.")
    lr: float = Field(gt=0, le=1e3, description="Peak step size.")
    momentum: float = Field(0.9, ge=0, lt=1)
    nesterov: bool = True
    weight_decay: float = Field(5e-4, ge=0, le=1e3, description="L2 weight decay "
                                "(torch.optim.SGD's: added to the gradient after clipping).")
    steps: int = Field(ge=1, le=10_000_000, description="Schedule steps: epochs when "
                       "stochastic, gradient steps otherwise.")
    warmup: int = Field(0, ge=0, le=10_000_000, description="Schedule steps of linear warm-up "
                        "from 0 (GradualWarmupScheduler: step t of the warm-up uses lr·t/warmup).")
    cosine_steps: int | None = Field(None, ge=1, le=10_000_000, description="Horizon of the "
                                     "cosine decay that follows the warm-up (their "
                                     "'cosine-4000' decays over 4000 while training 3000 "
                                     "steps); null: steps.")
    batch_size: int | None = Field(None, ge=1, le=10_000_000, description="Minibatch size "
                                   "(stochastic only).")
    block_size: int = Field(128, ge=1, le=10_000_000, description="Full batch: the training "
                            "set is cut into fixed consecutive blocks of this size, the "
                            "penalty's unit (their data.batch_size; 32 for 'strong reg.'). "
                            "Must divide the training set's size when penalty > 0.")
    grad_clip: float | None = Field(None, gt=0, le=1e6, description="Rescale the gradient to "
                                    "this L2 norm when it is longer (the full gradient, or each "
                                    "minibatch's); null: no clipping.")
    penalty: float = Field(0.0, ge=0, le=1e3, description="α (their block_strength): each "
                           "block's gradient g_b becomes g_b + (α·η_t/4)·H_b g_b, the gradient "
                           "of L_b + (α·η_t/8)‖∇L_b‖²; 0: none. Full batch only.")
    eval_every: int = Field(ge=1, le=10_000_000, description="Schedule steps between history "
                            "rows.")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.stochastic and self.batch_size is None:
            raise ValueError("a stochastic recipe needs batch_size")
        if not self.stochastic and self.batch_size is not None:
            raise ValueError("a full-batch recipe takes no batch_size (block_size cuts the "
                             "set into the penalty's blocks)")
        if self.stochastic and self.penalty:
            raise ValueError("the penalty is for full-batch recipes (their SGD baseline has "
                             "none): set penalty to 0")
        if self.warmup >= self.steps:
            raise ValueError(f"warmup ({self.warmup}) must be shorter than steps ({self.steps})")
        if self.nesterov and self.momentum == 0:
            raise ValueError("nesterov needs momentum > 0")
        return self
