"""The edge-of-stability study's experiment: data, training with tracked sharpness, claims,
figures (the science is in the package docstring)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from genlab.settings import TrainSettings
from genlab.studies.base import (
    ClaimResult,
    Objective,
    RunArtifacts,
    StudySpec,
    Summary,
    stack_histories,
    training_objective,
)
from genlab.studies.eos_gd.settings import CITATION, NAME, STUDY, EoSConfig

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from genlab.data.dataset import Dataset


def synthesize(config: EoSConfig) -> Dataset:
    from genlab.data.teacher_student import teacher_student

    return teacher_student(config.data)


def train_settings(config: EoSConfig, run_name: str) -> TrainSettings:
    """Full-batch GD on the MSE for the recipe's step budget: no early stop."""
    recipe = config.recipe
    return TrainSettings(optimizer="gd", loss="mse", lr=config.runs[run_name].lr,
                         max_steps=recipe.steps, eval_every=recipe.track_every,
                         stop_at_train_acc=None)


def objective(config: EoSConfig, run_name: str, dataset: Dataset, device: Any) -> Objective:
    import torch

    return training_objective(torch.from_numpy(dataset.train.x).to(device),
                              torch.from_numpy(dataset.train.y).to(device),
                              train_settings(config, run_name))


def train_run(config: EoSConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    import torch

    from genlab.analyses.sharpness import hessian_top_eigenvalues
    from genlab.models.registry import build_seeded_model, model_spec, state_tensors
    from genlab.train.loop import loss_value, train_classifier

    run = config.runs[run_name]
    input_dim = dataset.train.x.shape[1]
    model = build_seeded_model("mlp", config.model, input_dim, dataset.n_classes, run.seed,
                               device)
    x_train = torch.from_numpy(dataset.train.x).to(device)
    y_train = torch.from_numpy(dataset.train.y).to(device)
    previous: list[torch.Tensor | None] = [None]  # the last top eigenvector: the warm start

    def mse(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return loss_value("mse", output, target)

    def sharpness(net: torch.nn.Module) -> dict[str, float]:
        result = hessian_top_eigenvalues(net, mse, x_train, y_train, k=1,
                                         max_iter=config.recipe.lanczos_max_iter,
                                         v0=previous[0])
        previous[0] = result.eigenvectors[0]
        return {"lambda_max": result.eigenvalues[0],
                "lambda_residual": float(result.residual_norms[0])}

    result = train_classifier(model, x_train, y_train, torch.from_numpy(dataset.test.x).to(device),
                              torch.from_numpy(dataset.test.y).to(device),
                              train_settings(config, run_name),
                              torch.Generator(), probes=sharpness, checkpointing=checkpointing)
    rows = [row.as_dict() for row in result.history]
    metrics = {"status": result.status, "steps": result.steps,
               "diverged_step": result.diverged_step, "lr": run.lr, "seed": run.seed,
               "two_over_lr": 2.0 / run.lr, **edge_statistics(rows, run.lr)}
    spec = model_spec("mlp", config.model, input_dim, dataset.n_classes)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec,
                        history=pa.Table.from_pylist(rows), metrics=metrics)


def edge_statistics(rows: list[Mapping[str, Any]], lr: float) -> dict[str, Any]:
    """The numbers the claims are decided on, from a run's tracked λ_max and training loss."""
    edge = 2.0 / lr
    lam = np.array([r["lambda_max"] for r in rows], dtype=float)
    loss = np.array([r["train_loss"] for r in rows], dtype=float)
    out: dict[str, Any] = {"lambda_init": float(lam[0]), "lambda_final": float(lam[-1]),
                           "sharpening": float(lam.max() / lam[0]) if lam[0] > 0 else None,
                           "final_train_loss": float(loss[-1])}
    crossed = np.flatnonzero(lam >= 0.9 * edge)
    if len(crossed) == 0:
        return {**out, "crossing_step": None}
    first = int(crossed[0])
    after = lam[first:] / edge
    return {**out, "crossing_step": int(rows[first]["step"]),
            "loss_at_crossing": float(loss[first]),
            "ratio_median_after": float(np.median(after)),
            "ratio_min_after": float(after.min()), "ratio_max_after": float(after.max())}


# ---------------------------------------------------------------------------------------------
# Claims: each must hold at every step size.
# ---------------------------------------------------------------------------------------------

CLAIMS = {
    "sharpening": ("Progressive sharpening: λ_max rises during training",
                   "at every η, max tracked λ_max >= 2.5x its value at initialisation"),
    "edge": ("λ_max reaches 2/η and hovers just above it (the edge of stability)",
             "at every η, after λ_max first crosses 0.9·(2/η): median λ_max/(2/η) in "
             "[0.95, 1.15] and max <= 1.3"),
    "loss": ("Training still makes progress at the edge of stability",
             "at every η, the final train loss is below its value at the crossing"),
}


def check_claims(metrics: Mapping[str, Mapping[str, Any]]) -> list[ClaimResult]:
    runs = sorted(metrics.values(), key=lambda m: (m["lr"], m["seed"]))

    def claim(key: str, verdicts: list[bool | None], numbers: dict[str, Any]) -> ClaimResult:
        text, criterion = CLAIMS[key]
        status = ("not_run" if not verdicts or any(v is None for v in verdicts)
                  else "reproduced" if all(verdicts) else "not_reproduced")
        return ClaimResult(study=NAME, claim=text, status=status,  # type: ignore[arg-type]
                           numbers=numbers, citation=CITATION, criterion=criterion)

    label = {id(m): f"lr={m['lr']:g},seed={m['seed']}" for m in runs}
    alive = [m for m in runs if m["status"] != "diverged"]
    diverged = [label[id(m)] for m in runs if m["status"] == "diverged"]
    sharpening = claim("sharpening", [None if m["sharpening"] is None else m["sharpening"] >= 2.5
                                      for m in alive] + [False] * len(diverged),
                       {"sharpening": {label[id(m)]: m["sharpening"] for m in alive},
                        "diverged": diverged})
    edge_verdicts, edge_numbers, loss_verdicts, loss_numbers = [], {}, [], {}
    for m in alive:
        if m["crossing_step"] is None:
            edge_verdicts.append(False)
            loss_verdicts.append(False)
            edge_numbers[label[id(m)]] = {"crossed": False,
                                          "lambda_final_over_edge": m["lambda_final"]
                                          / m["two_over_lr"]}
            continue
        edge_verdicts.append(0.95 <= m["ratio_median_after"] <= 1.15
                             and m["ratio_max_after"] <= 1.3)
        edge_numbers[label[id(m)]] = {k: m[k] for k in ("crossing_step", "ratio_median_after",
                                                        "ratio_min_after", "ratio_max_after")}
        loss_verdicts.append(m["final_train_loss"] < m["loss_at_crossing"])
        loss_numbers[label[id(m)]] = {"at_crossing": m["loss_at_crossing"],
                                      "final": m["final_train_loss"]}
    diverged_false = [False] * len(diverged)
    return [sharpening,
            claim("edge", edge_verdicts + diverged_false, {**edge_numbers, "diverged": diverged}),
            claim("loss", loss_verdicts + diverged_false, {**loss_numbers, "diverged": diverged})]


def summarize(config: EoSConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    data = {"study": NAME, "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(check_claims(metrics)),
                   table=stack_histories(histories, metrics, ("lr",)))


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    import matplotlib.pyplot as plt

    rows = table.to_pylist()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    colours = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange")
    for colour, run in zip(colours * 20, sorted({r["run"] for r in rows}), strict=False):
        mine = [r for r in rows if r["run"] == run]
        lr = mine[0]["lr"]
        steps = [r["step"] for r in mine]
        left.plot(steps, [r["lambda_max"] for r in mine], color=colour, label=f"λ_max, η = {lr:g}")
        left.axhline(2.0 / lr, color=colour, linestyle="--", linewidth=1, label=f"2/η = {2 / lr:g}")
        right.plot(steps, [r["train_loss"] for r in mine], color=colour, label=f"η = {lr:g}")
    left.set_title("sharpness λ_max vs 2/η")
    right.set_title("training loss")
    right.set_yscale("log")
    for ax in (left, right):
        ax.set_xlabel("GD step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return [("Full-batch GD: sharpness rises to 2/η and hovers there while the loss falls", fig)]


SPEC = StudySpec(
    entry=STUDY,
    synthesize=synthesize,
    train_run=train_run,
    objective=objective,
    summarize=summarize,
    figures=figures,
)
