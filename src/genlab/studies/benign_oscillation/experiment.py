"""The benign-oscillation study's experiment: data, large- and small-step SGD with the probes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import torch

from genlab.data.feature_noise import STRONG, WEAK_ONLY, feature_noise
from genlab.models.registry import build_seeded_model, model_spec, state_tensors
from genlab.seeding import torch_generator
from genlab.settings import TrainSettings
from genlab.studies.base import RunArtifacts, StudySpec, TrainingObjective, array_objective
from genlab.studies.benign_oscillation.settings import STUDY, BenignOscillationConfig
from genlab.train.loop import train_classifier

if TYPE_CHECKING:
    from genlab.data.dataset import Dataset


def synthesize(config: BenignOscillationConfig) -> Dataset:
    return feature_noise(config.data)


def train_settings(config: BenignOscillationConfig, run_name: str) -> TrainSettings:
    """SGD with batch size 1 on the squared margin loss, for the recipe's step budget."""
    recipe = config.recipe
    return TrainSettings(optimizer="sgd", loss="squared_margin", lr=config.runs[run_name].lr,
                         batch_size=1, max_steps=recipe.steps, eval_every=recipe.eval_every,
                         stop_at_train_acc=None)


def objective(config: BenignOscillationConfig, run_name: str, dataset: Dataset,
              device: Any) -> TrainingObjective:
    return array_objective(dataset.train.x, dataset.train.y,
                           train_settings(config, run_name), device)


def train_run(config: BenignOscillationConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run = config.runs[run_name]
    input_dim = dataset.train.x.shape[1]
    model = build_seeded_model("patch_net", config.model, input_dim, 2, run.seed, device)

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    x_train, y_train = tensor(dataset.train.x), tensor(dataset.train.y)
    x_test, y_test = tensor(dataset.test.x), tensor(dataset.test.y)
    sign_train = 2.0 * y_train.double() - 1.0
    strong_train = tensor(dataset.train.group == STRONG)
    groups = {g: tensor(dataset.test.group == g) for g in (STRONG, WEAK_ONLY)}
    weak_index = int(dataset.info["weak_feature"]["index"])
    strong_index = int(dataset.info["strong_feature"]["index"])
    # α_v as growth from initialisation: the raw max includes the init's own alignment (a floor
    # of ~0.014 at init_std 0.01), which hid a ~800x growth ratio behind a raw ratio near 5
    init_weak = model.filters[0][:, weak_index].detach().clone()

    @torch.no_grad()
    def probes(net: torch.nn.Module) -> dict[str, float]:
        f_test = net(x_test)
        correct = (f_test > 0) == (y_test == 1)
        margin = sign_train * net(x_train).double()
        positive = net.filters[0]  # (m, d): the filters of F₊
        return {
            # the paper's α_v: max_r ⟨w₊,r, v⟩ / ‖v‖; v ∝ e_weak, so it is one coordinate
            "alpha_v": positive[:, weak_index].max().item(),
            "alpha_v_growth": (positive[:, weak_index] - init_weak).max().item(),
            "alpha_u": positive[:, strong_index].max().item(),
            **{f"test_acc_{g}": correct[mask].double().mean().item()
               for g, mask in groups.items() if mask.any()},
            "oscillation_strong": (margin[strong_train] - 1).abs().mean().item(),
        }

    result = train_classifier(model, x_train, y_train, x_test, y_test,
                              train_settings(config, run_name),
                              torch_generator(run.seed, "batches", device=device.type),
                              probes=probes, checkpointing=checkpointing)
    history = pa.Table.from_pylist([row.as_dict() for row in result.history])
    final = result.history[-1]
    late = result.history[-max(1, round(config.recipe.late_fraction * len(result.history))):]
    metrics = {
        "status": result.status, "steps": result.steps, "diverged_step": result.diverged_step,
        "lr": run.lr, "noise_std": run.noise_std, "seed": run.seed,
        "final_train_loss": final.train_loss, "final_train_acc": final.train_acc,
        **{key: final.probes.get(key) for key in ("alpha_v", "alpha_v_growth", "alpha_u",
                                                   "test_acc_strong",
                                                   "test_acc_weak_only")},
        "late_oscillation_strong": float(np.mean([r.probes["oscillation_strong"] for r in late])),
    }
    spec = model_spec("patch_net", config.model, input_dim, 2)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec, history=history,
                        metrics=metrics)


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run, objective=objective)
