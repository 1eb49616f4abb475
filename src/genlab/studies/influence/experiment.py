"""The influence study's experiment: data, training with every attribution method and ground
truth, claims, summary and figures (the science is in the package's docstring)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from genlab.studies.base import ClaimResult, RunArtifacts, StudySpec, Summary
from genlab.studies.influence.settings import (
    CITATION,
    NAME,
    STUDY,
    InfluenceConfig,
    MethodSettings,
)
from genlab.train.binary_settings import LOSS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from genlab.data.dataset import Dataset

METHODS = ("exact", "exact_hessian", "cg", "lissa", "ekfac", "grad_dot", "random")
GROUND_TRUTHS = ("loo_warm", "loo_scratch")
SCORE_SCHEMA = pa.schema([("train_id", pa.int64()), ("test_id", pa.int64()),
                          ("score", pa.float64()), ("method", pa.string())])
SCATTER_PAIRS = 4000  # (test, removed point) pairs per run in the summary's LOO scatter


def synthesize(config: InfluenceConfig) -> Dataset:
    from genlab.data.logistic_teacher import logistic_teacher

    return logistic_teacher(config.data)


# ---------------------------------------------------------------------------------------------
# Training, attribution and ground truth.
# ---------------------------------------------------------------------------------------------


def attribution_scores(model: Any, problem: Any, l2: float, s: MethodSettings,
                       run: str = "") -> tuple[dict[str, Any], dict[str, float], dict]:
    """Every method's (n_test, n_train) scores, its wall time, and the iterative solvers'
    agreement with the dense inverse-HVP (cosine per test gradient, relative residuals). The
    random baseline is drawn per run, from the methods' seed and the run's name (not its seed
    alone, which logistic-s0 and mlp-s0 share)."""
    import torch

    from genlab.analyses.influence import (
        gradient_dot,
        gradient_products,
        inverse_hvp,
        loss_function,
        per_example_gradients,
        random_scores,
    )
    from genlab.analyses.influence_kfac import kronfluence_influence
    from genlab.seeding import derive_seed

    bce = loss_function(LOSS)
    p = problem
    scores: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    solved: dict[str, Any] = {}
    solvers = (("exact", "ggn", "dense", {}), ("exact_hessian", "hessian", "dense", {}),
               ("cg", "ggn", "cg", {"tol": s.cg_tol}),
               ("lissa", "ggn", "lissa", {"depth": s.lissa_depth, "repeats": s.lissa_repeats,
                                          "lissa_batch_size": s.lissa_batch_size,
                                          "seed": s.seed}))
    for name, curvature, method, options in solvers:
        start = time.perf_counter()
        G_test = per_example_gradients(model, bce, p.X_test, p.y_test, chunk_size=s.chunk_size)
        result = inverse_hvp(model, bce, p.X, p.y, G_test, l2, curvature, method,
                             batch_size=s.chunk_size, **options)
        scores[name] = -gradient_products(model, bce, p.X, p.y, result.solution,
                                          chunk_size=s.chunk_size)
        seconds[name] = time.perf_counter() - start
        solved[name] = result
    start = time.perf_counter()
    scores["ekfac"] = kronfluence_influence(model, LOSS, p.X, p.y, p.X_test, p.y_test, "ekfac",
                                           l2, fisher_samples=s.ekfac_fisher_samples,
                                           seed=s.seed, batch_size=s.chunk_size)
    seconds["ekfac"] = time.perf_counter() - start
    start = time.perf_counter()
    scores["grad_dot"] = gradient_dot(model, bce, p.X, p.y, p.X_test, p.y_test,
                                      chunk_size=s.chunk_size)
    seconds["grad_dot"] = time.perf_counter() - start
    start = time.perf_counter()
    scores["random"] = random_scores((len(p.X_test), len(p.X)),
                                     seed=derive_seed(s.seed, "run", run))
    seconds["random"] = time.perf_counter() - start

    dense = solved["exact"].solution
    solvers_report = {}
    for name in ("cg", "lissa"):
        result = solved[name]
        cosine = ((result.solution * dense).sum(1)
                  / (result.solution.norm(dim=1) * dense.norm(dim=1)))
        solvers_report[name] = {
            "min_cosine": float(cosine.min()), "mean_cosine": float(cosine.mean()),
            "max_relative_residual": float(result.relative_residuals.max()),
            "iterations": result.iterations, "scale": result.scale}
    solvers_report["exact_hessian"] = {"positive_definite": solved["exact_hessian"]
                                       .positive_definite}
    return ({k: v.to(torch.float64).cpu() for k, v in scores.items()}, seconds, solvers_report)


class _Retrainer:
    """Retrains the model on a subset (boolean mask) of the training set, warm-started from θ̂
    (chord steps with the full-data Hessian at θ̂) or from the initialisation θ₀, and measures
    the test losses or margins; keeps each fit's convergence."""

    def __init__(self, model: Any, problem: Any, l2: float, theta0: Any, theta_hat: Any,
                 config: InfluenceConfig) -> None:
        import copy

        from genlab.analyses.influence import loss_function
        from genlab.train.binary import fit_settings_kwargs
        from genlab.train.full_batch import NewtonSystem, Objective

        self.model, self.problem, self.l2 = model, problem, l2
        self.theta0, self.theta_hat = theta0, theta_hat
        self.loss_fn = loss_function(LOSS)
        self.fit_kwargs = fit_settings_kwargs(config.fit)
        self.warm_max_lbfgs = config.ground_truth.warm_max_lbfgs
        self.lds_grad_tol = config.ground_truth.lds_grad_tol
        full = Objective(model, self.loss_fn, problem.X, problem.y, l2)
        self.system = NewtonSystem(full.hessian(theta_hat))
        self.probe = copy.deepcopy(model)
        self.fits: list[tuple[bool, bool, float, float]] = []  # warm, converged, grad, shift

    def theta(self, mask: Any, warm: bool, coarse: bool = False) -> Any:
        from genlab.train.full_batch import Objective, fit

        if bool(mask.all()) and not warm:
            return self.theta_hat  # the full model was trained from θ₀ by this very fit
        objective = Objective(self.model, self.loss_fn, self.problem.X, self.problem.y, self.l2,
                              mask)
        kwargs = dict(self.fit_kwargs)
        if coarse:  # L-BFGS alone, to the LDS tolerance
            kwargs |= {"grad_tol": self.lds_grad_tol,
                       "coarse_tol": max(self.lds_grad_tol, kwargs["coarse_tol"])}
        if warm:
            result = fit(objective, self.theta_hat, hessian=self.system,
                         **(kwargs | {"max_lbfgs": self.warm_max_lbfgs}))
        else:
            result = fit(objective, self.theta0, **kwargs)
        shift = float((result.theta - self.theta_hat).norm())
        self.fits.append((warm, result.converged, result.grad_max, shift))
        return result.theta

    def losses(self, mask: Any, warm: bool) -> Any:
        from genlab.train.binary import per_example_losses
        from genlab.train.full_batch import load_flat

        load_flat(self.probe, self.theta(mask, warm))
        return per_example_losses(self.probe, self.problem.X_test, self.problem.y_test)

    def margins(self, mask: Any, warm: bool) -> Any:
        from genlab.train.binary import margins
        from genlab.train.full_batch import load_flat

        load_flat(self.probe, self.theta(mask, warm, coarse=True))
        return margins(self.probe, self.problem.X_test, self.problem.y_test)

    def convergence(self, start: int) -> dict[str, Any]:
        fits = self.fits[start:]
        shifts = [f[3] for f in fits]
        return {"retrainings": len(fits), "not_converged": sum(not f[1] for f in fits),
                "max_grad": max((f[2] for f in fits), default=None),
                "median_shift": float(np.median(shifts)) if shifts else None,
                "max_shift": max(shifts, default=None)}


