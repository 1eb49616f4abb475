"""The measures-grid study's experiment: data, training (alone and grouped) with each run's
measures, the ranking, claims and figures (the science is in the package docstring, the
settings in ``settings``)."""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from genlab.settings import MLPSettings, TrainSettings
from genlab.studies.base import ClaimResult, RunArtifacts, StudySpec, Summary
from genlab.studies.measures_grid.settings import (
    CITATION,
    NAME,
    STUDY,
    MeasuresBlock,
    MeasuresGridConfig,
    MeasuresGridRun,
    run_id,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from genlab.analyses.measures.registry import MeasureSettings
    from genlab.data.dataset import Dataset

HYPERPARAMETERS = ("depth", "width", "lr", "batch_size", "weight_decay")
"""The grid's axes: Ψ and the CMI score condition on those that take two or more values."""

log = logging.getLogger(__name__)


def grid_runs(depths: Iterable[int], widths: Iterable[int], lrs: Iterable[float],
              batch_sizes: Iterable[int], weight_decays: Iterable[float],
              seeds: Iterable[int]) -> dict[str, MeasuresGridRun]:
    """Every combination, keyed by run id, in grid order: what ``runs`` lists for a full grid."""
    runs = (MeasuresGridRun(depth=d, width=w, lr=lr, batch_size=b, weight_decay=wd, seed=s)
            for d, w, lr, b, wd, s in itertools.product(depths, widths, lrs, batch_sizes,
                                                        weight_decays, seeds))
    return {run_id(run): run for run in runs}


def synthesize(config: MeasuresGridConfig) -> Dataset:
    from genlab.data.teacher_student import teacher_student

    return teacher_student(config.data)


def model_settings(config: MeasuresGridConfig, run: MeasuresGridRun) -> MLPSettings:
    return MLPSettings(hidden=(run.width,) * run.depth, activation=config.recipe.activation)


def train_settings(config: MeasuresGridConfig, run: MeasuresGridRun) -> TrainSettings:
    r = config.recipe
    return TrainSettings(lr=run.lr, momentum=r.momentum, weight_decay=run.weight_decay,
                         batch_size=run.batch_size, max_steps=r.max_steps,
                         eval_every=r.eval_every, stop_at_train_acc=r.stop_at_train_acc)


def measure_settings(block: MeasuresBlock) -> MeasureSettings:
    """The measures' settings of ``block`` (:class:`genlab.analyses.measures.MeasureSettings`)."""
    from genlab.analyses.measures.registry import MeasureSettings

    return MeasureSettings(**block.model_dump())


# ---------------------------------------------------------------------------------------------
# Training and the measures of each run.
# ---------------------------------------------------------------------------------------------


def run_measures(model: Any, init_model: Any, dataset: Dataset, history: Mapping[str, list],
                 settings: MeasureSettings, device: Any) -> tuple[dict[str, float],
                                                                  dict[str, str]]:
    """Every registered measure of a trained model on the training set (the Jacobian norm on
    the test inputs): values, and the reason behind each NaN."""
    import torch
    from torch.nn import functional as F

    from genlab.analyses.measures.registry import MeasureInputs, compute_measures

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    inputs = MeasureInputs(
        model=model, X_train=tensor(dataset.train.x), y_train=tensor(dataset.train.y),
        init_model=init_model, X_test=tensor(dataset.test.x), y_test=tensor(dataset.test.y),
        loss_fn=F.cross_entropy, num_classes=dataset.n_classes, history=history,
        settings=settings)
    computed = compute_measures(inputs)
    return ({name: v.value for name, v in computed.items()},
            {name: v.reason for name, v in computed.items() if v.reason is not None})


def _artifacts(config: MeasuresGridConfig, run: MeasuresGridRun, dataset: Dataset, model: Any,
               result: Any, device: Any) -> RunArtifacts:
    from genlab.analyses.measures.registry import MEASURES
    from genlab.models.registry import (
        build_seeded_model,
        count_parameters,
        model_spec,
        state_tensors,
    )

    final = result.final
    rows = [row.as_dict() for row in result.history]
    mlp = model_settings(config, run)
    input_dim = dataset.train.x.shape[1]
    if result.status == "fitted":
        t0 = time.perf_counter()
        init = build_seeded_model("mlp", mlp, input_dim, dataset.n_classes, run.seed, device)
        history = {"step": [r["step"] for r in rows], "train_loss": [r["train_loss"] for r in rows]}
        was_training = model.training
        values, reasons = run_measures(model, init, dataset, history,
                                       measure_settings(config.measures), device)
        model.train(was_training)
        log.info("measures of %s in %.1fs", run_id(run), time.perf_counter() - t0)
    else:  # excluded from the ranking: not worth the measures' time
        why = (f"excluded: the run {result.status} (train accuracy {final.train_acc:.4g} < "
               f"{config.recipe.stop_at_train_acc:g})")
        values = {name: math.nan for name in MEASURES}
        reasons = {name: why for name in MEASURES}
    metrics = {
        "status": result.status, "included": result.status == "fitted", "steps": result.steps,
        "fit_step": result.fit_step, "diverged_step": result.diverged_step,
        **run.model_dump(), "n_parameters": count_parameters(model),
        "final_train_acc": final.train_acc, "final_train_loss": final.train_loss,
        "final_test_acc": final.test_acc, "final_test_loss": final.test_loss,
        "gap": final.train_acc - final.test_acc,
        "measures": values, "measure_reasons": reasons,
    }
    spec = model_spec("mlp", mlp, input_dim, dataset.n_classes)
    return RunArtifacts(weights=state_tensors(model), model_spec=spec,
                        history=pa.Table.from_pylist(rows), metrics=metrics)


def _tensors(dataset: Dataset, device: Any) -> tuple[Any, Any, Any, Any]:
    import torch

    return tuple(torch.from_numpy(a).to(device) for a in (  # type: ignore[return-value]
        dataset.train.x, dataset.train.y, dataset.test.x, dataset.test.y))


def train_run(config: MeasuresGridConfig, run_name: str, dataset: Dataset, device: Any,
              checkpointing: Any = None) -> RunArtifacts:
    # torch is imported here, not at module level: params validation imports every study module
    from genlab.models.registry import build_seeded_model
    from genlab.seeding import torch_generator
    from genlab.train.loop import train_classifier

    run = config.runs[run_name]
    model = build_seeded_model("mlp", model_settings(config, run), dataset.train.x.shape[1],
                               dataset.n_classes, run.seed, device)
    result = train_classifier(model, *_tensors(dataset, device), train_settings(config, run),
                              torch_generator(run.seed, "batches", device=device.type),
                              checkpointing=checkpointing)
    return _artifacts(config, run, dataset, model, result, device)


def ensemble_groups(runs: Mapping[str, MeasuresGridRun]) -> dict[tuple[int, int, int], list[str]]:
    """Run names by (depth, width, batch size): the models the ensemble can train together (one
    architecture, one minibatch size), in run order."""
    groups: dict[tuple[int, int, int], list[str]] = {}
    for name, run in runs.items():
        groups.setdefault((run.depth, run.width, run.batch_size), []).append(name)
    return groups


def train_group(config: MeasuresGridConfig, run_names: Sequence[str], dataset: Dataset,
                device: Any) -> dict[str, RunArtifacts]:
    """Every run with the vectorised trainer, one ensemble per (depth, width, batch size); each
    model is the one :func:`train_run` trains alone (bit-identical on CPU, tested), so its
    measures are too."""
    from genlab.models.registry import build_seeded_model
    from genlab.seeding import torch_generator
    from genlab.train.ensemble import train_classifier_ensemble

    tensors = _tensors(dataset, device)
    artifacts: dict[str, RunArtifacts] = {}
    for (depth, width, batch), names in ensemble_groups(
            {name: config.runs[name] for name in run_names}).items():
        t0 = time.perf_counter()
        runs = [config.runs[name] for name in names]
        models = [build_seeded_model("mlp", model_settings(config, run),
                                     dataset.train.x.shape[1], dataset.n_classes, run.seed,
                                     device) for run in runs]
        results = train_classifier_ensemble(
            models, *tensors, [train_settings(config, run) for run in runs],
            [torch_generator(run.seed, "batches", device=device.type) for run in runs])
        log.info("trained %d models (depth %d, width %d, batch %d) in %.1fs", len(runs), depth,
                 width, batch, time.perf_counter() - t0)
        for name, run, model, result in zip(names, runs, models, results, strict=True):
            artifacts[name] = _artifacts(config, run, dataset, model, result, device)
    return {name: artifacts[name] for name in run_names}


# ---------------------------------------------------------------------------------------------
# Ranking and claim checks.
# ---------------------------------------------------------------------------------------------

JIANG_MEASURES = (
    "num_params", "inverse_margin", "spec_init", "spec_orig", "prod_of_spec_over_margin",
    "prod_of_spec", "fro_over_spec", "sum_of_spec_over_margin", "sum_of_spec",
    "prod_of_fro_over_margin", "prod_of_fro", "sum_of_fro_over_margin", "sum_of_fro",
    "frobenius_distance", "spectral_distance", "param_norm", "path_norm_over_margin",
    "path_norm", "pacbayes_init", "pacbayes_orig", "pacbayes_flatness", "pacbayes_mag_flatness",
    "sharpness_flatness", "sharpness_mag_flatness", "steps_to_loss")
"""The registry's measures from Jiang et al.'s appendix C: the field the first claim ranks in.
The others (curvature, intrinsic dimension, rotation, Jacobian, neural collapse) are ranked in
the table but were not in the paper's comparison."""
FLATNESS = ("pacbayes_flatness", "pacbayes_mag_flatness")
CLAIMS = {
    "flatness_top": (
        "Sharpness-based measures predict the gap best: the PAC-Bayes flatness 1/σ′² (plain or "
        "magnitude-aware) is among the top measures by granulated Kendall Ψ",
        "the better of pacbayes_flatness and pacbayes_mag_flatness by Ψ has Ψ > 0 and ranks in "
        "the top third (rounded up) of Jiang et al.'s measures with a defined Ψ, ordered by Ψ"),
    "spectral_negative": (
        "The product of spectral norms correlates negatively with the generalization gap",
        "Kendall τ of prod_of_spec with the gap < 0 over the included models"),
}
"""What Jiang et al. (2020) report, as notes/science.md section 6 summarises it (a paraphrase:
the paper's own wording could not be checked here): the best performers are the PAC-Bayes
sharpness measures, especially the magnitude-aware one (1/σ′²_mag, eq. 61), and the worst-case
1/α′; path norm was reasonable; spectral-norm measures correlated *negatively* with the gap
(§7). Here the first is read on Ψ (the statistic the paper ranks measures by), the second on τ
(the correlation over all models); neither criterion was tuned to this grid."""
MIN_MODELS = 4  # fewer included models than this: the claims are not run


def measure_value(value: Any) -> float:
    """A measure as metrics.json stores it (NaN as null, ±inf as "inf"/"-inf") back to a float."""
    if value is None:
        return math.nan
    return float(value)  # float("inf") and float("-inf") parse the strings


def _ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks of the defined values (±inf included: a flatness of inf is the sharpest),
    NaN where undefined. τ, Ψ and the CMI score read only the order, and ranks keep ±inf from
    making differences NaN."""
    from scipy.stats import rankdata

    out = np.full(len(values), np.nan)
    keep = ~np.isnan(values)
    out[keep] = rankdata(values[keep])
    return out


def ranking_rows(values: Mapping[str, np.ndarray], gap: np.ndarray,
                 hyperparams: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    """One row per measure: τ with the gap, Ψ and each ψ_i over ``hyperparams`` (those the grid
    varies), the CMI score and its conditioning set, the number of models it is defined on; in
    descending order of sign·Ψ (undefined last). Columns ψ_<name> exist for every name in
    :data:`HYPERPARAMETERS` (NaN where not varied)."""
    from genlab.analyses.measures.ranking import (
        conditional_mutual_information,
        granulated_kendall,
        kendall_tau,
    )
    from genlab.analyses.measures.registry import MEASURES

    rows = []
    for name, raw in values.items():
        ranks = _ranks(np.asarray(raw, dtype=np.float64))
        sign = MEASURES[name].sign if name in MEASURES else 1
        tau = kendall_tau(ranks, gap)
        if hyperparams:
            granulated = granulated_kendall(ranks, gap, hyperparams)
            psi, per = granulated.psi, granulated.per_hyperparameter
            cmi = conditional_mutual_information(ranks, gap, hyperparams)
            cmi_score, cmi_set = cmi.score, "+".join(cmi.argmin) or "none"
        else:
            psi, per, cmi_score, cmi_set = math.nan, {}, math.nan, ""
        rows.append({
            "measure": name, "sign": sign, "tau": tau, "psi": psi,
            **{f"psi_{h}": per.get(h, math.nan) for h in HYPERPARAMETERS},
            "cmi": cmi_score, "cmi_conditioning": cmi_set,
            "n_models": int(np.count_nonzero(~np.isnan(ranks))),
            "oriented_tau": sign * tau, "oriented_psi": sign * psi,
        })
    return sorted(rows, key=lambda r: (math.isnan(r["oriented_psi"]), -np.nan_to_num(
        r["oriented_psi"], nan=0.0), r["measure"]))


def _claim(key: str, status: str, numbers: Mapping[str, Any]) -> ClaimResult:
    text, criterion = CLAIMS[key]
    return ClaimResult(study=NAME, claim=text, status=status,  # type: ignore[arg-type]
                       numbers=numbers, citation=CITATION, criterion=criterion)


def check_claims(rows: Sequence[Mapping[str, Any]], n_included: int) -> list[ClaimResult]:
    """Decide each claim from the ranking rows (:func:`ranking_rows`) of ``n_included``
    models."""
    by_name = {r["measure"]: r for r in rows}
    claims = []
    if n_included < MIN_MODELS:
        reason = f"{n_included} included models (< {MIN_MODELS})"
        return [_claim(key, "not_run", {"n_included": n_included, "reason": reason})
                for key in CLAIMS]

    ranked = [r for r in rows
              if r["measure"] in JIANG_MEASURES and not math.isnan(r["oriented_psi"])]
    ranked.sort(key=lambda r: -r["oriented_psi"])
    candidates = [by_name[m] for m in FLATNESS
                  if m in by_name and not math.isnan(by_name[m]["oriented_psi"])]
    if not candidates:
        claims.append(_claim("flatness_top", "not_run", {
            "reason": "neither PAC-Bayes flatness measure has a defined Ψ"}))
    else:
        best = max(candidates, key=lambda r: r["oriented_psi"])
        position = 1 + [r["measure"] for r in ranked].index(best["measure"])
        cutoff = math.ceil(len(ranked) / 3)
        ok = best["oriented_psi"] > 0 and position <= cutoff
        claims.append(_claim("flatness_top", "reproduced" if ok else "not_reproduced", {
            "measure": best["measure"], "psi": best["psi"], "tau": best["tau"],
            "rank_by_psi": position, "n_ranked": len(ranked), "top_third_cutoff": cutoff,
            "psi_by_measure": {m: by_name[m]["psi"] for m in FLATNESS if m in by_name},
            "n_included": n_included}))

    spec = by_name.get("prod_of_spec")
    if spec is None or math.isnan(spec["tau"]):
        claims.append(_claim("spectral_negative", "not_run",
                             {"reason": "prod_of_spec has no defined τ"}))
    else:
        claims.append(_claim("spectral_negative",
                             "reproduced" if spec["tau"] < 0 else "not_reproduced",
                             {"tau": spec["tau"], "psi": spec["psi"],
                              "n_models": spec["n_models"], "n_included": n_included}))
    return claims


def summarize(config: MeasuresGridConfig, metrics: Mapping[str, Mapping[str, Any]],
              histories: Mapping[str, pa.Table]) -> Summary:
    """Exclude the runs that did not reach the training-accuracy threshold (counted by status),
    rank every measure over the rest, check the claims. The table is the ranking, one row per
    measure; ``data["runs"]`` keeps each run's gap and measures for the scatter plots."""
    names = sorted(metrics)
    included = [n for n in names if metrics[n]["included"]]
    excluded: dict[str, int] = {}
    for n in names:
        if not metrics[n]["included"]:
            excluded[metrics[n]["status"]] = excluded.get(metrics[n]["status"], 0) + 1
    measure_names = sorted({m for n in names for m in metrics[n]["measures"]})
    gap = np.array([metrics[n]["gap"] for n in included], dtype=np.float64)
    values = {m: np.array([measure_value(metrics[n]["measures"].get(m)) for n in included],
                          dtype=np.float64) for m in measure_names}
    varied = {h: np.array([metrics[n][h] for n in included]) for h in HYPERPARAMETERS
              if len({metrics[n][h] for n in included}) > 1}
    rows = ranking_rows(values, gap, varied)
    claims = check_claims(rows, len(included))
    table = pa.Table.from_pylist(rows) if rows else pa.table({"measure": pa.array([], pa.string())})
    data = {
        "study": NAME, "n_runs": len(names), "n_included": len(included),
        "n_excluded": sum(excluded.values()), "excluded_by_status": excluded,
        "excluded_runs": [n for n in names if not metrics[n]["included"]],
        "hyperparameters_varied": list(varied),
        "gap": ({"mean": float(gap.mean()), "min": float(gap.min()), "max": float(gap.max())}
                if len(gap) else None),
        "top_by_psi": [r["measure"] for r in rows if not math.isnan(r["oriented_psi"])][:5],
        "top_by_tau": [r["measure"] for r in sorted(
            rows, key=lambda r: -np.nan_to_num(r["oriented_tau"], nan=-2.0))][:5],
        "ranking": rows,
        "runs": {n: {k: v for k, v in metrics[n].items() if k != "measure_reasons"}
                 for n in names},
    }
    return Summary(data=data, claims=tuple(claims), table=table)


# ---------------------------------------------------------------------------------------------
# Figures.
# ---------------------------------------------------------------------------------------------

TOP_SCATTER = 4
TABLE_ROWS = 12


def _table_figure(rows: Sequence[Mapping[str, Any]], data: Mapping[str, Any]) -> tuple[str, Figure]:
    """The head of the ranking as a table: τ, Ψ, each ψ_i and the CMI score."""
    import matplotlib.pyplot as plt

    def cell(value: Any) -> str:
        return "–" if value is None or (isinstance(value, float) and math.isnan(value)) \
            else f"{value:+.2f}" if isinstance(value, float) else str(value)

    header = ["measure", "τ", "Ψ", *(f"ψ {h}" for h in HYPERPARAMETERS), "CMI", "given", "n"]
    body = [[r["measure"], cell(r["tau"]), cell(r["psi"]),
             *(cell(r[f"psi_{h}"]) for h in HYPERPARAMETERS),
             f"{r['cmi']:.3f}" if not math.isnan(r["cmi"]) else "–", r["cmi_conditioning"],
             str(r["n_models"])] for r in rows]
    fig, ax = plt.subplots(figsize=(8.5, 0.26 * len(rows) + 0.6))
    ax.axis("off")
    table = ax.table(cellText=body, colLabels=header, loc="center", cellLoc="right")
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    table.auto_set_column_width(list(range(len(header))))
    fig.tight_layout()
    return (f"The {len(rows)} measures with the highest Ψ over {data['n_included']} models: "
            "Kendall τ with the gap, granulated Ψ and each ψ_i (– where the grid does not vary "
            "that hyperparameter), the conditional-MI score and the hyperparameters it "
            "conditions on at its minimum", fig)


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    import matplotlib.pyplot as plt

    rows = [r for r in table.to_pylist() if r.get("psi") is not None
            and not (math.isnan(r["tau"]) and math.isnan(r["psi"]))]
    out: list[tuple[str, Figure]] = []
    if not rows:
        return out
    fig, ax = plt.subplots(figsize=(7, 0.22 * len(rows) + 1.2))
    y = np.arange(len(rows))
    ax.barh(y - 0.2, [r["oriented_tau"] for r in rows], height=0.4, label="sign·τ",
            color="tab:blue")
    ax.barh(y + 0.2, [r["oriented_psi"] for r in rows], height=0.4, label="sign·Ψ",
            color="tab:orange")
    ax.set_yticks(y, [r["measure"] + (" (−)" if r["sign"] < 0 else "") for r in rows],
                  fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set_xlabel("rank correlation with the gap (> 0: as the measure's paper predicts)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    out.append((f"Kendall τ and granulated Ψ of every measure with the generalization gap, "
                f"{data['n_included']} models ({data['n_excluded']} excluded); ordered by Ψ; "
                "(−): a measure predicted to fall as the gap grows, shown sign-flipped", fig))

    out.append(_table_figure(rows[:TABLE_ROWS], data))
    top = [r["measure"] for r in rows if not math.isnan(r["oriented_psi"])][:TOP_SCATTER]
    included = {n: m for n, m in data["runs"].items() if m["included"]}
    if top and included:
        fig, axes = plt.subplots(1, len(top), figsize=(3.2 * len(top), 3.0), squeeze=False)
        depths = sorted({m["depth"] for m in included.values()})
        cmap = plt.get_cmap("viridis")
        for ax, name in zip(axes[0], top, strict=False):
            for i, depth in enumerate(depths):
                pts = [(measure_value(m["measures"].get(name)), m["gap"])
                       for m in included.values() if m["depth"] == depth]
                pts = [(x, g) for x, g in pts if math.isfinite(x)]
                ax.scatter([x for x, _ in pts], [g for _, g in pts], s=14, alpha=0.8,
                           color=cmap(i / max(1, len(depths) - 1)), label=f"depth {depth}")
            finite = [measure_value(m["measures"].get(name)) for m in included.values()]
            finite = [x for x in finite if math.isfinite(x)]
            if finite and min(finite) > 0 and max(finite) / min(finite) > 100:
                ax.set_xscale("log")
            row = next(r for r in rows if r["measure"] == name)
            ax.set_title(f"{name}\nτ = {row['tau']:.2f}, Ψ = {row['psi']:.2f}", fontsize=8)
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("gap (train acc − test acc)")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        out.append((f"The generalization gap against each of the top {len(top)} measures by Ψ, "
                    "one point per included model", fig))
    return out


SPEC = StudySpec(
    entry=STUDY,
    synthesize=synthesize,
    train_run=train_run,
    train_group=train_group,
    summarize=summarize,
    figures=figures,
)
