"""``genlab <stage> ...``: thin shells that parse paths, call the library and write artifacts.

Every input and output path is an argument (the workflow passes them); this is the only layer that
touches disk. Each stage validates ``params.yaml`` before doing anything else, so a bad file
fails before anything is written.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from genlab import __version__
from genlab.config import Params, ParamsError, load_params, params_json_schema, settings_hash
from genlab.io import ArtifactError
from genlab.paths import LOGS

if TYPE_CHECKING:
    import pyarrow as pa

    from genlab.studies.base import PlotSpec

log = logging.getLogger("genlab")

SCHEMA_PATH = Path("workflow/schemas/params.schema.json")
# Post-hoc analyses of each trained model (`genlab analyze <name>`), with the per-run tables each
# writes (OUT/<run>_<table>.parquet), which the aggregate stacks into <name>_<table>.parquet.
ANALYSES: dict[str, tuple[str, ...]] = {"sharpness": ("density",), "intrinsic_dim": ("layers",)}


def _setup(args: argparse.Namespace) -> Params:
    params = load_params(args.params)
    logging.basicConfig(level=params.runtime.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return params


def _study(params: Params, name: str):  # -> (StudySpec, study settings)
    from genlab.studies import STUDIES

    settings = params.study(name)  # first: an unknown name is a ParamsError naming the choices
    return STUDIES[name], settings


def stage_settings(config: Any, stage: str, run: str | None = None) -> dict[str, Any]:
    """Exactly the settings a stage reads, which are the params dvc.yaml tracks for it (a test
    checks the two agree): what its sidecar records, so an artifact's provenance is the same
    whether it was made in a fresh run or kept from an earlier one."""
    if stage == "synthesize":
        return {"data": config.data.model_dump(mode="json")}
    if stage in ANALYSES:  # the recipe and runs (a run's loss and step size), and its own block
        recipe = config.model_dump(mode="json", exclude={"description", "data", "model",
                                                         "analyses"})
        block = getattr(config.analyses, stage).model_dump(mode="json")
        return {**recipe, f"analyses.{stage}": block}
    if stage == "train":  # not what only the report reads (a study's REPORT_ONLY fields)
        report_only = set(getattr(config, "REPORT_ONLY", ()))
        settings = config.model_dump(mode="json", exclude={"runs", "description", "analyses",
                                                           *report_only})
        if run is None:  # a group stage: the whole sweep
            return {**settings, "runs": config.model_dump(mode="json")["runs"]}
        return {**settings, "run": config.runs[run].model_dump(mode="json")}
    return config.model_dump(mode="json")


def _provenance(settings: dict[str, Any], device: str, seed: int | None = None) -> dict:
    from genlab.provenance import provenance

    return provenance(settings, settings_hash(settings), device, seed)


# --------------------------------------------------------------------------------------------
# Stages.
# --------------------------------------------------------------------------------------------


def cmd_check_params(args: argparse.Namespace) -> int:
    params = load_params(args.file)
    studies = params.declared_studies()
    runs = sum(len(s.runs) for s in studies.values())
    print(f"{args.file}: valid (scale {params.scale}; {len(studies)} studies, {runs} runs)")
    if args.stamp:
        from genlab.io import write_text

        # Constant content: a valid edit must not look like a change to the stages behind it.
        write_text(args.stamp, "params.yaml is valid\n")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from genlab.io import dumps_json, write_text

    text = dumps_json(params_json_schema())
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale: run `genlab schema`", file=sys.stderr)
            return 1
        return 0
    write_text(args.out, text)
    return 0


def cmd_synthesize(args: argparse.Namespace) -> int:
    from genlab.data.dataset import dataset_to_tables
    from genlab.io import write_json, write_parquet

    params = _setup(args)
    spec, config = _study(params, args.study)
    t0 = time.perf_counter()
    dataset = spec.synthesize(config)
    train, test = dataset_to_tables(dataset)
    write_parquet(args.out / "train.parquet", train)
    write_parquet(args.out / "test.parquet", test)
    write_json(args.out / "dataset.json", {
        **dataset.info, "n_train": train.num_rows, "n_test": test.num_rows,
        "provenance": _provenance(stage_settings(config, "synthesize"), "cpu", config.data.seed)})
    log.info("synthesized %s: %d train, %d test in %.1fs", args.study, train.num_rows,
             test.num_rows, time.perf_counter() - t0)
    return 0


def _load_dataset(folder: Path):
    from genlab.data.dataset import dataset_from_tables
    from genlab.io import read_json, read_parquet

    return dataset_from_tables(read_parquet(folder / "train.parquet"),
                               read_parquet(folder / "test.parquet"),
                               read_json(folder / "dataset.json"))


def cmd_train(args: argparse.Namespace) -> int:
    from genlab.device import configure_torch, describe_device, resolve_device

    params = _setup(args)
    spec, config = _study(params, args.study)
    if args.run is not None and args.run not in config.runs:
        raise ParamsError(f"studies.{args.study}.runs.{args.run}: no such run; declared: "
                          f"{sorted(config.runs)}")
    configure_torch(params.runtime.threads)
    device = resolve_device(params.runtime.device)
    dataset = _load_dataset(args.dataset)
    t0 = time.perf_counter()
    if args.run is None:  # the whole sweep, into runs/<run>/
        runs = list(config.runs)
        if spec.train_group is not None:
            results = spec.train_group(config, runs, dataset, device)
        else:
            results = {run: spec.train_run(config, run, dataset, device, None) for run in runs}
        folders = {run: args.out / run for run in runs}
    else:
        checkpoints = CheckpointFolder(args.out / ".checkpoint",
                                       settings_hash(stage_settings(config, "train", args.run)))
        results = {args.run: spec.train_run(
            config, args.run, dataset, device,
            checkpoints.checkpointing(params.runtime.checkpoint_minutes, device))}
        folders = {args.run: args.out}
    elapsed = time.perf_counter() - t0
    for run, result in results.items():
        _write_run(folders[run], result, config, run, describe_device(device))
        log.info("trained %s/%s on %s: %s", args.study, run, describe_device(device),
                 result.metrics["status"])
    if args.run is not None:
        checkpoints.remove()
    log.info("trained %d run(s) of %s in %.1fs", len(results), args.study, elapsed)
    return 0


def _write_run(folder: Path, result: Any, config: Any, run: str, device: str) -> None:
    """A run's four artifacts; its sidecar records the settings of this run alone."""
    from genlab.io import write_json, write_parquet, write_safetensors

    prov = _provenance(stage_settings(config, "train", run), device, config.runs[run].seed)
    prov["run"] = run
    sha256 = write_safetensors(folder / "model.safetensors", result.weights)
    write_json(folder / "model.json", {**result.model_spec, "provenance": prov,
                                       "weights_sha256": sha256})
    write_parquet(folder / "history.parquet", result.history)
    write_json(folder / "metrics.json", result.metrics)


