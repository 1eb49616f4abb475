"""The benign-oscillation study's experiment: data, large- and small-step SGD with the feature
probes, claims, figures (the science is in the package docstring)."""

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
from genlab.studies.benign_oscillation.settings import (
    CITATION,
    NAME,
    STUDY,
    BenignOscillationConfig,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from genlab.data.dataset import Dataset


def synthesize(config: BenignOscillationConfig) -> Dataset:
    from genlab.data.feature_noise import feature_noise

    return feature_noise(config.data)


def train_settings(config: BenignOscillationConfig, run_name: str) -> TrainSettings:
    """SGD with batch size 1 on the squared margin loss, for the recipe's step budget."""
    recipe = config.recipe
    return TrainSettings(optimizer="sgd", loss="squared_margin", lr=config.runs[run_name].lr,
                         batch_size=1, max_steps=recipe.steps, eval_every=recipe.eval_every,
                         stop_at_train_acc=None)


def objective(config: BenignOscillationConfig, run_name: str, dataset: Dataset,
              device: Any) -> Objective:
    import torch

    return training_objective(torch.from_numpy(dataset.train.x).to(device),
                              torch.from_numpy(dataset.train.y).to(device),
                              train_settings(config, run_name))


def train_run(config: BenignOscillationConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    import torch

    from genlab.data.feature_noise import STRONG, WEAK_ONLY
    from genlab.models.registry import build_seeded_model, model_spec, state_tensors
    from genlab.seeding import torch_generator
    from genlab.train.loop import train_classifier

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

    @torch.no_grad()
    def probes(net: torch.nn.Module) -> dict[str, float]:
        f_test = net(x_test)
        correct = (f_test > 0) == (y_test == 1)
        margin = sign_train * net(x_train).double()
        positive = net.filters[0]  # (m, d): the filters of F₊
        return {
            # the paper's α_v: max_r ⟨w₊,r, v⟩ / ‖v‖; v ∝ e_weak, so it is one coordinate
            "alpha_v": positive[:, weak_index].max().item(),
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
        "lr": run.lr, "seed": run.seed,
        "final_train_loss": final.train_loss, "final_train_acc": final.train_acc,
        **{key: final.probes.get(key) for key in ("alpha_v", "alpha_u", "test_acc_strong",
                                                   "test_acc_weak_only")},
        "late_oscillation_strong": float(np.mean([r.probes["oscillation_strong"] for r in late])),
    }
    spec = model_spec("patch_net", config.model, input_dim, 2)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec, history=history,
                        metrics=metrics)


# ---------------------------------------------------------------------------------------------
# Aggregation and claim checks.
# ---------------------------------------------------------------------------------------------

CLAIMS = {
    "alpha_v": ("Large-step SGD learns the weak feature: α_v grows far more than with a small step",
                "mean α_v at the largest η is >= 5x the mean α_v at the smallest η"),
    "weak_acc": ("Only the large-step model classifies weak-feature-only test points",
                 "mean weak-only test accuracy is >= 0.10 higher at the largest η"),
    "strong_acc": ("Both step sizes classify points with the strong feature",
                   "strong-point test accuracy >= 0.99 at both η (every seed's mean)"),
    "oscillation": ("Large-step SGD keeps oscillating instead of converging",
                    "late-phase mean |y·f − 1| on strong training points >= 0.2 at the largest η"),
}


def _claim(key: str, status: str, numbers: Mapping[str, Any]) -> ClaimResult:
    claim, criterion = CLAIMS[key]
    return ClaimResult(study=NAME, claim=claim, status=status,  # type: ignore[arg-type]
                       numbers=numbers, citation=CITATION, criterion=criterion)


def check_claims(metrics: Mapping[str, Mapping[str, Any]]) -> list[ClaimResult]:
    """Compare the smallest and the largest η over the seeds that did not diverge."""
    by_lr: dict[float, list[Mapping[str, Any]]] = {}
    for m in metrics.values():
        by_lr.setdefault(float(m["lr"]), []).append(m)
    if len(by_lr) < 2:
        return [_claim(k, "not_run", {"reason": "needs runs at two step sizes"}) for k in CLAIMS]
    small, large = min(by_lr), max(by_lr)

    def values(lr: float, key: str) -> list[float]:
        return [m[key] for m in by_lr[lr] if m["status"] != "diverged" and m[key] is not None]

    def mean(lr: float, key: str) -> float | None:
        v = values(lr, key)
        return float(np.mean(v)) if v else None

    diverged = {str(lr): sum(m["status"] == "diverged" for m in by_lr[lr]) for lr in (small, large)}
    base = {"eta_small": small, "eta_large": large, "n_diverged": diverged}
    claims = []
    a_small, a_large = mean(small, "alpha_v"), mean(large, "alpha_v")
    per_seed = {str(lr): values(lr, "alpha_v") for lr in (small, large)}
    if a_small is None or a_large is None:
        claims.append(_claim("alpha_v", "not_run", {**base, "reason": "every run diverged"}))
    else:
        ratio = a_large / a_small if a_small > 0 else float("inf")
        claims.append(_claim("alpha_v", "reproduced" if ratio >= 5 else "not_reproduced",
                             {**base, "alpha_v_small": a_small, "alpha_v_large": a_large,
                              "ratio": ratio, "alpha_v_per_seed": per_seed}))
    w_small, w_large = mean(small, "test_acc_weak_only"), mean(large, "test_acc_weak_only")
    if w_small is None or w_large is None:
        claims.append(_claim("weak_acc", "not_run", {**base, "reason": "no weak-only test points "
                                                     "or every run diverged"}))
    else:
        claims.append(_claim("weak_acc", "reproduced" if w_large - w_small >= 0.10
                             else "not_reproduced",
                             {**base, "weak_acc_small": w_small, "weak_acc_large": w_large,
                              "gap": w_large - w_small,
                              "weak_acc_per_seed": {str(lr): values(lr, "test_acc_weak_only")
                                                    for lr in (small, large)}}))
    strong = {str(lr): mean(lr, "test_acc_strong") for lr in (small, large)}
    if None in strong.values():
        claims.append(_claim("strong_acc", "not_run", {**base, "reason": "no strong test points "
                                                       "or every run diverged"}))
    else:
        claims.append(_claim("strong_acc", "reproduced" if min(strong.values()) >= 0.99
                             else "not_reproduced", {**base, "strong_acc": strong}))
    osc = mean(large, "late_oscillation_strong")
    if osc is None:
        claims.append(_claim("oscillation", "not_run", {**base, "reason": "every run diverged"}))
    else:
        claims.append(_claim("oscillation", "reproduced" if osc >= 0.2 else "not_reproduced",
                             {**base, "late_oscillation_large": osc,
                              "late_oscillation_small": mean(small, "late_oscillation_strong")}))
    return claims


def summarize(config: BenignOscillationConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    data = {"study": NAME, "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(check_claims(metrics)),
                   table=stack_histories(histories, metrics, ("lr", "seed")))


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    import matplotlib.pyplot as plt

    rows = table.to_pylist()
    lrs = sorted({r["lr"] for r in rows})
    colour = {lr: c for lr, c in zip(lrs, ("tab:blue", "tab:red", "tab:green", "tab:purple"),
                                     strict=False)}
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    panels = (("alpha_v", "α_v = max_r ⟨w₊,r, v⟩/‖v‖", "log"),
              ("train_loss", "training loss", "log"),
              ("test_acc_weak_only", "weak-only test accuracy", "linear"))
    for ax, (key, title, scale) in zip(axes, panels, strict=True):
        for run in sorted({r["run"] for r in rows}):
            mine = [r for r in rows if r["run"] == run and r.get(key) is not None]
            if not mine:
                continue
            lr = mine[0]["lr"]
            ax.plot([r["step"] for r in mine], [r[key] for r in mine], color=colour.get(lr),
                    alpha=0.6, linewidth=0.9,
                    label=f"η = {lr:g}" if mine[0]["seed"] == min(
                        r["seed"] for r in rows if r["lr"] == lr) else None)
        ax.set_title(title)
        ax.set_xlabel("SGD step")
        ax.set_yscale(scale)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return [("Weak-feature alignment, training loss and weak-only accuracy during training, "
             "every seed", fig)]


SPEC = StudySpec(
    entry=STUDY,
    synthesize=synthesize,
    train_run=train_run,
    objective=objective,
    summarize=summarize,
    figures=figures,
)
