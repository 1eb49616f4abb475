"""The neural-collapse study's experiment: data, training with NC1-NC4 tracked, TPT statistics."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import torch
from scipy.stats import spearmanr

from genlab.analyses.dimension.representations import layer_representations
from genlab.analyses.measures.collapse import neural_collapse
from genlab.data.gaussian_mixture import gaussian_mixture
from genlab.models.registry import build_seeded_model, model_spec, state_tensors
from genlab.seeding import torch_generator
from genlab.settings import TrainSettings
from genlab.studies.base import RunArtifacts, StudySpec, TrainingObjective, array_objective
from genlab.studies.neural_collapse.settings import STUDY, CollapseConfig, CollapseRecipe
from genlab.train.loop import lr_factor, train_classifier

if TYPE_CHECKING:
    from genlab.data.dataset import Dataset

NC_COLUMNS = ("nc1", "nc2_equinorm", "nc2_equinorm_weights", "nc2_equiangular", "nc2_max_angle",
              "mean_cosine", "nc3", "nc4")


def synthesize(config: CollapseConfig) -> Dataset:
    return gaussian_mixture(config.data)


def train_settings(recipe: CollapseRecipe) -> TrainSettings:
    """The recipe as the training loop takes it: SGD on the cross-entropy for the whole budget,
    the step size ÷10 at each of ``lr_drops`` evenly spaced points."""
    drops = recipe.lr_drops
    return TrainSettings(
        optimizer="sgd", loss="cross_entropy", lr=recipe.lr, momentum=recipe.momentum,
        weight_decay=recipe.weight_decay, batch_size=recipe.batch_size,
        schedule="step" if drops else "constant",
        # ceil: the last step still sees exactly `drops` divisions, never one more
        step_every=math.ceil(recipe.steps / (drops + 1)) if drops else None, step_gamma=0.1,
        max_steps=recipe.steps, eval_every=recipe.track_every, stop_at_train_acc=None)


def collapse_probe(x_train: Any, y_train: Any):  # -> Callable[[nn.Module], dict[str, float]]
    """A training-loop probe: NC1-NC4 and the class means' mean cosine of the model's last
    hidden layer (the features the linear head reads) on the training set."""
    def probe(model: Any) -> dict[str, float]:
        layers = layer_representations(model, x_train)
        features = layers[-2][1]  # (n, p): the last hidden layer; layers[-1] is the logits
        head = model.net[-1]
        if not (features.isfinite().all() and head.weight.isfinite().all()):
            # a diverging run: the loop stops it on the non-finite loss of this very row
            return dict.fromkeys(NC_COLUMNS, math.nan)
        nc = neural_collapse(features, y_train, head.weight, head.bias,
                             predictions=layers[-1][1].argmax(dim=1))
        return {column: getattr(nc, column) for column in NC_COLUMNS}

    return probe


def train_run(config: CollapseConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run = config.runs[run_name]
    input_dim = dataset.train.x.shape[1]
    model = build_seeded_model("mlp", config.model, input_dim, dataset.n_classes, run.seed,
                               device)

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    x_train, y_train = tensor(dataset.train.x), tensor(dataset.train.y)
    settings = train_settings(config.recipe)
    result = train_classifier(
        model, x_train, y_train, tensor(dataset.test.x), tensor(dataset.test.y), settings,
        torch_generator(run.seed, "batches", device=device.type),
        probes=collapse_probe(x_train, y_train), checkpointing=checkpointing)
    rows = [row.as_dict() for row in result.history]
    final = result.final
    metrics = {"status": result.status, "steps": result.steps,
               "diverged_step": result.diverged_step, "mean_scale": run.mean_scale,
               "seed": run.seed,
               "n_classes": dataset.n_classes, "final_train_acc": final.train_acc,
               "final_train_loss": final.train_loss, "final_test_acc": final.test_acc,
               **terminal_phase_statistics(rows)}
    metrics |= schedule_statistics(rows, settings, metrics["tpt_step"])
    spec = model_spec("mlp", config.model, input_dim, dataset.n_classes)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec,
                        history=pa.Table.from_pylist(rows), metrics=metrics)


def objective(config: CollapseConfig, run_name: str, dataset: Dataset,
              device: Any) -> TrainingObjective:
    """The loss the run minimised: the cross-entropy of the (clean) training labels, with the
    recipe's momentum, batch size and weight decay (recorded, not folded in). The step size is
    the one of the run's last steps, after its ``lr_drops`` divisions by 10: every run that is
    analysed took all ``steps`` (there is no early stop; a diverged run is skipped before this
    is asked), so it is the step size the trained weights were last updated with, the one whose
    stability threshold their curvature is compared with."""
    settings = train_settings(config.recipe)
    loss = array_objective(dataset.train.x, dataset.train.y, settings, device)
    return dataclasses.replace(loss, lr=settings.lr * lr_factor(settings, settings.max_steps))


def schedule_statistics(rows: list[Mapping[str, Any]], settings: TrainSettings,
                        tpt_step: int | None) -> dict[str, Any]:
    """Where the schedule leaves the TPT: NC1 at the last tracked step before the step size's
    first division, and the weight decay's exposure λ·Σ η_t over the TPT's updates and over
    all of them (SGD's decay multiplies the weights by (1 − η_t·λ) per step, so the exposure
    is how many e-foldings of shrinkage it could apply, the clock on which it reshapes the
    features once the loss is small)."""
    def exposure(first: int) -> float:
        return settings.weight_decay * settings.lr * sum(
            lr_factor(settings, t) for t in range(first + 1, settings.max_steps + 1))

    out: dict[str, Any] = {"weight_decay_exposure": exposure(0),
                           "weight_decay_exposure_tpt": None if tpt_step is None
                           else exposure(tpt_step)}
    if settings.schedule == "step" and settings.step_every is not None:
        before = [r for r in rows if r["step"] <= settings.step_every]
        out["first_drop_step"] = settings.step_every
        out["nc1_at_first_drop"] = before[-1]["nc1"] if before else None
    return out


def spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    """Spearman's rank correlation (ties get average ranks); None if either side is constant
    or there are fewer than 2 points."""
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(spearmanr(x, y).statistic)


def terminal_phase_statistics(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The numbers the claims are decided on, from a run's history: the TPT's first step
    (``tpt_step``, None if train accuracy never reached 1.0), the NC metrics there and at the
    end, and the Spearman correlation of NC1 and NC3 with the step over the TPT."""
    final = rows[-1]
    out: dict[str, Any] = {f"final_{c}": final[c] for c in NC_COLUMNS}
    # at initialisation too: with balanced classes and near-equal norms of the centred means,
    # their mean cosine is close to -1/(C-1) before any training (Σ_c (μ_c − μ_G) ≈ 0)
    out |= {f"init_{c}": rows[0][c] for c in ("mean_cosine", "nc2_equiangular", "nc1")}
    fitted = [i for i, r in enumerate(rows) if r["train_acc"] >= 1.0]
    if not fitted:
        return {**out, "tpt_step": None, "tpt_points": 0}
    tpt = rows[fitted[0]:]
    steps = np.array([r["step"] for r in tpt], dtype=float)
    out |= {"tpt_step": int(tpt[0]["step"]), "tpt_points": len(tpt),
            "tpt_length_ratio": float(final["step"] / tpt[0]["step"]) if tpt[0]["step"] else None,
            "min_train_acc_in_tpt": float(min(r["train_acc"] for r in tpt)),
            # whether the loss is still being pushed down in the TPT (the paper's picture) or
            # has settled where weight decay balances it
            "tpt_start_train_loss": float(tpt[0]["train_loss"]),
            "min_train_loss_in_tpt": float(min(r["train_loss"] for r in tpt))}
    # NC1 and NC3 decide trend claims; the spread of the cosines is reported as a trend too
    for c in ("nc1", "nc3", "nc2_equiangular"):
        out[f"tpt_start_{c}"] = tpt[0][c]
        out[f"spearman_{c}"] = spearman(steps, np.array([r[c] for r in tpt], dtype=float))
    return out


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run, objective=objective)