def cmd_analyze(args: argparse.Namespace) -> int:
    """One post-hoc analysis of every run of a study: OUT/<run>.json (numbers, or why the run
    was skipped) and, where the analysis has a table, OUT/<run>_<table>.parquet."""
    from genlab.device import configure_torch, describe_device, resolve_device
    from genlab.io import read_json, write_json, write_parquet
    from genlab.models.registry import load_model, seeded_model_from_spec

    params = _setup(args)
    spec, config = _study(params, args.study)
    if spec.objective is None:
        raise ParamsError(f"studies.{args.study}: this study has no post-hoc analyses")
    settings = getattr(config.analyses, args.analysis)
    if settings is None:
        raise ParamsError(f"studies.{args.study}.analyses.{args.analysis}: not set, so there is "
                          "nothing to run (set it, or drop the stage from dvc.yaml)")
    configure_torch(params.runtime.threads)
    device = resolve_device(params.runtime.device)
    dataset = _load_dataset(args.dataset)
    prov = _provenance(stage_settings(config, args.analysis), describe_device(device))
    for run in config.runs:  # only the declared runs: a leftover folder is ignored
        folder = args.runs / run
        metrics = read_json(folder / "metrics.json")
        t0 = time.perf_counter()
        if metrics["status"] == "diverged":
            record: dict[str, Any] = {
                "status": "skipped",
                "reason": f"the run diverged at step {metrics.get('diverged_step')}"}
            tables = {}
        else:
            model_json = read_json(folder / "model.json")
            model = load_model(model_json, folder / "model.safetensors").to(device)
            objective = spec.objective(config, run, dataset, device)

            def untrained(spec_=model_json, seed=config.runs[run].seed):
                # every study seeds its model's init with the run seed (build_seeded_model)
                return seeded_model_from_spec(spec_, seed, device)

            record, tables = ANALYZERS[args.analysis](model, objective, settings, untrained)
        for name, table in tables.items():
            write_parquet(args.out / f"{run}_{name}.parquet", table)
        write_json(args.out / f"{run}.json", {**record, "provenance": {**prov, "run": run}})
        log.info("%s of %s/%s: %s in %.1fs", args.analysis, args.study, run,
                 record.get("status", "done"), time.perf_counter() - t0)
    return 0


