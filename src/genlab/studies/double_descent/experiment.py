"""The double-descent study's experiment: data, the random-features sweep (minimum-norm fit and
early-stopped gradient descent), the claim, figures (the science is in the package docstring)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from genlab.studies.base import (
    ClaimResult,
    RunArtifacts,
    StudySpec,
    Summary,
    stack_histories,
)
from genlab.studies.double_descent.settings import (
    CITATION,
    NAME,
    STUDY,
    DoubleDescentConfig,
    EarlyStoppingSettings,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from genlab.data.dataset import Dataset


def synthesize(config: DoubleDescentConfig) -> Dataset:
    from genlab.data.teacher_student import teacher_student

    return teacher_student(config.data)


def sweep(x_train: np.ndarray, y_train: np.ndarray, x_val: np.ndarray, y_val: np.ndarray,
          x_test: np.ndarray, y_test: np.ndarray, weights: np.ndarray, widths: tuple[int, ...],
          activation: str, stopping: EarlyStoppingSettings) -> tuple[list[dict], dict]:
    """Fit every P in ``widths`` (nested features: the first P rows of ``weights``).

    Returns one row of errors per P and the fitted θ per P.
    """
    from genlab.models.random_features import (
        features,
        gradient_descent_path,
        min_norm_least_squares,
        mse,
    )

    n = len(y_train)
    steps = np.unique(np.geomspace(1, stopping.max_steps, stopping.n_checkpoints).astype(np.int64))
    rows, thetas = [], {}
    for p in widths:
        w = weights[:p]
        phi_train = features(x_train, w, activation)
        phi_val, phi_test = features(x_val, w, activation), features(x_test, w, activation)
        theta = min_norm_least_squares(phi_train, y_train)
        s_max = np.linalg.norm(phi_train, 2)
        path = gradient_descent_path(phi_train, y_train, stopping.lr_fraction * 2 * n / s_max**2,
                                     steps)
        val = mse(phi_val, path.thetas, y_val)
        best = int(np.argmin(val))
        thetas[p] = theta
        rows.append({
            "n_features": p, "ratio": p / n,
            "train_mse": float(mse(phi_train, theta, y_train)),
            "test_mse": float(mse(phi_test, theta, y_test)),
            "theta_norm": float(np.linalg.norm(theta)),
            "gd_best_step": int(path.steps[best]), "gd_val_mse": float(val[best]),
            "gd_test_mse": float(mse(phi_test, path.thetas[best], y_test)),
        })
    return rows, thetas


def train_run(config: DoubleDescentConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    import torch

    from genlab.models.random_features import random_feature_weights
    from genlab.seeding import numpy_rng

    run = config.runs[run_name]
    n_val = config.early_stopping.n_val
    if n_val >= len(dataset.test.y):
        raise ValueError(f"early_stopping.n_val ({n_val}) must be below n_test "
                         f"({len(dataset.test.y)})")
    x_test, y_test = dataset.test.x.astype(np.float64), dataset.test.y.astype(np.float64)
    dim = dataset.train.x.shape[1]
    weights = random_feature_weights(max(config.features.widths), dim,
                                     numpy_rng(run.seed, "feature-weights"))
    rows, thetas = sweep(dataset.train.x.astype(np.float64), dataset.train.y.astype(np.float64),
                         x_test[:n_val], y_test[:n_val], x_test[n_val:], y_test[n_val:],
                         weights, config.features.widths, config.features.activation,
                         config.early_stopping)
    table = pa.Table.from_pylist(rows)
    peak = max(rows, key=lambda r: r["test_mse"])
    metrics = {"status": "fitted", "seed": run.seed, "n_train": len(dataset.train.y),
               "peak_n_features": peak["n_features"], "peak_test_mse": peak["test_mse"],
               "test_mse_by_n_features": {str(r["n_features"]): r["test_mse"] for r in rows},
               "gd_test_mse_by_n_features": {str(r["n_features"]): r["gd_test_mse"]
                                             for r in rows}}
    tensors = {"feature_weights": torch.from_numpy(weights)}
    tensors |= {f"theta_p{p}": torch.from_numpy(np.ascontiguousarray(t)) for p, t in thetas.items()}
    spec = {"kind": "random_features", "activation": config.features.activation,
            "input_dim": dim, "widths": list(config.features.widths)}
    return RunArtifacts(weights=tensors, model_spec=spec, history=table, metrics=metrics)


# ---------------------------------------------------------------------------------------------
# Aggregation and the claim check.
# ---------------------------------------------------------------------------------------------

CLAIM = "Test error of the minimum-norm fit peaks at the interpolation threshold P ≈ N"
CRITERION = ("the mean test MSE over feature draws peaks at P in [0.9N, 1.1N], and the peak is "
             "> 10x the error at both P = N/4 and P = 8N")


def check_claim(mean_mse: Mapping[int, float], n_train: int) -> ClaimResult:
    widths = sorted(mean_mse)
    peak = max(widths, key=lambda p: mean_mse[p])
    numbers: dict[str, Any] = {"N": n_train, "peak_P": peak, "peak_test_mse": mean_mse[peak]}
    needed = {"P=N/4": n_train // 4, "P=8N": 8 * n_train}
    missing = [name for name, p in needed.items() if p not in mean_mse or n_train % 4]
    if missing:
        numbers["reason"] = f"the sweep has no {', '.join(missing)}"
        status = "not_run"
    else:
        for name, p in needed.items():
            numbers[f"test_mse_{name}"] = mean_mse[p]
            numbers[f"peak_over_{name}"] = mean_mse[peak] / mean_mse[p]
        in_window = 0.9 * n_train <= peak <= 1.1 * n_train
        tall = all(numbers[f"peak_over_{name}"] > 10 for name in needed)
        status = "reproduced" if in_window and tall else "not_reproduced"
    return ClaimResult(study=NAME, claim=CLAIM, status=status, numbers=numbers,  # type: ignore[arg-type]
                       citation=CITATION, criterion=CRITERION)


def summarize(config: DoubleDescentConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    table = stack_histories(histories, metrics)
    by_p: dict[int, dict[str, list[float]]] = {}
    for row in table.to_pylist():
        entry = by_p.setdefault(row["n_features"], {"test_mse": [], "gd_test_mse": []})
        entry["test_mse"].append(row["test_mse"])
        entry["gd_test_mse"].append(row["gd_test_mse"])
    mean = {p: float(np.mean(v["test_mse"])) for p, v in sorted(by_p.items())}
    mean_gd = {p: float(np.mean(v["gd_test_mse"])) for p, v in sorted(by_p.items())}
    claim = check_claim(mean, config.data.n_train)
    peak_gd = max(mean_gd.values())
    data = {"study": NAME, "n_train": config.data.n_train,
            "mean_test_mse_by_n_features": {str(p): v for p, v in mean.items()},
            "mean_gd_test_mse_by_n_features": {str(p): v for p, v in mean_gd.items()},
            # reported, not claimed: Advani & Saxe predict early stopping flattens the peak
            "early_stopping": {"peak_min_norm": max(mean.values()), "peak_early_stopped": peak_gd,
                               "flattening_factor": max(mean.values()) / peak_gd},
            "runs": {k: dict(v) for k, v in sorted(metrics.items())}}
    return Summary(data=data, claims=(claim,), table=table)


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    import matplotlib.pyplot as plt

    n = data["n_train"]
    rows = table.to_pylist()
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for run in sorted({r["run"] for r in rows}):
        mine = [r for r in rows if r["run"] == run]
        ax.plot([r["ratio"] for r in mine], [r["test_mse"] for r in mine], color="tab:blue",
                alpha=0.25, linewidth=0.8)
    for key, label, style in (("mean_test_mse_by_n_features", "minimum-norm fit", "-"),
                              ("mean_gd_test_mse_by_n_features",
                               "GD, best validation step", "--")):
        # JSON sorts keys as text ("100" < "25"): order by P before drawing the line
        series = dict(sorted((int(p), v) for p, v in data[key].items()))
        ax.plot([p / n for p in series], list(series.values()), style, color="black"
                if style == "-" else "tab:orange", linewidth=2, label=label + " (mean)")
    ax.axvline(1.0, color="grey", linestyle=":", label="P = N")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("P / N (random features per training point)")
    ax.set_ylabel("test MSE")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    stop = data["early_stopping"]
    caption = ("Test error vs number of random features: each feature draw (thin) and the mean. "
               "Reported, not claimed: gradient descent stopped at its best validation step "
               f"peaks at {stop['peak_early_stopped']:.3g} against {stop['peak_min_norm']:.3g} "
               f"for the minimum-norm fit ({stop['flattening_factor']:.3g}x flatter).")
    return [(caption, fig)]


SPEC = StudySpec(
    entry=STUDY,
    synthesize=synthesize,
    train_run=train_run,
    summarize=summarize,
    figures=figures,
)