def _agreement(scores: Any, loo: Any, n: int) -> dict[str, float]:
    from genlab.analyses.influence_ground_truth import compare_with_loo

    a = compare_with_loo(scores, loo, n)
    return {"pearson": a.pearson, "spearman": a.spearman,
            "mean_per_test_pearson": a.mean_per_test_pearson, "slope": a.slope}


def train_run(config: InfluenceConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    import torch

    from genlab.analyses.influence import loss_function, scores_table
    from genlab.analyses.influence_ground_truth import (
        datamodel_measurements,
        leave_one_out,
        linear_datamodeling_score,
        random_subsets,
    )
    from genlab.data.dataset import corrupt_labels
    from genlab.models.registry import count_parameters, model_spec, state_tensors
    from genlab.seeding import torch_generator
    from genlab.train.binary import (
        Problem,
        accuracy,
        build,
        fit_settings_kwargs,
        model_settings,
        per_example_losses,
    )
    from genlab.train.full_batch import Objective, fit, flat_parameters, load_flat

    run, gt = config.runs[run_name], config.ground_truth
    labels, flipped = corrupt_labels(dataset.train, config.data.flip_fraction)
    problem = Problem.from_dataset(dataset, labels, device)
    n, input_dim = len(labels), dataset.train.x.shape[1]
    kind, settings, l2 = model_settings(run.model, config.logistic, config.mlp)
    model = build(kind, settings, input_dim, run.seed, device)
    theta0 = flat_parameters(model)
    start = time.perf_counter()
    full = fit(Objective(model, loss_function(LOSS), problem.X, problem.y, l2), theta0,
               **fit_settings_kwargs(config.fit))
    load_flat(model, full.theta)
    test_losses = per_example_losses(model, problem.X_test, problem.y_test)
    metrics: dict[str, Any] = {
        "status": "converged" if full.converged else "not_converged",
        "model": run.model, "seed": run.seed, "l2": l2, "n_train": n,
        "n_test": len(problem.y_test), "n_parameters": count_parameters(model),
        "n_flipped": int(flipped.sum()),
        "fit": {"grad_max": full.grad_max, "lbfgs_iterations": full.lbfgs_iterations,
                "newton_steps": full.newton_steps},
        "seconds": {"fit": time.perf_counter() - start},
        "train_loss": full.loss - 0.5 * l2 * float(full.theta.square().sum()),
        "train_acc": accuracy(model, problem.X, problem.y),
        "test_loss": float(test_losses.mean()),
        "test_acc": accuracy(model, problem.X_test, problem.y_test),
    }
    spec = model_spec(kind, settings, input_dim, 1)
    if not full.converged:  # influence functions describe an optimum: nothing to compare
        return RunArtifacts(weights=state_tensors(model), model_spec=spec,
                            history=SCORE_SCHEMA.empty_table(), metrics=metrics)

    scores, seconds, solvers = attribution_scores(model, problem, l2, config.methods, run_name)

    retrain = _Retrainer(model, problem, l2, theta0, full.theta, config)
    order = torch.randperm(n, generator=torch_generator(gt.seed, "influence", "loo-points"))
    chosen = order[:gt.loo_points]
    clock = time.perf_counter()
    warm = leave_one_out(retrain.losses, chosen, n_train=n, warm_start=True)
    metrics["seconds"]["loo_warm"] = time.perf_counter() - clock
    truth = {"loo_warm": retrain.convergence(0)}
    loos = {"loo_warm": warm}
    if gt.loo_scratch_points:
        clock, mark = time.perf_counter(), len(retrain.fits)
        loos["loo_scratch"] = leave_one_out(retrain.losses, chosen[:gt.loo_scratch_points],
                                            n_train=n, warm_start=False)
        metrics["seconds"]["loo_scratch"] = time.perf_counter() - clock
        truth["loo_scratch"] = retrain.convergence(mark)
    clock, mark = time.perf_counter(), len(retrain.fits)
    subsets = random_subsets(n, gt.lds_subsets, gt.lds_fraction, seed=gt.seed)
    measured = datamodel_measurements(retrain.margins, subsets, warm_start=False)
    metrics["seconds"]["lds"] = time.perf_counter() - clock
    truth["lds"] = retrain.convergence(mark)
    metrics["seconds"] |= seconds

    per_method: dict[str, dict[str, Any]] = {}
    for name, matrix in scores.items():
        lds = linear_datamodeling_score(matrix, subsets, measured, measure="margin")
        row = {"lds": lds.lds, "lds_undefined": lds.num_undefined}
        for truth_name, loo in loos.items():
            row |= {f"{truth_name}_{k}": v for k, v in _agreement(matrix, loo, n).items()}
        per_method[name] = row
    metrics |= {
        "methods": per_method, "inverse_hvp": solvers, "ground_truth": truth,
        # every test point, highest loss first: the report shows the first shown_test_points
        # (chosen at aggregation, so changing that number retrains nothing)
        "test_ids_by_loss": torch.argsort(test_losses, descending=True).tolist(),
        "exact_loo_warm_pearson": per_method["exact"]["loo_warm_pearson"],
        "exact_lds": per_method["exact"]["lds"],
        "grad_dot_lds": per_method["grad_dot"]["lds"],
        "ekfac_lds": per_method["ekfac"]["lds"],
        "random_lds": per_method["random"]["lds"],
        "cg_min_cosine": solvers["cg"]["min_cosine"],
        "lissa_min_cosine": solvers["lissa"]["min_cosine"],
    }
    tables = [scores_table(scores[name], name) for name in METHODS]
    for name, loo in loos.items():  # −n·Δ: the measured change in the influence's units
        tables.append(scores_table(-n * loo.delta, name, train_ids=loo.indices))
    history = pa.concat_tables(tables).cast(SCORE_SCHEMA)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec, history=history,
                        metrics=metrics)


