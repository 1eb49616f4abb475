"""The random-labels study's experiment: data, training (one run or the whole sweep at once),
claims, figures (the science is in the package docstring)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from genlab.studies.base import (
    ClaimResult,
    Objective,
    RunArtifacts,
    StudySpec,
    Summary,
    stack_histories,
    training_objective,
)
from genlab.studies.random_labels.settings import (
    CITATION,
    NAME,
    STUDY,
    RandomLabelsConfig,
    RandomLabelsRun,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from genlab.data.dataset import Dataset


def synthesize(config: RandomLabelsConfig) -> Dataset:
    from genlab.data.gaussian_mixture import gaussian_mixture

    return gaussian_mixture(config.data)


def _training_labels(dataset: Dataset, run: RandomLabelsRun) -> tuple[np.ndarray, np.ndarray]:
    from genlab.data.dataset import corrupt_labels

    return corrupt_labels(dataset.train, run.label_noise)


def _artifacts(config: RandomLabelsConfig, run: RandomLabelsRun, dataset: Dataset, model: Any,
               result: Any, labels: np.ndarray, replaced: np.ndarray) -> RunArtifacts:
    from genlab.models.registry import count_parameters, model_spec, state_tensors

    final = result.final
    metrics = {
        "status": result.status, "steps": result.steps, "fit_step": result.fit_step,
        "diverged_step": result.diverged_step, "label_noise": run.label_noise, "seed": run.seed,
        "fraction_replaced": float(replaced.mean()),
        "fraction_wrong": float((labels != dataset.train.y).mean()),
        "n_parameters": count_parameters(model),
        "final_train_acc": final.train_acc, "final_train_loss": final.train_loss,
        "final_test_acc": final.test_acc, "final_test_loss": final.test_loss,
    }
    spec = model_spec("mlp", config.model, dataset.train.x.shape[1], dataset.n_classes)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec,
                        history=pa.Table.from_pylist([row.as_dict() for row in result.history]),
                        metrics=metrics)


def train_run(config: RandomLabelsConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    # torch is imported here, not at module level: params validation (Snakemake's parse step,
    # `genlab check-params`) imports every study module and must stay fast.
    import torch

    from genlab.models.registry import build_seeded_model
    from genlab.seeding import torch_generator
    from genlab.train.loop import train_classifier

    run = config.runs[run_name]
    labels, replaced = _training_labels(dataset, run)
    model = build_seeded_model("mlp", config.model, dataset.train.x.shape[1], dataset.n_classes,
                               run.seed, device)

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    result = train_classifier(
        model, tensor(dataset.train.x), tensor(labels), tensor(dataset.test.x),
        tensor(dataset.test.y), config.train,
        torch_generator(run.seed, "batches", device=device.type), checkpointing=checkpointing)
    return _artifacts(config, run, dataset, model, result, labels, replaced)


def objective(config: RandomLabelsConfig, run_name: str, dataset: Dataset,
              device: Any) -> Objective:
    import torch

    labels, _ = _training_labels(dataset, config.runs[run_name])
    return training_objective(torch.from_numpy(dataset.train.x).to(device),
                              torch.from_numpy(labels).to(device), config.train)


def train_group(config: RandomLabelsConfig, run_names: Sequence[str], dataset: Dataset,
                device: Any) -> dict[str, RunArtifacts]:
    """Every run at once with the vectorised trainer: the runs share the architecture and
    recipe and differ only in seed and label draw, so each row of the ensemble is exactly the
    run :func:`train_run` would train alone (bit-identical on CPU, tested)."""
    import torch

    from genlab.models.registry import build_seeded_model
    from genlab.seeding import torch_generator
    from genlab.train.ensemble import train_classifier_ensemble

    runs = [config.runs[name] for name in run_names]
    drawn = [_training_labels(dataset, run) for run in runs]
    models = [build_seeded_model("mlp", config.model, dataset.train.x.shape[1],
                                 dataset.n_classes, run.seed, device) for run in runs]
    y_train = torch.from_numpy(np.stack([labels for labels, _ in drawn])).to(device)
    results = train_classifier_ensemble(
        models, torch.from_numpy(dataset.train.x).to(device), y_train,
        torch.from_numpy(dataset.test.x).to(device), torch.from_numpy(dataset.test.y).to(device),
        [config.train] * len(runs),
        [torch_generator(run.seed, "batches", device=device.type) for run in runs])
    return {name: _artifacts(config, run, dataset, model, result, labels, replaced)
            for name, run, model, result, (labels, replaced)
            in zip(run_names, runs, models, results, drawn, strict=True)}


# ---------------------------------------------------------------------------------------------
# Aggregation and claim checks.
# ---------------------------------------------------------------------------------------------

CRITERIA = {
    "fits_every_p": "train accuracy reaches 1.0 at every corruption level p",
    "test_acc_decreases": "mean test accuracy strictly decreases as p increases",
    "chance_at_p1": "at p = 1, |test accuracy - 1/C| <= 0.03",
    "fit_slowdown": "fit_step(p=1) / fit_step(p=0) is in [1, 10]",
}
CLAIMS = {
    "fits_every_p": "Networks fit any fraction of random labels to 100% training accuracy",
    "test_acc_decreases": "Test accuracy falls as the fraction of random labels rises",
    "chance_at_p1": "With fully random labels, test accuracy is at chance",
    "fit_slowdown": "Fitting random labels is slower only by a small constant factor",
}


def _by_p(metrics: Mapping[str, Mapping[str, Any]]) -> dict[float, list[Mapping[str, Any]]]:
    groups: dict[float, list[Mapping[str, Any]]] = {}
    for m in metrics.values():
        groups.setdefault(float(m["label_noise"]), []).append(m)
    return dict(sorted(groups.items()))


def _claim(key: str, status: str, numbers: Mapping[str, Any]) -> ClaimResult:
    return ClaimResult(study=NAME, claim=CLAIMS[key], status=status,  # type: ignore[arg-type]
                       numbers=numbers, citation=CITATION, criterion=CRITERIA[key])


def check_claims(per_p: Mapping[float, Mapping[str, Any]], n_classes: int) -> list[ClaimResult]:
    """Decide each claim from per-p aggregates (means over the seeds that did not diverge)."""
    claims: list[ClaimResult] = []
    ps = sorted(per_p)
    min_train = {p: per_p[p]["min_train_acc"] for p in ps}
    diverged = {p: per_p[p]["n_diverged"] for p in ps}
    claims.append(_claim(
        "fits_every_p",
        "reproduced" if all(v is not None and v >= 1.0 for v in min_train.values())
        and not any(diverged.values()) else "not_reproduced",
        {"min_train_acc_by_p": min_train, "n_diverged_by_p": diverged}))

    test = {p: per_p[p]["mean_test_acc"] for p in ps}
    if len(ps) < 2 or any(v is None for v in test.values()):
        claims.append(_claim("test_acc_decreases", "not_run",
                             {"mean_test_acc_by_p": test, "reason": "needs >= 2 levels of p"}))
    else:
        decreasing = all(test[a] > test[b] for a, b in zip(ps[:-1], ps[1:], strict=True))
        claims.append(_claim("test_acc_decreases",
                             "reproduced" if decreasing else "not_reproduced",
                             {"mean_test_acc_by_p": test}))

    chance = 1.0 / n_classes
    if 1.0 not in per_p or test.get(1.0) is None:
        claims.append(_claim("chance_at_p1", "not_run", {"reason": "no run at p = 1"}))
    else:
        gap = abs(test[1.0] - chance)
        claims.append(_claim("chance_at_p1", "reproduced" if gap <= 0.03 else "not_reproduced",
                             {"test_acc_p1": test[1.0], "chance": chance, "abs_gap": gap}))

    fit = {p: per_p[p]["mean_fit_step"] for p in ps}
    if fit.get(0.0) is None or fit.get(1.0) is None:
        claims.append(_claim("fit_slowdown", "not_run",
                             {"mean_fit_step_by_p": fit,
                              "reason": "needs fitted runs at p = 0 and p = 1"}))
    else:
        ratio = fit[1.0] / fit[0.0]
        claims.append(_claim("fit_slowdown", "reproduced" if 1.0 <= ratio <= 10.0
                             else "not_reproduced",
                             {"mean_fit_step_by_p": fit, "ratio": ratio}))
    return claims


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def summarize(config: RandomLabelsConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    per_p: dict[float, dict[str, Any]] = {}
    for p, runs in _by_p(metrics).items():
        ok = [m for m in runs if m["status"] != "diverged"]
        fitted = [m for m in ok if m["fit_step"] is not None]
        per_p[p] = {
            "n_runs": len(runs), "n_diverged": len(runs) - len(ok), "n_fitted": len(fitted),
            "mean_test_acc": _mean([m["final_test_acc"] for m in ok]),
            "min_train_acc": min((m["final_train_acc"] for m in ok), default=None),
            # fit_step averages only over fitted runs; n_fitted says how many that is
            "mean_fit_step": _mean([m["fit_step"] for m in fitted]),
        }
    claims = check_claims(per_p, config.data.n_classes)
    table = stack_histories(histories, metrics, ("label_noise", "seed"))
    data = {"study": NAME, "n_classes": config.data.n_classes,
            "per_label_noise": {str(p): v for p, v in per_p.items()},
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=tuple(claims), table=table)


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    import matplotlib.pyplot as plt

    runs = table.to_pylist()
    noise_levels = sorted({r["label_noise"] for r in runs})
    cmap = plt.get_cmap("viridis")
    colour = {p: cmap(i / max(1, len(noise_levels) - 1)) for i, p in enumerate(noise_levels)}
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for (ax, key, title) in ((axes[0], "train_acc", "train accuracy"),
                             (axes[1], "test_acc", "test accuracy")):
        for run in sorted({r["run"] for r in runs}):
            rows = [r for r in runs if r["run"] == run]
            p = rows[0]["label_noise"]
            ax.plot([r["step"] for r in rows], [r[key] for r in rows], color=colour[p],
                    label=f"p = {p:g}, seed {rows[0]['seed']}")
        ax.set_xlabel("SGD step")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[1].axhline(1.0 / data["n_classes"], color="grey", linestyle=":", label="chance (1/C)")
    axes[0].set_ylabel("accuracy")
    axes[1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return [("Train and test accuracy during training, per label-noise level p", fig)]


SPEC = StudySpec(
    entry=STUDY,
    synthesize=synthesize,
    train_run=train_run,
    train_group=train_group,
    objective=objective,
    summarize=summarize,
    figures=figures,
)
