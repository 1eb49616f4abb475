"""The neural-collapse study's experiment: data, training with NC1-NC4 tracked, the terminal
phase's statistics, claims, figures (the science is in the package docstring)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from genlab.settings import TrainSettings
from genlab.studies.base import (
    ClaimResult,
    RunArtifacts,
    StudySpec,
    Summary,
    stack_histories,
)
from genlab.studies.neural_collapse.settings import (
    CITATION,
    NAME,
    STUDY,
    CollapseConfig,
    CollapseRecipe,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from genlab.data.dataset import Dataset

NC_COLUMNS = ("nc1", "nc2_equinorm", "nc2_equinorm_weights", "nc2_equiangular", "nc2_max_angle",
              "mean_cosine", "nc3", "nc4")
MIN_TPT_POINTS = 5  # tracked steps in the TPT below which a trend is not judged


def synthesize(config: CollapseConfig) -> Dataset:
    from genlab.data.gaussian_mixture import gaussian_mixture

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
    from genlab.analyses.measures.collapse import neural_collapse
    from genlab.analyses.representations import layer_representations

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
    import torch

    from genlab.models.registry import build_seeded_model, model_spec, state_tensors
    from genlab.seeding import torch_generator
    from genlab.train.loop import train_classifier

    run = config.runs[run_name]
    input_dim = dataset.train.x.shape[1]
    model = build_seeded_model("mlp", config.model, input_dim, dataset.n_classes, run.seed,
                               device)

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    x_train, y_train = tensor(dataset.train.x), tensor(dataset.train.y)
    result = train_classifier(
        model, x_train, y_train, tensor(dataset.test.x), tensor(dataset.test.y),
        train_settings(config.recipe), torch_generator(run.seed, "batches", device=device.type),
        probes=collapse_probe(x_train, y_train), checkpointing=checkpointing)
    rows = [row.as_dict() for row in result.history]
    final = result.final
    metrics = {"status": result.status, "steps": result.steps,
               "diverged_step": result.diverged_step, "seed": run.seed,
               "n_classes": dataset.n_classes, "final_train_acc": final.train_acc,
               "final_train_loss": final.train_loss, "final_test_acc": final.test_acc,
               **terminal_phase_statistics(rows)}
    spec = model_spec("mlp", config.model, input_dim, dataset.n_classes)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec,
                        history=pa.Table.from_pylist(rows), metrics=metrics)


def spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    """Spearman's rank correlation (ties get average ranks); None if either side is constant
    or there are fewer than 2 points."""
    from scipy.stats import spearmanr

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
    out |= {f"init_{c}": rows[0][c] for c in ("mean_cosine", "nc2_equiangular")}
    fitted = [i for i, r in enumerate(rows) if r["train_acc"] >= 1.0]
    if not fitted:
        return {**out, "tpt_step": None, "tpt_points": 0}
    tpt = rows[fitted[0]:]
    steps = np.array([r["step"] for r in tpt], dtype=float)
    out |= {"tpt_step": int(tpt[0]["step"]), "tpt_points": len(tpt),
            "tpt_length_ratio": float(final["step"] / tpt[0]["step"]) if tpt[0]["step"] else None,
            "min_train_acc_in_tpt": float(min(r["train_acc"] for r in tpt))}
    # NC1 and NC3 decide trend claims; the spread of the cosines is reported as a trend too
    for c in ("nc1", "nc3", "nc2_equiangular"):
        out[f"tpt_start_{c}"] = tpt[0][c]
        out[f"spearman_{c}"] = spearman(steps, np.array([r[c] for r in tpt], dtype=float))
    return out


# ---------------------------------------------------------------------------------------------
# Claims: each must hold in every run.
# ---------------------------------------------------------------------------------------------

CLAIMS = {
    "nc1": ("NC1: within-class variability of the last-layer features collapses during the TPT",
            "in every run, Spearman(step, NC1) <= -0.9 over the tracked steps of the terminal "
            "phase (first step at 100% train accuracy to the end)"),
    "nc3": ("NC3: the classifier's rows converge to the centred class means (self-duality)",
            "in every run, Spearman(step, NC3) <= -0.9 over the tracked steps of the terminal "
            "phase"),
    "nc4": ("NC4: the network's decision becomes the nearest-class-centre rule",
            "in every run that reached the terminal phase, final NC4 <= 0.01"),
    "nc2_angle": ("NC2: the centred class means approach a simplex ETF: cosines -> -1/(C-1)",
                  "in every run that reached the terminal phase, the final mean pairwise cosine "
                  "of the centred class means is within 0.02 of -1/(C-1), and the cosines' "
                  "spread (NC2 equiangularity) is lower at the end than at the start of the "
                  "terminal phase"),
}
SPEARMAN_MAX = -0.9
NC4_MAX = 0.01
COSINE_TOLERANCE = 0.02


def _label(m: Mapping[str, Any]) -> str:
    return f"seed={m['seed']}"


def _unchecked(m: Mapping[str, Any], trend: bool) -> str | None:
    """Why a run cannot decide a claim, or None if it can."""
    if m["status"] == "diverged":
        return f"diverged at step {m['diverged_step']}"
    if m["tpt_step"] is None:
        return "never reached 100% train accuracy"
    if trend and m["tpt_points"] < MIN_TPT_POINTS:
        return (f"only {m['tpt_points']} tracked steps in the terminal phase "
                f"(a trend needs {MIN_TPT_POINTS})")
    return None


def _decide(key: str, verdicts: Mapping[str, bool | None], numbers: dict[str, Any],
            reasons: Mapping[str, str]) -> ClaimResult:
    """All runs pass: reproduced; any checked run fails: not_reproduced; else not_run."""
    text, criterion = CLAIMS[key]
    values = list(verdicts.values())
    if values and all(v is True for v in values):
        status = "reproduced"
    elif any(v is False for v in values):
        status = "not_reproduced"
    else:
        status = "not_run"
    if reasons:
        numbers = {**numbers, "not_checked": dict(reasons)}
    return ClaimResult(study=NAME, claim=text, status=status,  # type: ignore[arg-type]
                       numbers=numbers, citation=CITATION, criterion=criterion)


Judgement = str | tuple[bool, dict[str, Any]]
"""A run's verdict on a claim with the numbers behind it, or why the run cannot decide it."""