# ---------------------------------------------------------------------------------------------
# Aggregation and claim checks.
# ---------------------------------------------------------------------------------------------

CLAIMS = {
    "logistic_loo": (
        "Influence functions predict leave-one-out retraining of L2 logistic regression",
        "logistic regression: Pearson(−I/n, measured LOO change of the test losses) ≥ 0.95 "
        "for exact influence (mean over seeds)"),
    "logistic_lds": (
        "Influence functions predict retraining on random halves of the data (LDS) for "
        "logistic regression, and random scores do not",
        "logistic regression: LDS(exact) ≥ 0.8 and |LDS(random)| ≤ 0.1 (means over seeds)"),
    "mlp_warm": (
        "For a tanh MLP, influence functions predict leave-one-out retraining warm-started from "
        "the trained model, and rank half-data retrainings",
        "MLP: Pearson(exact GGN influence, warm-started LOO) ≥ 0.8 and LDS(exact) ≥ 0.3 "
        "(means over seeds)"),
    "solvers": (
        "CG and LiSSA reach the dense inverse-Hessian-vector product",
        "cosine between the CG (and the LiSSA) solution and the dense one ≥ 0.99 for every "
        "test gradient of every run"),
}


def _claim(key: str, status: str, numbers: Mapping[str, Any]) -> ClaimResult:
    text, criterion = CLAIMS[key]
    return ClaimResult(study=NAME, claim=text, status=status,  # type: ignore[arg-type]
                       numbers=numbers, citation=CITATION, criterion=criterion)


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def _mean(values: list[Any]) -> float:
    finite = [_number(v) for v in values if v is not None and math.isfinite(_number(v))]
    return float(np.mean(finite)) if len(finite) == len(values) and finite else math.nan