def _sharpness_record(model: Any, objective: Any, settings: Any,
                      untrained: Callable[[], Any]) -> tuple[dict, dict]:
    import pyarrow as pa

    from genlab.analyses.sharpness_analysis import analyze_sharpness

    result = analyze_sharpness(model, objective.loss_fn, objective.X, objective.y, settings,
                               objective.lr, objective.momentum, objective.batch_size)
    top, trace, density = result.top, result.trace, result.density
    record = {
        "status": "done", "curvature": settings.curvature,
        "n_examples": result.n_examples, "n_parameters": result.n_parameters,
        "lr": objective.lr, "momentum": objective.momentum,
        "batch_size": objective.batch_size, "weight_decay": objective.weight_decay,
        "threshold": result.threshold,
        "top_eigenvalues": list(top.eigenvalues),
        "top_residual_norms": list(top.residual_norms), "lanczos_iterations": top.iterations,
        "lambda_max": top.eigenvalues[0], "lambda_over_threshold": result.lambda_over_threshold,
        "trace": trace.estimate, "trace_stderr": trace.standard_error,
        "trace_method": trace.method, "trace_num_matvecs": trace.num_matvecs,
        "trace_over_threshold": result.trace_over_threshold,
        "density_sigma": density.sigma,
    }
    if (worst := result.worst_case) is not None:
        record |= {"worst_case_sharpness": worst.sharpness, "sam_sharpness": worst.sam_sharpness,
                   "worst_case_rho": worst.rho, "worst_case_adaptive": worst.adaptive,
                   "worst_case_evaluations": worst.num_evaluations}
    if (spread := result.nonuniformity) is not None:
        record |= {"nonuniformity": spread.nonuniformity,
                   "nonuniformity_sharpness": spread.sharpness,
                   "nonuniformity_ratio": result.nonuniformity_ratio,
                   "nonuniformity_residual": spread.variance_residual}
    table = pa.table({"eigenvalue": density.grid.cpu().double().numpy(),
                      "density": density.density.cpu().double().numpy()})
    return record, {"density": table}


