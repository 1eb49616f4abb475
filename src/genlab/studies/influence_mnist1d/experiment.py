"""The influence_mnist1d study's experiment: an MNIST-1D draw; a multiclass model fitted in
float64; every attribution method; the LDS retrainings."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import torch

from genlab.analyses.influence.exact import loss_function
from genlab.analyses.influence.ground_truth import (
    datamodel_measurements,
    linear_datamodeling_score,
    random_subsets,
)
from genlab.analyses.influence.methods import attribution_scores
from genlab.analyses.influence.trak import margins
from genlab.data.dataset import Dataset
from genlab.data.mnist1d import mnist1d
from genlab.models.registry import count_parameters, model_spec, state_tensors
from genlab.seeding import derive_seed
from genlab.studies.base import RunArtifacts, StudySpec
from genlab.studies.influence_mnist1d.settings import STUDY, InfluenceMNIST1DConfig
from genlab.train.binary import (
    Problem,
    accuracy,
    build,
    fit_classifier,
    fit_settings_kwargs,
    model_settings,
    per_example_losses,
)
from genlab.train.full_batch import RegularisedObjective, fit, flat_parameters, load_flat

LOSS = "cross_entropy"
METHODS = ("exact", "exact_hessian", "lissa", "ekfac", "grad_dot", "trak", "random")
"""CG is left out: converged, it is the dense solve (relative residual 1e-10, checked against it
in the influence study), and on the MLP it cost more than the rest together."""
LDS_SCHEMA = pa.schema([("test_id", pa.int64()), ("method", pa.string()),
                        ("lds", pa.float64())])


def synthesize(config: InfluenceMNIST1DConfig) -> Dataset:
    return mnist1d(config.data)


class _SubsetRetrainer:
    """Retrains the model from scratch on a subset (boolean mask) of the training set, from each
    of R fixed initialisations (the same R for every subset: common random numbers), and
    returns the test margins averaged over them: TRAK's and dattri's measured output, the correct
    class's logit minus the log-sum-exp of the others (the cross entropy is softplus(−margin), so
    ranking by margin or by loss is the same)."""

    def __init__(self, config: InfluenceMNIST1DConfig, run_name: str, X: torch.Tensor,
                 y: torch.Tensor, X_test: torch.Tensor, y_test: torch.Tensor, outputs: int,
                 device: Any) -> None:
        run, lds = config.runs[run_name], config.lds
        kind, settings, self.l2 = model_settings(run.model, config.logistic, config.mlp)
        self.X, self.y, self.X_test, self.y_test = X, y, X_test, y_test
        self.probe = build(kind, settings, X.shape[1], run.seed, device, outputs)
        self.starts = [flat_parameters(build(kind, settings, X.shape[1],
                                             derive_seed(lds.seed, "lds-init", run_name, r),
                                             device, outputs))
                       for r in range(lds.retrain_seeds)]
        self.kwargs = fit_settings_kwargs(config.fit) | {"grad_tol": lds.grad_tol,
                                                         "coarse_tol": lds.grad_tol}
        self.loss_fn = loss_function(LOSS)
        self.fits: list[tuple[bool, float]] = []  # converged, max|∇|
        self.spread: list[torch.Tensor] = []  # (n_test,) std of the margins over the R starts

    def __call__(self, mask: torch.Tensor, warm_start: bool = False) -> torch.Tensor:
        objective = RegularisedObjective(self.probe, self.loss_fn, self.X, self.y, self.l2, mask)
        measured = []
        for start in self.starts:
            result = fit(objective, start, **self.kwargs)
            self.fits.append((result.converged, result.grad_max))
            load_flat(self.probe, result.theta)
            measured.append(margins(self.probe, self.X_test, self.y_test))
        stacked = torch.stack(measured)
        if len(measured) > 1:
            self.spread.append(stacked.std(dim=0))
        return stacked.mean(dim=0)

    def report(self, measured: torch.Tensor) -> dict[str, Any]:
        """Convergence, and the training noise beside the signal: the margins' std over the R
        starts (mean over subsets and test points) against their std over subsets."""
        noise = float(torch.stack(self.spread).mean()) if self.spread else None
        return {"retrainings": len(self.fits),
                "not_converged": sum(not ok for ok, _ in self.fits),
                "max_grad": max(g for _, g in self.fits),
                "margin_std_over_starts": noise,
                "margin_std_over_subsets": float(measured.std(dim=0).mean())}


def train_run(config: InfluenceMNIST1DConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    run = config.runs[run_name]
    problem = Problem.from_dataset(dataset, dataset.train.y, device, multiclass=True)
    X, y, X_test, y_test = problem.X, problem.y, problem.X_test, problem.y_test
    n, input_dim = len(y), X.shape[1]
    fitted = fit_classifier(run.model, config.logistic, config.mlp, config.fit, problem,
                            loss_function(LOSS), run.seed, device, outputs=dataset.n_classes)
    model, kind, settings, l2, full = (fitted.model, fitted.kind, fitted.settings, fitted.l2,
                                       fitted.result)
    metrics: dict[str, Any] = {
        "status": "converged" if full.converged else "not_converged",
        "model": run.model, "seed": run.seed, "dataset": "mnist1d", "l2": l2, "n_train": n,
        "n_test": len(y_test), "n_parameters": count_parameters(model),
        "fit": fitted.record(), "seconds": {"fit": fitted.seconds},
        "train_loss": full.loss - 0.5 * l2 * float(full.theta.square().sum()),
        "train_acc": accuracy(model, X, y),
        "test_loss": float(per_example_losses(model, X_test, y_test).mean()),
        "test_acc": accuracy(model, X_test, y_test),
    }
    spec = model_spec(kind, settings, input_dim, dataset.n_classes)
    if not full.converged:  # influence functions describe an optimum: nothing to compare
        return RunArtifacts(weights=state_tensors(model), model_spec=spec,
                            history=LDS_SCHEMA.empty_table(), metrics=metrics)

    scores, seconds, solvers = attribution_scores(model, LOSS, X, y, X_test, y_test, l2,
                                                  config.methods, run_name, METHODS)
    metrics["seconds"] |= seconds
    lds = config.lds
    clock = time.perf_counter()
    subsets = random_subsets(n, lds.subsets, lds.fraction, seed=lds.seed)
    retrain = _SubsetRetrainer(config, run_name, X, y, X_test, y_test, dataset.n_classes,
                               device)
    measured = datamodel_measurements(retrain, subsets)
    metrics["seconds"]["lds_retraining"] = time.perf_counter() - clock

    per_method: dict[str, dict[str, Any]] = {}
    rows = []
    for name in METHODS:
        result = linear_datamodeling_score(scores[name], subsets, measured, measure="margin")
        per_method[name] = {"lds": result.lds, "lds_undefined": result.num_undefined}
        rows += [{"test_id": t, "method": name, "lds": float(v)}
                 for t, v in enumerate(result.per_test)]
    metrics |= {
        "methods": per_method, "inverse_hvp": solvers, "ground_truth": retrain.report(measured),
        **{f"{name}_lds": per_method[name]["lds"] for name in
           ("exact", "trak", "ekfac", "grad_dot", "random")},
        "lissa_min_cosine": solvers["lissa"]["min_cosine"],
    }
    return RunArtifacts(weights=state_tensors(model), model_spec=spec,
                        history=pa.Table.from_pylist(rows, schema=LDS_SCHEMA), metrics=metrics)


SPEC = StudySpec(entry=STUDY, synthesize=synthesize, train_run=train_run)