def check_claims(metrics: Mapping[str, Mapping[str, Any]]) -> list[ClaimResult]:
    """Decide each claim from the runs' metrics (runs whose training did not converge, or that
    have no method metrics, do not count; a claim without a run is not run)."""
    done = {name: m for name, m in sorted(metrics.items()) if "methods" in m}
    skipped = sorted(name for name in metrics if name not in done)

    def of(kind: str) -> dict[str, Mapping[str, Any]]:
        return {name: m for name, m in done.items() if m["model"] == kind}

    def method(runs: Mapping[str, Mapping[str, Any]], name: str, key: str) -> dict[str, Any]:
        return {run: m["methods"][name].get(key) for run, m in runs.items()}

    out = []
    logistic, mlp = of("logistic"), of("mlp")
    if not logistic:
        reason = {"reason": "no trained logistic-regression run", "skipped": skipped}
        out += [_claim("logistic_loo", "not_run", reason), _claim("logistic_lds", "not_run",
                                                                  reason)]
    else:
        pearson = method(logistic, "exact", "loo_warm_pearson")
        mean = _mean(list(pearson.values()))
        out.append(_claim("logistic_loo", "reproduced" if mean >= 0.95 else "not_reproduced",
                          {"mean_pearson": mean, "pearson_by_run": pearson,
                           "grad_dot_pearson_by_run": method(logistic, "grad_dot",
                                                             "loo_warm_pearson")}))
        lds, chance = method(logistic, "exact", "lds"), method(logistic, "random", "lds")
        mean_lds, mean_chance = _mean(list(lds.values())), _mean(list(chance.values()))
        ok = mean_lds >= 0.8 and abs(mean_chance) <= 0.1
        out.append(_claim("logistic_lds", "reproduced" if ok else "not_reproduced",
                          {"mean_lds_exact": mean_lds, "mean_lds_random": mean_chance,
                           "lds_exact_by_run": lds, "lds_random_by_run": chance,
                           "lds_grad_dot_by_run": method(logistic, "grad_dot", "lds")}))
    if not mlp:
        out.append(_claim("mlp_warm", "not_run", {"reason": "no trained MLP run",
                                                  "skipped": skipped}))
    else:
        pearson, lds = method(mlp, "exact", "loo_warm_pearson"), method(mlp, "exact", "lds")
        mean_pearson, mean_lds = _mean(list(pearson.values())), _mean(list(lds.values()))
        ok = mean_pearson >= 0.8 and mean_lds >= 0.3
        out.append(_claim("mlp_warm", "reproduced" if ok else "not_reproduced", {
            "mean_pearson_warm": mean_pearson, "mean_lds": mean_lds,
            "pearson_warm_by_run": pearson, "lds_by_run": lds,
            "pearson_scratch_by_run": method(mlp, "exact", "loo_scratch_pearson"),
            "grad_dot_pearson_warm_by_run": method(mlp, "grad_dot", "loo_warm_pearson"),
            "grad_dot_lds_by_run": method(mlp, "grad_dot", "lds")}))
    if not done:
        out.append(_claim("solvers", "not_run", {"reason": "no trained run",
                                                 "skipped": skipped}))
    else:
        cosines = {f"{run}:{solver}": m["inverse_hvp"][solver]["min_cosine"]
                   for run, m in done.items() for solver in ("cg", "lissa")}
        worst = min(_number(v) for v in cosines.values())
        out.append(_claim("solvers", "reproduced" if worst >= 0.99 else "not_reproduced",
                          {"min_cosine": worst, "min_cosine_by_run_and_solver": cosines}))
    return out