def _intrinsic_dim_record(model: Any, objective: Any, settings: Any,
                          untrained: Callable[[], Any]) -> tuple[dict, dict]:
    import pyarrow as pa

    from genlab.analyses.intrinsic_dim import label_sharpness
    from genlab.analyses.representations import layer_ids
    from genlab.analyses.sharpness import subsample
    from genlab.seeding import torch_generator

    X, y = subsample(objective.X, objective.y, settings.max_examples, settings.seed)
    trained, init = layer_ids(model, X, settings), layer_ids(untrained(), X, settings)
    record: dict[str, Any] = {
        "status": "done", "estimator": settings.estimator, "n_examples": len(X),
        "d_data": trained[0].dimension, "input_width": trained[0].width,
        "last_hidden_trained": trained[-2].dimension, "last_hidden_init": init[-2].dimension,
        "layer_ids_trained": [layer.dimension for layer in trained],
        "layer_ids_init": [layer.dimension for layer in init],
    }
    if not objective.y.is_floating_point():  # classification: K_F of the labels trained on
        sharp = label_sharpness(objective.X, objective.y, settings.label_sharpness_samples,
                                torch_generator(settings.seed, "intrinsic_dim", "label-sharpness",
                                                device=objective.X.device.type))
        record |= {"label_sharpness": sharp.value, "label_sharpness_samples": sharp.num_samples,
                   "label_sharpness_input_rms": sharp.input_rms}
    table = pa.table({
        "layer": [layer.index for layer in trained], "name": [layer.name for layer in trained],
        "width": [layer.width for layer in trained],
        "id_trained": [layer.dimension for layer in trained],
        "id_init": [layer.dimension for layer in init],
        "distinct_trained": [layer.n_distinct for layer in trained],
        "distinct_init": [layer.n_distinct for layer in init]})
    return record, {"layers": table}


ANALYZERS: dict[str, Callable[[Any, Any, Any, Callable[[], Any]], tuple[dict, dict]]] = {
    "sharpness": _sharpness_record, "intrinsic_dim": _intrinsic_dim_record}


class CheckpointFolder:
    """A run's checkpoint beside its outputs: tensors, then the JSON that vouches for them.

    Each save writes its tensors to a new file (``state-<step>-<token>.safetensors``), then
    ``state.json`` naming that file, its sha256 and the stage settings' hash, and only then
    removes the older tensors files: a job killed at any moment leaves the JSON naming a complete
    file, so the last checkpoint is never lost (overwriting one file in place lost it whenever the
    kill fell between the two writes). A checkpoint whose files disagree or whose settings differ
    is not used.
    """

    TENSORS = re.compile(r"state-\d+-[0-9a-f]{8}\.safetensors")

    def __init__(self, folder: Path, settings_sha256: str) -> None:
        self.folder, self.settings_sha256 = folder, settings_sha256

    def load(self, device):  # -> Checkpoint | None
        from genlab.io import ArtifactError, read_json, read_safetensors
        from genlab.train.checkpoint import from_records

        meta_path = self.folder / "state.json"
        if not meta_path.exists():
            return None
        meta = read_json(meta_path)
        name = str(meta.get("tensors_file", ""))
        tensors = None
        if (meta.get("settings_sha256") == self.settings_sha256 and "tensors_sha256" in meta
                and self.TENSORS.fullmatch(name)):  # a bare name: nothing outside the folder
            with contextlib.suppress(ArtifactError):  # tensors not the ones the JSON vouches for
                tensors = read_safetensors(self.folder / name, meta["tensors_sha256"])
        if tensors is None:
            log.warning("ignoring checkpoint %s: made with other settings or incomplete",
                        self.folder)
            return None
        log.info("resuming from the checkpoint at step %d", meta["step"])
        return from_records(tensors, meta, device)

    def checkpointing(self, minutes: float, device):  # -> Checkpointing
        from genlab.io import write_json, write_safetensors
        from genlab.train.checkpoint import to_records
        from genlab.train.loop import Checkpointing

        last = [time.monotonic()]

        def save(ckpt) -> None:
            tensors, meta = to_records(ckpt)
            name = f"state-{ckpt.step}-{secrets.token_hex(4)}.safetensors"
            meta |= {"settings_sha256": self.settings_sha256, "tensors_file": name,
                     "tensors_sha256": write_safetensors(self.folder / name, tensors)}
            write_json(self.folder / "state.json", meta)
            for older in self.folder.glob("state-*.safetensors"):
                if older.name != name:
                    older.unlink(missing_ok=True)
            last[0] = time.monotonic()
            log.info("checkpoint at step %d", ckpt.step)

        return Checkpointing(save=save, due=lambda step: time.monotonic() - last[0] >= minutes * 60,
                             resume=self.load(device))

    def remove(self) -> None:
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)


