"""K-FAC and EK-FAC influence through kronfluence (``kronfluence==1.0.1``, imported when used).

kronfluence supplies the K-FAC and EK-FAC approximations (George et al. 2018; Grosse et al. 2023)
of the Fisher of the training loss for ``nn.Linear`` and ``nn.Conv2d`` layers (other parameters
are left out of its scores). Scores here follow :mod:`genlab.analyses.influence.exact`'s convention
(positive = upweighting the training example raises the test loss); kronfluence's own are the
opposite, and are negated.

kronfluence writes factors and scores to an output folder: each call gives it a fresh temporary
folder that it deletes afterwards, and reads the scores back as tensors. kronfluence 1.0.1 stores
everything as safetensors and JSON (no pickle, no ``torch.load``: checked in its source), and a
fresh folder also keeps it from silently reusing results a previous call left under the same
names. Its side effects: each of its steps calls ``gc.collect()`` and ``torch.compiler.reset()``
(clearing every torch.compile cache in the process), which makes a call take ~3 s even on a tiny
model. Memory: it computes scores ``batch_size`` training examples at a time (per-example
gradients of one batch, never all of them), plus the factors (two Kronecker factors and, for
EK-FAC, an eigenvalue matrix per layer) and the (n_test, n_train) score matrix.
"""

from __future__ import annotations

import copy
import logging
import math
import tempfile
import warnings
from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from genlab.analyses.influence.exact import LossKind, _as_dtype, _check_pairs, loss_function
from genlab.seeding import torch_generator

Strategy = Literal["ekfac", "kfac"]


def _sample_targets(kind: LossKind, output: Tensor, generator: torch.Generator) -> Tensor:
    """Targets drawn from the model's predictive distribution at ``output`` (CPU generator)."""
    if kind == "cross_entropy":
        probs = torch.softmax(output, dim=1).cpu()
        return torch.multinomial(probs, 1, generator=generator).squeeze(1).to(output.device)
    if kind == "binary_cross_entropy":
        probs = torch.sigmoid(output.reshape(len(output))).cpu()
        return torch.bernoulli(probs, generator=generator).to(output)
    sigma = math.sqrt(0.5) if kind == "squared_margin" else 1.0
    return output + sigma * torch.randn(output.shape, generator=generator,
                                        dtype=output.dtype).to(output.device)


def _task(kind: LossKind, generator: torch.Generator):
    """A kronfluence Task for a genlab loss: summed per-example losses (kronfluence needs sums,
    so each example's gradient is its own), and, with ``sample=True``, targets drawn from the
    model's predictive distribution, so the factors estimate the true Fisher, which equals the
    GGN for these losses: softmax / Bernoulli for the cross entropies, y ~ N(f, σ²) with
    σ² = 1 for mse (½(f − y)²) and ½ for squared_margin ((y − f)² for y = ±1)."""
    from kronfluence import Task

    if kind not in ("cross_entropy", "mse", "squared_margin", "binary_cross_entropy"):
        raise ValueError(f"unknown loss {kind!r}")
    mean_loss = loss_function(kind)

    def summed(output: Tensor, target: Tensor) -> Tensor:
        return mean_loss(output, target) * len(output)

    class GenlabTask(Task):
        def compute_train_loss(self, batch, model: nn.Module, sample: bool = False) -> Tensor:
            x, target = batch
            output = model(x)
            if not sample:
                return summed(output, target)
            with torch.no_grad():
                draw = _sample_targets(kind, output.detach(), generator)
            if kind == "cross_entropy":
                return F.cross_entropy(output, draw, reduction="sum")
            if kind == "binary_cross_entropy":
                return F.binary_cross_entropy_with_logits(output.reshape(draw.shape), draw,
                                                          reduction="sum")
            # gradients −ε (mse) and −2σε (squared_margin): covariances 1 and 4σ² = 2, the
            # losses' Hessians in the output
            return (0.5 if kind == "mse" else 1.0) * (output - draw).square().sum()

        def compute_measurement(self, batch, model: nn.Module) -> Tensor:
            x, target = batch
            return summed(model(x), target)

    return GenlabTask()


