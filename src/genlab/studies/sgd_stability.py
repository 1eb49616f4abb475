"""Which minima SGD can stay in: Tr H ≤ 2/η for SGD, λ_max ≤ 2/η for GD (Wu & Su 2023).

Claim: a global minimum that is linearly stable for SGD with batch size 1 on the square loss has
Tr H ≤ 2/η, while GD's stability constrains only the top eigenvalue, λ_max ≤ 2/η (Wu, Ma & E
2018; Wu & Su 2023). So SGD ends in flatter minima (in trace) than GD at the same step size.

Setup (notes/science.md section 2): scalar regression, n = 100, x ~ N(0, I₁₀), targets from a
random tanh teacher (noise-free, so the net can interpolate); a 10-64-64-1 tanh net, loss
½·mean(f − y)², trained to loss < 1e-5 by SGD (batch 1) and by GD, η ∈ {0.02, 0.05, 0.1}; at the
end, Tr H (Hutch++, with its standard error) and λ_max (Lanczos). The bound is stated for one
output: with C outputs the per-example Hessian has rank C and the bound applies per output, which
is why this study keeps the scalar setting (a 10-class head gave Tr H = 265 against 2/η = 40).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
from pydantic import Field, field_validator

from genlab.analyses.settings import AnalysesSettings
from genlab.data.teacher_student import TeacherStudentSettings
from genlab.settings import (
    FrozenModel,
    MLPSettings,
    Seed,
    Slug,
    TrainSettings,
    format_float_slug,
)
from genlab.studies.base import (
    ClaimResult,
    Objective,
    PlotSpec,
    RunArtifacts,
    StudySpec,
    Summary,
    stack_histories,
    training_objective,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from genlab.data.dataset import Dataset

NAME = "sgd_stability"
CITATION = ("Wu & Su. The implicit regularization of dynamical stability in stochastic gradient "
            "descent. ICML 2023; Wu, Ma, E. How SGD selects the global minima in "
            "over-parameterized learning. NeurIPS 2018.")


class StabilityRecipe(FrozenModel):
    target_loss: float = Field(1e-5, gt=0, le=1, description="Train until ½·mean(f − y)² is at "
                               "or below this (checked every eval_every steps).")
    max_steps: int = Field(ge=1, le=1_000_000_000, description="Budget; a run that does not "
                           "reach target_loss is reported as not converged.")
    eval_every: int = Field(ge=1, le=1_000_000)
    trace_matvecs: int = Field(99, ge=6, le=100_000, description="Hutch++ budget (multiple of 3).")
    lanczos_max_iter: int = Field(50, ge=2, le=10_000)


class StabilityRun(FrozenModel):
    method: Literal["sgd", "gd"] = Field(description="sgd: batch size 1; gd: full batch.")
    lr: float = Field(gt=0, le=1e3)
    seed: Seed


class StabilityConfig(FrozenModel):
    description: str = Field("", max_length=2000)
    data: TeacherStudentSettings
    model: MLPSettings
    recipe: StabilityRecipe
    analyses: AnalysesSettings
    runs: dict[Slug, StabilityRun] = Field(min_length=1, description="One line per run; the key "
                                           "is <method>-lr<η>-s<seed>.")

    @field_validator("data")
    @classmethod
    def _regression(cls, data: TeacherStudentSettings) -> TeacherStudentSettings:
        if data.task != "regression":
            raise ValueError("the bound is for a scalar output: task must be 'regression'")
        return data


def run_id(run: StabilityRun) -> str:
    return f"{run.method}-lr{format_float_slug(run.lr)}-s{run.seed}"


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
    name=NAME,
    title="SGD stability (Wu & Su 2023): SGD minima have Tr H <= 2/η, GD only λ_max <= 2/η",
    citation=CITATION,
    config=StabilityConfig,
    run_id=run_id,
    synthesize=synthesize,
    train_run=train_run,
    objective=objective,
    summarize=summarize,
    figures=figures,
    run_columns=("status", "method", "lr", "steps", "trace", "trace_stderr", "lambda_max",
                 "two_over_lr", "final_train_loss"),
    plots=(PlotSpec("train_loss", x="step", y="train_loss",
                    title="Training loss per step, GD and SGD at each step size"),),
)
