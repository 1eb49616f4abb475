"""The SGD-stability study's experiment: data, training to a target loss, the final Hessian's
trace and top eigenvalue, claims, figures (the science is in the package docstring)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

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
from genlab.studies.sgd_stability.settings import CITATION, NAME, STUDY, StabilityConfig

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from genlab.data.dataset import Dataset


def synthesize(config: StabilityConfig) -> Dataset:
    from genlab.data.teacher_student import teacher_student

    return teacher_student(config.data)


def train_settings(config: StabilityConfig, run_name: str) -> TrainSettings:
    """SGD with batch size 1, or GD, until the training loss reaches the recipe's target."""
    run, recipe = config.runs[run_name], config.recipe
    return TrainSettings(optimizer=run.method, loss="mse", lr=run.lr,
                         batch_size=1 if run.method == "sgd" else None,
                         max_steps=recipe.max_steps, eval_every=recipe.eval_every,
                         stop_at_train_acc=None, stop_at_train_loss=recipe.target_loss)


def objective(config: StabilityConfig, run_name: str, dataset: Dataset,
              device: Any) -> Objective:
    import torch

    return training_objective(torch.from_numpy(dataset.train.x).to(device),
                              torch.from_numpy(dataset.train.y.astype("float32")).to(device),
                              train_settings(config, run_name))


def train_run(config: StabilityConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    import torch

    from genlab.analyses.sharpness import hessian_top_eigenvalues, hessian_trace
    from genlab.models.registry import build_seeded_model, model_spec, state_tensors
    from genlab.seeding import torch_generator
    from genlab.train.loop import loss_value, train_classifier

    run, recipe = config.runs[run_name], config.recipe
    input_dim = dataset.train.x.shape[1]
    model = build_seeded_model("mlp", config.model, input_dim, 1, run.seed, device)
    x_train = torch.from_numpy(dataset.train.x).to(device)
    y_train = torch.from_numpy(dataset.train.y.astype("float32")).to(device)
    x_test = torch.from_numpy(dataset.test.x).to(device)
    y_test = torch.from_numpy(dataset.test.y.astype("float32")).to(device)
    result = train_classifier(model, x_train, y_train, x_test, y_test,
                              train_settings(config, run_name),
                              torch_generator(run.seed, "batches", device=device.type),
                              checkpointing=checkpointing)

    def mse(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return loss_value("mse", output, target)

    metrics: dict[str, Any] = {
        "status": result.status, "converged": result.status == "fitted", "steps": result.steps,
        "method": run.method, "lr": run.lr, "seed": run.seed, "two_over_lr": 2.0 / run.lr,
        "final_train_loss": result.final.train_loss, "final_test_loss": result.final.test_loss,
    }
    if result.status != "diverged":
        trace = hessian_trace(model, mse, x_train, y_train, num_matvecs=recipe.trace_matvecs,
                              method="hutchpp", seed=run.seed)
        top = hessian_top_eigenvalues(model, mse, x_train, y_train, k=1,
                                      max_iter=recipe.lanczos_max_iter)
        metrics |= {"trace": trace.estimate, "trace_stderr": trace.standard_error,
                    "lambda_max": top.eigenvalues[0],
                    "trace_over_edge": trace.estimate / (2.0 / run.lr),
                    "lambda_over_edge": top.eigenvalues[0] / (2.0 / run.lr)}
    history = pa.Table.from_pylist([r.as_dict() for r in result.history])
    spec = model_spec("mlp", config.model, input_dim, 1)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec, history=history,
                        metrics=metrics)


# ---------------------------------------------------------------------------------------------
# Claims.
# ---------------------------------------------------------------------------------------------

CLAIMS = {
    "sgd_trace": ("A minimum SGD (batch 1) converges to has Tr H <= 2/η",
                  "Tr H <= 1.05·(2/η) for every converged SGD run"),
    "gd_lambda": ("A minimum GD converges to has λ_max <= 2/η",
                  "λ_max <= 1.05·(2/η) for every converged GD run"),
    "gd_trace": ("GD is not bound in trace: its minima can have Tr H > 2/η",
                 "Tr H > 2/η for at least one converged GD run"),
}


def check_claims(metrics: Mapping[str, Mapping[str, Any]]) -> list[ClaimResult]:
    def runs(method: str) -> list[Mapping[str, Any]]:
        return sorted((m for m in metrics.values() if m["method"] == method and m["converged"]),
                      key=lambda m: (m["lr"], m["seed"]))

    def label(m: Mapping[str, Any]) -> str:
        return f"lr={m['lr']:g},seed={m['seed']}"

    def claim(key: str, status: str, numbers: dict[str, Any]) -> ClaimResult:
        text, criterion = CLAIMS[key]
        return ClaimResult(study=NAME, claim=text, status=status,  # type: ignore[arg-type]
                           numbers=numbers, citation=CITATION, criterion=criterion)

    not_converged = sorted(f"{m['method']}:{label(m)}" for m in metrics.values()
                           if not m["converged"])
    sgd, gd = runs("sgd"), runs("gd")
    out = []
    if not sgd:
        out.append(claim("sgd_trace", "not_run", {"reason": "no converged SGD run",
                                                  "not_converged": not_converged}))
    else:
        ratios = {label(m): m["trace_over_edge"] for m in sgd}
        out.append(claim("sgd_trace", "reproduced" if max(ratios.values()) <= 1.05
                         else "not_reproduced",
                         {"trace_over_edge": ratios, "not_converged": not_converged}))
    if not gd:
        out += [claim(k, "not_run", {"reason": "no converged GD run",
                                     "not_converged": not_converged})
                for k in ("gd_lambda", "gd_trace")]
        return out
    lam = {label(m): m["lambda_over_edge"] for m in gd}
    out.append(claim("gd_lambda", "reproduced" if max(lam.values()) <= 1.05
                     else "not_reproduced",
                     {"lambda_over_edge": lam, "not_converged": not_converged}))
    tr = {label(m): m["trace_over_edge"] for m in gd}
    out.append(claim("gd_trace", "reproduced" if max(tr.values()) > 1.0 else "not_reproduced",
                     {"trace_over_edge": tr}))
    return out


def summarize(config: StabilityConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    data = {"study": NAME, "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(check_claims(metrics)),
                   table=stack_histories(histories, metrics))


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    import matplotlib.pyplot as plt

    runs = [m for m in data["runs"].values() if m.get("trace") is not None]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), sharex=True)
    for method, marker in (("sgd", "o"), ("gd", "s")):
        mine = sorted((m for m in runs if m["method"] == method), key=lambda m: m["lr"])
        left.plot([m["lr"] for m in mine], [m["trace_over_edge"] for m in mine],
                  marker=marker, label=method.upper())
        right.plot([m["lr"] for m in mine], [m["lambda_over_edge"] for m in mine],
                   marker=marker, label=method.upper())
    for ax, title in ((left, "Tr H / (2/η)"), (right, "λ_max / (2/η)")):
        ax.axhline(1.0, color="grey", linestyle=":", label="bound")
        ax.set_xscale("log")
        ax.set_xlabel("step size η")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return [("At the end of training: trace and top eigenvalue of the Hessian against 2/η", fig)]


SPEC = StudySpec(
    entry=STUDY,
    synthesize=synthesize,
    train_run=train_run,
    objective=objective,
    summarize=summarize,
    figures=figures,
)