def cmd_aggregate(args: argparse.Namespace) -> int:
    from genlab.io import read_json, read_parquet, write_json, write_parquet

    params = _setup(args)
    spec, config = _study(params, args.study)
    # Only the runs params.yaml declares: a folder left over from an older grid is ignored.
    metrics, histories = {}, {}
    for run in config.runs:
        folder = args.runs / run
        metrics[run] = read_json(folder / "metrics.json")
        histories[run] = read_parquet(folder / "history.parquet")
    summary = spec.summarize(config, metrics, histories)
    analyses = _gather_analyses(args.analyses, config, args.out)
    write_parquet(args.out / "summary.parquet", summary.table)
    write_plots(spec.plots, summary.table, args.out)
    write_json(args.out / "summary.json", {
        **summary.data, "claims": [c.to_json() for c in summary.claims], **analyses,
        "provenance": _provenance(stage_settings(config, "aggregate"), "cpu")})
    for claim in summary.claims:
        log.info("%s: %s -- %s", args.study, claim.status, claim.claim)
    return 0


def write_plots(plots: Sequence[PlotSpec], table: pa.Table, out: Path) -> None:
    """Each plot's CSV export of the summary table, under OUT (the study folder), for DVC's
    ``plots:``: the table itself stays Parquet, DVC reads only CSV/TSV/JSON/YAML."""
    from genlab.io import write_csv
    from genlab.studies.base import plot_table

    for plot in plots:
        write_csv(out / plot.file, plot_table(plot, table))


def _gather_analyses(folder: Path | None, config: Any, out: Path) -> dict[str, Any]:
    """Each enabled analysis' per-run numbers for summary.json (``{"analyses": {name: {run:
    …}}}``) and its per-run tables stacked into OUT/<name>_<table>.parquet with a ``run``
    column."""
    import pyarrow as pa

    from genlab.io import read_json, read_parquet, write_parquet

    if folder is None:
        return {}
    found: dict[str, Any] = {}
    for name in ANALYSES:
        if getattr(config.analyses, name, None) is None:
            continue
        records, tables = {}, {}
        for run in config.runs:
            record = read_json(folder / name / f"{run}.json")
            record.pop("provenance")
            records[run] = record
            for path in sorted((folder / name).glob(f"{run}_*.parquet")):
                table = read_parquet(path)
                table = table.append_column("run", pa.array([run] * table.num_rows))
                tables.setdefault(path.stem.removeprefix(f"{run}_"), []).append(table)
        found[name] = records
        for table_name in ANALYSES[name]:  # every declared table, empty if all runs were skipped
            parts = tables.get(table_name)
            write_parquet(out / f"{name}_{table_name}.parquet",
                          pa.concat_tables(parts) if parts else pa.table({"run": pa.array(
                              [], pa.string())}))
    return {"analyses": found} if found else {}


def cmd_report(args: argparse.Namespace) -> int:
    from genlab.io import write_json, write_text
    from genlab.report.collect import collect
    from genlab.report.render import render_html

    params = _setup(args)
    # the stage logs sit beside the report folder (logs/ beside reports/, genlab.paths); they are
    # read for wall times only, so they are not a DVC dependency
    logs = args.logs if args.logs is not None else args.out.parent / LOGS
    report = collect(params, {d.name: d for d in args.studies}, logs=logs)
    write_text(args.out / "index.html", render_html(report))
    write_json(args.out / "claims.json", {"claims": [c for c in report.claims]})
    print(f"report written to {args.out / 'index.html'}")
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    from genlab.sync import sync

    return sync(Path.cwd(), dry_run=args.dry_run)


