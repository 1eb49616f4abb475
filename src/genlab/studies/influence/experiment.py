"""The influence study's experiment: data; training, every attribution method, ground truth."""

from __future__ import annotations

import copy
import time
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from genlab.analyses.influence.exact import loss_function, scores_table
from genlab.analyses.influence.ground_truth import (
    compare_with_loo,
    datamodel_measurements,
    leave_one_out,
    linear_datamodeling_score,
    random_subsets,
)
from genlab.analyses.influence.methods import attribution_scores
from genlab.data.dataset import Dataset, corrupt_labels
from genlab.data.logistic_teacher import logistic_teacher
from genlab.models.registry import count_parameters, model_spec, state_tensors
from genlab.seeding import torch_generator
from genlab.studies.base import RunArtifacts, StudySpec, TrainingObjective
from genlab.studies.binary import binary_objective
from genlab.studies.influence.settings import STUDY, InfluenceConfig
from genlab.train.binary import (
    Problem,
    accuracy,
    fit_classifier,
    fit_settings_kwargs,
    margins,
    per_example_losses,
)
from genlab.train.binary_settings import LOSS
from genlab.train.full_batch import (
    NewtonSystem,
    RegularisedObjective,
    fit,
    load_flat,
)

METHODS = ("exact", "exact_hessian", "cg", "lissa", "ekfac", "grad_dot", "random")
"""The methods this study runs (genlab.analyses.influence.methods; TRAK is in
influence_mnist1d)."""
SCORE_SCHEMA = pa.schema([("train_id", pa.int64()), ("test_id", pa.int64()),
                          ("score", pa.float64()), ("method", pa.string())])


def synthesize(config: InfluenceConfig) -> Dataset:
    return logistic_teacher(config.data)


# ---------------------------------------------------------------------------------------------
# Training, attribution and ground truth.
# ---------------------------------------------------------------------------------------------


class _Retrainer:
    """Retrains the model on a subset (boolean mask) of the training set, warm-started from θ̂
    (chord steps with the full-data Hessian at θ̂) or from the initialisation θ₀, and measures
    the test losses or margins; keeps each fit's convergence."""

    def __init__(self, model: Any, problem: Any, l2: float, theta0: Any, theta_hat: Any,
                 config: InfluenceConfig) -> None:

        self.model, self.problem, self.l2 = model, problem, l2
        self.theta0, self.theta_hat = theta0, theta_hat
        self.loss_fn = loss_function(LOSS)
        self.fit_kwargs = fit_settings_kwargs(config.fit)
        self.warm_max_lbfgs = config.ground_truth.warm_max_lbfgs
        self.lds_grad_tol = config.ground_truth.lds_grad_tol
        full = RegularisedObjective(model, self.loss_fn, problem.X, problem.y, l2)
        self.system = NewtonSystem(full.hessian(theta_hat))
        self.probe = copy.deepcopy(model)
        self.fits: list[tuple[bool, bool, float, float]] = []  # warm, converged, grad, shift

    def theta(self, mask: Any, warm: bool, coarse: bool = False) -> Any:
        if bool(mask.all()) and not warm:
            return self.theta_hat  # the full model was trained from θ₀ by this very fit
        objective = RegularisedObjective(self.model, self.loss_fn, self.problem.X,
                                         self.problem.y, self.l2, mask)
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
        load_flat(self.probe, self.theta(mask, warm))
        return per_example_losses(self.probe, self.problem.X_test, self.problem.y_test)

    def margins(self, mask: Any, warm: bool) -> Any:
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
    a = compare_with_loo(scores, loo, n)
    return {"pearson": a.pearson, "spearman": a.spearman,
            "mean_per_test_pearson": a.mean_per_test_pearson, "slope": a.slope}


def train_run(config: InfluenceConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:

    run, gt = config.runs[run_name], config.ground_truth
    labels, flipped = corrupt_labels(dataset.train, config.data.flip_fraction)
    problem = Problem.from_dataset(dataset, labels, device)
    n, input_dim = len(labels), dataset.train.x.shape[1]
    fitted = fit_classifier(run.model, config.logistic, config.mlp, config.fit, problem,
                            loss_function(LOSS), run.seed, device)
    model, kind, settings, l2 = fitted.model, fitted.kind, fitted.settings, fitted.l2
    theta0, full = fitted.theta0, fitted.result
    test_losses = per_example_losses(model, problem.X_test, problem.y_test)
    metrics: dict[str, Any] = {
        "status": "converged" if full.converged else "not_converged",
        "model": run.model, "seed": run.seed, "l2": l2, "n_train": n,
        "n_test": len(problem.y_test), "n_parameters": count_parameters(model),
        "n_flipped": int(flipped.sum()),
        "fit": fitted.record(), "seconds": {"fit": fitted.seconds},
        "train_loss": full.loss - 0.5 * l2 * float(full.theta.square().sum()),
        "train_acc": accuracy(model, problem.X, problem.y),
        "test_loss": float(test_losses.mean()),
        "test_acc": accuracy(model, problem.X_test, problem.y_test),
    }
    spec = model_spec(kind, settings, input_dim, 1)
    if not full.converged:  # influence functions describe an optimum: nothing to compare
        return RunArtifacts(weights=state_tensors(model), model_spec=spec,
                            history=SCORE_SCHEMA.empty_table(), metrics=metrics)

    scores, seconds, solvers = attribution_scores(
        model, LOSS, problem.X, problem.y, problem.X_test, problem.y_test, l2, config.methods,
        run_name, METHODS)

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


def objective(config: InfluenceConfig, run_name: str, dataset: Dataset,
              device: Any) -> TrainingObjective:
    """The data loss the run minimised (:func:`genlab.studies.binary.binary_objective`)."""
    return binary_objective(dataset, config.data.flip_fraction, config.runs[run_name].model,
                            config.logistic, config.mlp, device)


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run, objective=objective)
