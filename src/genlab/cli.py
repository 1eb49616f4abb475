"""``genlab <stage> ...``: thin shells that parse paths, call the library and write artifacts.

Every input and output path is an argument (the workflow passes them); this is the only layer that
touches disk. Each stage validates ``params.yaml`` before doing anything else, so a bad file
fails before anything is written.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from genlab import __version__
from genlab.config import Params, ParamsError, load_params, params_json_schema, settings_hash
from genlab.io import ArtifactError

log = logging.getLogger("genlab")

SCHEMA_PATH = Path("workflow/schemas/params.schema.json")


def _setup(args: argparse.Namespace) -> Params:
    params = load_params(args.params)
    logging.basicConfig(level=params.runtime.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return params


def _study(params: Params, name: str):  # -> (StudySpec, study settings)
    from genlab.studies import STUDIES

    return STUDIES[name], params.study(name)


def stage_settings(config: Any, stage: str, run: str | None = None) -> dict[str, Any]:
    """Exactly the settings a stage reads, which are the params dvc.yaml tracks for it (a test
    checks the two agree): what its sidecar records, so an artifact's provenance is the same
    whether it was made in a fresh run or kept from an earlier one."""
    if stage == "synthesize":
        return {"data": config.data.model_dump(mode="json")}
    if stage == "train":
        settings = config.model_dump(mode="json", exclude={"runs", "description"})
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
    from safetensors.torch import save_file

    from genlab.io import write_json, write_parquet, write_with

    prov = _provenance(stage_settings(config, "train", run), device, config.runs[run].seed)
    prov["run"] = run
    write_with(folder / "model.safetensors", lambda tmp: save_file(result.weights, str(tmp)))
    write_json(folder / "model.json", {**result.model_spec, "provenance": prov})
    write_parquet(folder / "history.parquet", result.history)
    write_json(folder / "metrics.json", result.metrics)


class CheckpointFolder:
    """A run's checkpoint beside its outputs: tensors, then the JSON that vouches for them.

    The JSON names the tensors file's sha256 and the stage settings' hash; a checkpoint whose
    files disagree (killed between the two writes) or whose settings differ is not used.
    """

    def __init__(self, folder: Path, settings_sha256: str) -> None:
        self.folder, self.settings_sha256 = folder, settings_sha256

    def load(self, device):  # -> Checkpoint | None
        import hashlib

        from safetensors.torch import load_file

        from genlab.io import read_json
        from genlab.train.checkpoint import from_records

        tensors_path, meta_path = self.folder / "state.safetensors", self.folder / "state.json"
        if not (tensors_path.exists() and meta_path.exists()):
            return None
        meta = read_json(meta_path)
        digest = hashlib.sha256(tensors_path.read_bytes()).hexdigest()
        if meta.get("settings_sha256") != self.settings_sha256 or meta.get("tensors_sha256") != \
                digest:
            log.warning("ignoring checkpoint %s: made with other settings or incomplete",
                        self.folder)
            return None
        log.info("resuming from the checkpoint at step %d", meta["step"])
        return from_records(load_file(str(tensors_path)), meta, device)

    def checkpointing(self, minutes: float, device):  # -> Checkpointing
        import hashlib

        from safetensors.torch import save_file

        from genlab.io import write_json, write_with
        from genlab.train.checkpoint import to_records
        from genlab.train.loop import Checkpointing

        last = [time.monotonic()]

        def save(ckpt) -> None:
            tensors, meta = to_records(ckpt)
            path = self.folder / "state.safetensors"
            write_with(path, lambda tmp: save_file(tensors, str(tmp)))
            meta |= {"settings_sha256": self.settings_sha256,
                     "tensors_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
            write_json(self.folder / "state.json", meta)
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
    write_parquet(args.out / "summary.parquet", summary.table)
    write_json(args.out / "summary.json", {
        **summary.data, "claims": [c.to_json() for c in summary.claims],
        "provenance": _provenance(stage_settings(config, "aggregate"), "cpu")})
    for claim in summary.claims:
        log.info("%s: %s -- %s", args.study, claim.status, claim.claim)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from genlab.io import write_json, write_text
    from genlab.report.collect import collect
    from genlab.report.render import render_html

    params = _setup(args)
    report = collect(params, {d.name: d for d in args.studies})
    write_text(args.out / "index.html", render_html(report))
    write_json(args.out / "claims.json", {"claims": [c for c in report.claims]})
    print(f"report written to {args.out / 'index.html'}")
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    from genlab.sync import sync

    return sync(Path.cwd(), dry_run=args.dry_run)


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
    add("aggregate", cmd_aggregate, "summarise a study's runs and check its claims", params,
        study, ("--runs", {"type": Path, "required": True}), out)
    add("report", cmd_report, "render reports/index.html and reports/claims.json", params,
        ("--studies", {"type": Path, "nargs": "+", "required": True,
                       "help": "study folders holding summary.{json,parquet}"}), out)
    add("sync", cmd_sync, "after dvc repro/pull: record DVC's outputs as Snakemake's, "
        "so `snakemake -n` has nothing to do (refuses unless `dvc status` is clean)",
        ("--dry-run", {"action": "store_true"}))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except (ParamsError, ArtifactError) as exc:
        print(f"genlab {args.command}: error: {exc}", file=sys.stderr)
        return 2