def _kronfluence_scores(model: nn.Module, loss: LossKind, X_train: Tensor, y_train: Tensor,
                        queries: tuple[Tensor, Tensor] | None, strategy: Strategy,
                        damping: float, fisher_samples: int, seed: int, dtype: torch.dtype,
                        batch_size: int) -> Tensor:
    from kronfluence import Analyzer, FactorArguments, ScoreArguments, prepare_model
    from kronfluence.utils.state import State
    from torch.utils.data import ConcatDataset, TensorDataset

    if strategy not in ("ekfac", "kfac"):
        raise ValueError(f"unknown strategy {strategy!r}; known: ekfac, kfac")
    if fisher_samples < 1 or batch_size < 1:
        raise ValueError("fisher_samples and batch_size must be positive")
    if not damping >= 0:
        raise ValueError(f"damping must be non-negative, got {damping}")
    _check_pairs(X_train, y_train, "train")
    device = next(model.parameters()).device
    generator = torch_generator(seed, "influence", "kronfluence-fisher")
    task = _task(loss, generator)
    # kronfluence replaces modules by setattr on their parent, so the root must be a container
    # (a bare nn.Linear recursed forever); it also freezes parameters: work on a copy.
    net = prepare_model(nn.Sequential(copy.deepcopy(model).to(dtype)), task)
    train = TensorDataset(_as_dtype(X_train, dtype), y_train)
    factor_args = FactorArguments(
        strategy=strategy, use_empirical_fisher=False, covariance_max_examples=None,
        lambda_max_examples=None, activation_covariance_dtype=dtype,
        gradient_covariance_dtype=dtype, per_sample_gradient_dtype=dtype, lambda_dtype=dtype,
        eigendecomposition_dtype=torch.float64)
    score_args = ScoreArguments(damping_factor=damping, per_sample_gradient_dtype=dtype,
                                precondition_dtype=dtype, score_dtype=dtype)
    # State is a process-wide singleton whose device is fixed by the first Analyzer built
    # (private API, kronfluence 1.0.1): reset it so this call runs where the model lives.
    State._reset_state()
    try:
        with tempfile.TemporaryDirectory(prefix="genlab-kronfluence-") as folder, \
                warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # its torch.cuda.amp.GradScaler
            analyzer = Analyzer("genlab", net, task, cpu=device.type == "cpu",
                                disable_tqdm=True, output_dir=folder, log_level=logging.WARNING)
            analyzer.fit_all_factors("factors", ConcatDataset([train] * fisher_samples),
                                     per_device_batch_size=batch_size, factor_args=factor_args)
            if queries is None:
                analyzer.compute_self_scores("scores", "factors", train,
                                             per_device_train_batch_size=batch_size,
                                             score_args=score_args)
                scores = analyzer.load_self_scores("scores")
            else:
                test = TensorDataset(_as_dtype(queries[0], dtype), queries[1])
                analyzer.compute_pairwise_scores("scores", "factors", test, train,
                                                 per_device_query_batch_size=batch_size,
                                                 per_device_train_batch_size=batch_size,
                                                 score_args=score_args)
                scores = analyzer.load_pairwise_scores("scores")
    finally:
        State._reset_state()
    if scores is None:
        raise RuntimeError("kronfluence wrote no scores")
    return -scores["all_modules"].to(device=X_train.device, dtype=dtype)


def kronfluence_influence(model: nn.Module, loss: LossKind, X_train: Tensor, y_train: Tensor,
                          X_test: Tensor, y_test: Tensor, strategy: Strategy = "ekfac",
                          damping: float = 1e-3, *, fisher_samples: int = 1, seed: int = 0,
                          dtype: torch.dtype = torch.float64, batch_size: int = 256) -> Tensor:
    """(n_test, n_train) I[t, i] = −∇ℓ(z_t)ᵀ (F̂ + λI)⁻¹ ∇ℓ(zᵢ) with F̂ kronfluence's K-FAC or
    EK-FAC approximation of the true Fisher of the mean training loss (= the GGN for these
    losses) over the model's Linear/Conv2d layers: this module's convention, kronfluence's
    pairwise score negated (its scores are ∇f_queryᵀ (F̂ + λ)⁻¹ ∇ℓ_train, positive = helpful).

    The Fisher's output-gradient covariance is a Monte-Carlo estimate, one target drawn per
    example and pass from ``seed``; ``fisher_samples`` passes over the training set average that
    many draws. λ = ``damping`` is added to every eigenvalue of F̂ (absolute, like
    :func:`exact_influence`'s)."""
    _check_pairs(X_test, y_test, "test")
    return _kronfluence_scores(model, loss, X_train, y_train, (X_test, y_test), strategy,
                               damping, fisher_samples, seed, dtype, batch_size)


def kronfluence_self_influence(model: nn.Module, loss: LossKind, X_train: Tensor,
                               y_train: Tensor, strategy: Strategy = "ekfac",
                               damping: float = 1e-3, *, fisher_samples: int = 1,
                               seed: int = 0, dtype: torch.dtype = torch.float64,
                               batch_size: int = 256) -> Tensor:
    """(n_train,) I[i, i] with kronfluence's factors (see :func:`kronfluence_influence`), in
    this module's convention (≤ 0, like :func:`exact_self_influence`)."""
    return _kronfluence_scores(model, loss, X_train, y_train, None, strategy, damping,
                               fisher_samples, seed, dtype, batch_size)


__all__ = ["Strategy", "kronfluence_influence", "kronfluence_self_influence"]