def cmd_verify_cache(args: argparse.Namespace) -> int:
    from genlab.cache_check import verify_cache

    return verify_cache(Path.cwd(), repair=args.repair)


# --------------------------------------------------------------------------------------------
# Argument parsing.
# --------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="genlab", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"genlab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="<stage>")

    def add(name: str, func: Callable[[argparse.Namespace], int], help_: str,
            *args_spec: tuple[str, dict]) -> None:
        p = sub.add_parser(name, help=help_, description=help_)
        for flag, kwargs in args_spec:
            p.add_argument(flag, **kwargs)
        p.set_defaults(func=func)

    params = ("--params", {"type": Path, "default": Path("params.yaml")})
    study = ("--study", {"required": True})
    out = ("--out", {"type": Path, "required": True, "help": "output folder"})
    add("check-params", cmd_check_params, "validate a params file and exit",
        ("file", {"type": Path, "nargs": "?", "default": Path("params.yaml")}),
        ("--stamp", {"type": Path, "help": "on success, write this marker file (the DVC gate)"}))
    add("schema", cmd_schema, "write (or --check) the JSON schema of params.yaml",
        ("--out", {"type": Path, "default": SCHEMA_PATH}),
        ("--check", {"action": "store_true", "help": "fail if the file is stale"}))
    add("synthesize", cmd_synthesize, "generate a study's dataset", params, study, out)
    add("train", cmd_train, "train one run of a study, or with no --run all of them (at once "
        "where the study has a vectorised group trainer) into OUT/<run>/", params, study,
        ("--run", {"help": "one run id; omit it to train the whole sweep"}),
        ("--dataset", {"type": Path, "required": True}), out)
    add("analyze", cmd_analyze, "one post-hoc analysis of every run of a study, into "
        "OUT/<run>.json", ("analysis", {"choices": sorted(ANALYSES)}), params, study,
        ("--dataset", {"type": Path, "required": True}),
        ("--runs", {"type": Path, "required": True, "help": "the study's runs folder"}), out)
    add("aggregate", cmd_aggregate, "summarise a study's runs and check its claims", params,
        study, ("--runs", {"type": Path, "required": True}),
        ("--analyses", {"type": Path, "help": "the study's analyses folder, if it has one"}),
        out)
    add("report", cmd_report, "render reports/index.html and reports/claims.json", params,
        ("--studies", {"type": Path, "nargs": "+", "required": True,
                       "help": "study folders holding summary.{json,parquet}"}), out,
        ("--logs", {"type": Path, "help": "stage logs to read wall times from "
                                          "(default: logs/ beside the --out folder)"}))
    add("sync", cmd_sync, "after dvc repro/pull: record DVC's outputs as Snakemake's, "
        "so `snakemake -n` has nothing to do (refuses unless `dvc status` is clean)",
        ("--dry-run", {"action": "store_true"}))
    add("verify-cache", cmd_verify_cache, "hash every object of the local DVC cache against its "
        "name (DVC trusts read-only objects unhashed); exit 1 if one is damaged",
        ("--repair", {"action": "store_true", "help": "delete the damaged objects and the "
                      "outputs checked out from them, then `dvc pull` them again"}))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    t0 = time.perf_counter()
    try:
        code = args.func(args)
        # the closing line of the stage's log, which the report's wall-time table reads (wall time
        # goes to logs, never to an artifact: see genlab.provenance)
        log.info("genlab %s: wall time %.2f s", args.command, time.perf_counter() - t0)
        return code
    except (ParamsError, ArtifactError) as exc:
        print(f"genlab {args.command}: error: {exc}", file=sys.stderr)
        return 2