def _dense(history: pa.Table, method: str, n_test: int, n_train: int) -> np.ndarray:
    """The (n_test, n_train) matrix of one method's scores, NaN where it has none."""
    import pyarrow.compute as pc

    rows = history.filter(pc.equal(history.column("method"), method))
    out = np.full((n_test, n_train), np.nan)
    out[rows.column("test_id").to_numpy(), rows.column("train_id").to_numpy()] = \
        rows.column("score").to_numpy()
    return out


def _examples(metrics: Mapping[str, Any], history: pa.Table, shown: int, k: int = 5
              ) -> list[dict]:
    """For each of the ``shown`` highest-loss test points: the k most helpful (most negative
    exact score: removing them raises the test loss) and most harmful training points, with
    every method's score."""
    n_test, n_train = metrics["n_test"], metrics["n_train"]
    names = [m for m in (*METHODS, *GROUND_TRUTHS)
             if m in set(history.column("method").to_pylist())]
    dense = {m: _dense(history, m, n_test, n_train) for m in names}
    out = []
    for t in metrics["test_ids_by_loss"][:shown]:
        order = np.argsort(dense["exact"][t], kind="stable")

        def rows(ids: np.ndarray, t: int = t) -> list[dict[str, Any]]:
            return [{"train_id": int(i), **{m: (None if np.isnan(dense[m][t, i])
                                                 else float(dense[m][t, i])) for m in names}}
                    for i in ids]

        out.append({"test_id": int(t), "proponents": rows(order[:k]),
                    "opponents": rows(order[::-1][:k])})
    return out