def _per_run_claim(key: str, runs: list[Mapping[str, Any]], trend: bool,
                   judge: Callable[[Mapping[str, Any]], Judgement]) -> ClaimResult:
    """A claim judged by ``judge`` in every run that can decide it (see :func:`_unchecked`;
    ``trend``: the claim needs enough tracked steps in the terminal phase)."""
    verdicts: dict[str, bool | None] = {}
    numbers: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    for m in runs:
        label = _label(m)
        judgement = _unchecked(m, trend) or judge(m)
        if isinstance(judgement, str):
            verdicts[label], reasons[label] = None, judgement
        else:
            verdicts[label], numbers[label] = judgement
    return _decide(key, verdicts, numbers, reasons)


def check_claims(metrics: Mapping[str, Mapping[str, Any]]) -> list[ClaimResult]:
    runs = sorted(metrics.values(), key=lambda m: m["seed"])

    def falls(key: str) -> Callable[[Mapping[str, Any]], Judgement]:
        def judge(m: Mapping[str, Any]) -> Judgement:
            rho = m[f"spearman_{key}"]
            if rho is None:
                return f"{key} constant over the terminal phase"
            return rho <= SPEARMAN_MAX, {
                "spearman": rho, "tpt_step": m["tpt_step"], "tpt_points": m["tpt_points"],
                f"{key}_at_tpt_start": m[f"tpt_start_{key}"], f"{key}_final": m[f"final_{key}"]}
        return judge

    def angle(m: Mapping[str, Any]) -> Judgement:
        # The mean cosine alone cannot fail here: it is near -1/(C-1) at initialisation already
        # (see the package doc), so the cosines must also have become more equal during the TPT.
        target = -1.0 / (m["n_classes"] - 1)
        gap = abs(m["final_mean_cosine"] - target)
        spread_fell = m["final_nc2_equiangular"] < m["tpt_start_nc2_equiangular"]
        return gap <= COSINE_TOLERANCE and spread_fell, {
            "final_mean_cosine": m["final_mean_cosine"], "target": target, "abs_gap": gap,
            "init_mean_cosine": m["init_mean_cosine"],
            "init_nc2_equiangular": m["init_nc2_equiangular"],
            "tpt_start_nc2_equiangular": m["tpt_start_nc2_equiangular"],
            "final_nc2_equiangular": m["final_nc2_equiangular"],
            "spearman_nc2_equiangular": m["spearman_nc2_equiangular"]}

    return [
        _per_run_claim("nc1", runs, True, falls("nc1")),
        _per_run_claim("nc3", runs, True, falls("nc3")),
        _per_run_claim("nc4", runs, False, lambda m: (
            m["final_nc4"] <= NC4_MAX, {"final_nc4": m["final_nc4"]})),
        _per_run_claim("nc2_angle", runs, False, angle),
    ]


def summarize(config: CollapseConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    data = {"study": NAME, "n_classes": config.data.n_classes,
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(check_claims(metrics)),
                   table=stack_histories(histories, metrics, ("seed", "tpt_step")))


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    import matplotlib.pyplot as plt

    rows = table.to_pylist()
    panels = (("nc1", "NC1 = Tr(Σ_W Σ_B†)/C"), ("nc2_max_angle", "NC2: mean |cos + 1/(C−1)|"),
              ("nc3", "NC3 = ‖W/‖W‖ − M/‖M‖‖²"), ("nc4", "NC4: NCC disagreement"))
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.6))
    colours = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange")
    for colour, run in zip(colours * 20, sorted({r["run"] for r in rows}), strict=False):
        # log x: the TPT starts early; step 0 (the initialisation) is off the axis
        mine = [r for r in rows if r["run"] == run and r["step"] > 0]
        steps = [r["step"] for r in mine]
        tpt = mine[0]["tpt_step"] if mine else None
        for ax, (column, _) in zip(axes, panels, strict=True):
            ax.plot(steps, [r[column] for r in mine], color=colour, label=run)
            if tpt is not None:
                ax.axvline(tpt, color=colour, linestyle=":", linewidth=1)
    for ax, (column, title) in zip(axes, panels, strict=True):
        # NC4 is exactly 0 once the two rules agree: linear near 0, logarithmic above 1e-3
        if column == "nc4":
            ax.set_yscale("symlog", linthresh=1e-3)
            ax.set_ylim(bottom=0)
        else:
            ax.set_yscale("log")
        ax.set_xscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("SGD step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, title="dotted: TPT start", title_fontsize=7)
    fig.tight_layout()
    return [("Neural collapse of the last hidden layer on the training set; dotted lines mark "
             "the first step at 100% train accuracy (the terminal phase)", fig)]


SPEC = StudySpec(
    entry=STUDY,
    synthesize=synthesize,
    train_run=train_run,
    summarize=summarize,
    figures=figures,
)