def _scatter(metrics: Mapping[str, Any], history: pa.Table,
             limit: int = SCATTER_PAIRS) -> dict[str, list[float]]:
    """Predicted (−I/n) and measured warm-started LOO changes, pair by pair (every k-th pair
    in (test, train) order when there are more than ``limit``, to keep summary.json small)."""
    n_test, n_train = metrics["n_test"], metrics["n_train"]
    truth = _dense(history, "loo_warm", n_test, n_train)
    mask = np.isfinite(truth)
    stride = max(1, -(-int(mask.sum()) // limit))
    out = {"measured": (-truth[mask][::stride] / n_train).tolist()}
    for m in ("exact", "grad_dot", "ekfac"):
        out[m] = (-_dense(history, m, n_test, n_train)[mask][::stride] / n_train).tolist()
    return out


def summarize(config: InfluenceConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    rows = []
    for run, m in sorted(metrics.items()):
        for method, values in m.get("methods", {}).items():
            solver = m["inverse_hvp"].get(method, {})
            rows.append({"run": run, "model": m["model"], "seed": m["seed"], "method": method,
                         **{key: _number(values.get(key)) for key in (
                             "loo_warm_pearson", "loo_warm_spearman", "loo_scratch_pearson",
                             "loo_scratch_spearman", "lds")},
                         "seconds": _number(m["seconds"].get(method)),
                         "min_cosine": _number(solver.get("min_cosine"))})
    schema = pa.schema([("run", pa.string()), ("model", pa.string()), ("seed", pa.int64()),
                        ("method", pa.string()), ("loo_warm_pearson", pa.float64()),
                        ("loo_warm_spearman", pa.float64()), ("loo_scratch_pearson", pa.float64()),
                        ("loo_scratch_spearman", pa.float64()), ("lds", pa.float64()),
                        ("seconds", pa.float64()), ("min_cosine", pa.float64())])
    table = pa.Table.from_pylist(rows, schema=schema)
    done = {run: m for run, m in sorted(metrics.items()) if "methods" in m}
    data = {"study": NAME, "runs": {k: dict(v) for k, v in sorted(metrics.items())},
            "examples": {run: _examples(m, histories[run], config.shown_test_points)
                         for run, m in done.items()},
            "loo_scatter": {run: _scatter(m, histories[run]) for run, m in done.items()}}
    return Summary(data=data, claims=tuple(check_claims(metrics)), table=table)


# ---------------------------------------------------------------------------------------------
# Figures.
# ---------------------------------------------------------------------------------------------

LABELS = {"exact": "exact (GGN)", "exact_hessian": "exact (Hessian)", "cg": "CG", "lissa": "LiSSA",
          "ekfac": "EK-FAC", "grad_dot": "grad-dot", "random": "random"}


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    import matplotlib.pyplot as plt

    rows = table.to_pylist()
    runs = sorted({r["run"] for r in rows})
    out: list[tuple[str, Figure]] = []
    if not runs:
        return out
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    metrics = (("loo_warm_pearson", "Pearson with warm-started LOO"),
               ("loo_scratch_pearson", "Pearson with LOO from scratch"), ("lds", "LDS"))
    fig, axes = plt.subplots(1, len(metrics), figsize=(13, 3.8), sharey=True)
    width = 0.8 / len(runs)
    for ax, (key, title) in zip(axes, metrics, strict=True):
        for j, run in enumerate(runs):
            values = {r["method"]: r[key] for r in rows if r["run"] == run}
            ax.bar(np.arange(len(methods)) + j * width, [values.get(m, np.nan) for m in methods],
                   width, label=run)
        ax.set_xticks(np.arange(len(methods)) + 0.4 - width / 2)
        ax.set_xticklabels([LABELS[m] for m in methods], rotation=45, ha="right", fontsize=8)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_title(title)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("correlation")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    out.append(("Every method against the ground truths, side by side (higher is better)", fig))

    scatter = data.get("loo_scatter", {})
    if scatter:
        fig, axes = plt.subplots(1, len(scatter), figsize=(4.5 * len(scatter), 4), squeeze=False)
        for ax, (run, pairs) in zip(axes[0], sorted(scatter.items()), strict=True):
            measured = np.asarray(pairs["measured"], dtype=float)
            for method, marker in (("exact", "o"), ("ekfac", "^"), ("grad_dot", "x")):
                predicted = np.asarray(pairs[method], dtype=float)
                if method == "grad_dot":  # no curvature: another scale; fit it for display
                    scale = (predicted @ measured) / max(predicted @ predicted, 1e-300)
                    predicted = predicted * scale
                ax.scatter(measured, predicted, s=6, marker=marker, alpha=0.5,
                           label=LABELS[method] + (" (rescaled)" if method == "grad_dot" else ""))
            lim = np.nanmax(np.abs(measured)) if measured.size else 1.0
            ax.plot([-lim, lim], [-lim, lim], color="grey", linestyle=":")
            ax.set_xlabel("measured change of test loss (warm-started LOO)")
            ax.set_ylabel("predicted −I/n")
            ax.set_title(run)
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
        fig.tight_layout()
        out.append(("Leave-one-out: predicted against measured test-loss changes, every (test "
                    "point, removed point) pair", fig))

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for j, run in enumerate(runs):
        values = {r["method"]: r["seconds"] for r in rows if r["run"] == run}
        ax.bar(np.arange(len(methods)) + j * width, [values.get(m, np.nan) for m in methods],
               width, label=run)
    ax.set_xticks(np.arange(len(methods)) + 0.4 - width / 2)
    ax.set_xticklabels([LABELS[m] for m in methods], rotation=45, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("wall time (s)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    out.append(("Cost of each method (all test × train scores, one CPU thread)", fig))

    examples = data.get("examples", {})
    panels = [(run, ex) for run, exs in sorted(examples.items()) for ex in exs]
    if panels:
        fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.6 * len(panels)), squeeze=False)
        for ax, (run, ex) in zip(axes[:, 0], panels, strict=True):
            items = ex["proponents"] + ex["opponents"][::-1]
            y = np.arange(len(items))
            ax.barh(y, [-it["exact"] for it in items], color=["tab:green"] * len(ex["proponents"])
                    + ["tab:red"] * len(ex["opponents"]), label="exact")
            ax.scatter([-it["ekfac"] for it in items if it.get("ekfac") is not None],
                       [k for k, it in enumerate(items) if it.get("ekfac") is not None],
                       marker="^", color="black", zorder=3, label="EK-FAC")
            warm = [(k, it["loo_warm"]) for k, it in enumerate(items)
                    if it.get("loo_warm") is not None]
            if warm:
                ax.scatter([-v for _, v in warm], [k for k, _ in warm], marker="*", s=60,
                           color="tab:blue", zorder=3, label="measured (LOO)")
            ax.set_yticks(y)
            ax.set_yticklabels([f"train {it['train_id']}" for it in items], fontsize=7)
            ax.axvline(0, color="grey", linewidth=0.8)
            ax.set_title(f"{run}, test point {ex['test_id']}: top proponents (green: removing "
                         "them raises its loss) and opponents (red)", fontsize=9)
            ax.set_xlabel("−I  (n × predicted change of the test loss on removal)")
            ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        out.append(("Top proponents and opponents of the test points with the highest loss", fig))
    return out


SPEC = StudySpec(
    entry=STUDY,
    synthesize=synthesize,
    train_run=train_run,
    summarize=summarize,
    figures=figures,
)
