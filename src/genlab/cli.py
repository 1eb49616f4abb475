"""``genlab <stage> ...``: the command line, thin on purpose.

Every input and output path is an argument (the workflow passes them). Each pipeline stage is a
module of :mod:`genlab.stages` (each tool command one of :mod:`genlab.workflow`), imported by name
when its command runs: a stage's code dependencies are then the import closure of its own module
(:mod:`genlab.workflow.code_deps`), never of every stage. Each stage validates ``params.yaml``
before doing anything else, so a bad file fails before anything is written.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from genlab import __version__, timing
from genlab.analyses.registry import ANALYSES
from genlab.config import ParamsError, params_json_schema
from genlab.io import ArtifactError, dumps_json, write_text

log = logging.getLogger("genlab")

SCHEMA_PATH = Path("workflow/schemas/params.schema.json")

STAGE_MODULES: dict[str, str] = {
    "check-params": "genlab.stages.check_params", "synthesize": "genlab.stages.synthesize",
    "train": "genlab.stages.train",
    "analyze": "genlab.stages.analyze", "aggregate": "genlab.stages.aggregate",
    "report": "genlab.stages.report", "sync": "genlab.workflow.sync",
    "verify-cache": "genlab.workflow.cache_check", "dag": "genlab.workflow.generate",
    "preset": "genlab.presets", "claims": "genlab.report.tally",
    "results": "genlab.report.results", "code-digests": "genlab.workflow.code_digest",
}
"""The command -> the module whose ``run(args)`` implements it (imported only when it runs)."""


def cmd_schema(args: argparse.Namespace) -> int:
    text = dumps_json(params_json_schema())
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale: run `genlab schema`", file=sys.stderr)
            return 1
        return 0
    write_text(args.out, text)
    return 0


def _stage(command: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        return importlib.import_module(STAGE_MODULES[command]).run(args)
    return run


# --------------------------------------------------------------------------------------------
# Argument parsing.
# --------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="genlab", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"genlab {__version__}")
    parser.add_argument("--stage", help="run as this dvc.yaml stage: on success, stamp its "
                        "outputs with the inputs they were computed from "
                        "(genlab.workflow.fingerprint)")
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
    add("check-params", _stage("check-params"), "validate a params file and exit",
        ("file", {"type": Path, "nargs": "?", "default": Path("params.yaml")}),
        ("--stamp", {"type": Path, "help": "on success, write this marker file (the DVC gate)"}),
        ("--layout", {"help": "the layout digest dvc.yaml was generated for (the DVC gate): "
                      "fail if the file's studies and analyses give another"}))
    add("schema", cmd_schema, "write (or --check) the JSON schema of params.yaml",
        ("--out", {"type": Path, "default": SCHEMA_PATH}),
        ("--check", {"action": "store_true", "help": "fail if the file is stale"}))
    add("synthesize", _stage("synthesize"), "generate a study's data draws, each seed's into "
        "OUT/s<seed>/", params, study,
        ("--seed", {"type": int, "help": "only this seed's draws (one DVC stage each)"}), out)
    add("train", _stage("train"), "train one run of a study, or with no --run all of them (at once "
        "where the study has a vectorised group trainer) into OUT/<run>/", params, study,
        ("--run", {"help": "one run id; omit it to train the whole sweep"}),
        ("--seed", {"type": int, "nargs": "+", "help": "without --run: only these seeds' runs "
                    "(a grouped study's DVC stage trains a block of seeds)"}),
        ("--dataset", {"type": Path, "required": True}), out)
    add("analyze", _stage("analyze"), "one post-hoc analysis of every run of a study, into "
        "OUT/<run>.json", ("analysis", {"choices": sorted(ANALYSES)}), params, study,
        ("--dataset", {"type": Path, "required": True}),
        ("--runs", {"type": Path, "required": True, "help": "the study's runs folder"}), out)
    add("aggregate", _stage("aggregate"), "summarise a study's runs and check its claims", params,
        study, ("--runs", {"type": Path, "required": True}),
        ("--analyses", {"type": Path, "help": "the study's analyses folder, if it has one"}),
        out)
    add("report", _stage("report"), "render reports/index.html and reports/claims.json", params,
        ("--studies", {"type": Path, "nargs": "+", "required": True,
                       "help": "study folders holding summary.{json,parquet}"}), out,
        ("--logs", {"type": Path, "help": "stage logs to read wall times from "
                                          "(default: logs/ beside the --out folder)"}))
    add("claims", _stage("claims"), "count reports/claims.json's literature claims and controls "
        "apart, and name the literature claims not reproduced or inconclusive",
        ("claims", {"nargs": "?", "default": "reports/claims.json"}))
    add("results", _stage("results"), "every claim's estimate, interval, n, rule and verdict as "
        "a Markdown page, with the commit and date it was measured at (the README's results)",
        ("claims", {"nargs": "?", "default": "reports/claims.json"}),
        ("--out", {"type": Path, "help": "write the page here (e.g. docs/results.md); "
                   "default: print it"}))
    add("code-digests", _stage("code-digests"), "write data/code/: one digest per genlab source "
        "file, comments, docstrings and layout left out, and one per module's import closure "
        "(what the stages depend on)")
    add("sync", _stage("sync"), "after dvc repro/pull/checkout: set the mtimes Snakemake judges "
        "by to what the stages' stamps say, and print each stale stage with its reason")
    add("verify-cache", _stage("verify-cache"), "hash every object of the local DVC cache "
        "against its name (DVC trusts read-only objects unhashed); exit 1 if one is damaged",
        ("--repair", {"action": "store_true", "help": "delete the damaged objects and the "
                      "outputs checked out from them, then `dvc pull` them again"}))
    add("dag", _stage("dag"), "dvc.yaml from the study and analysis registries and params.yaml: "
        "print it, --write it or --check that it is current", params,
        ("--out", {"type": Path, "default": Path("dvc.yaml")}),
        ("--write", {"action": "store_true", "help": "write the file (if it changed)"}),
        ("--check", {"action": "store_true", "help": "fail if the file is stale"}))
    add("preset", _stage("preset"), "a size preset's full params file: params.yaml with "
        "workflow/presets/NAME.yaml's overrides applied; print it, or write it with --out",
        ("name", {"help": "the preset: ci or paper (workflow/presets/NAME.yaml)"}),
        ("--out", {"type": Path, "help": "write it here (--out params.yaml switches presets; "
                   "`git checkout params.yaml` goes back)"}))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.stage is None:
            return _run(args)
        from genlab.stages.stage_run import StageRun

        with StageRun(args.stage) as stage:
            code = _run(args)
            if code == 0:
                stage.succeeded()
            return code
    except KeyboardInterrupt:  # in the command, before it started, or while stamping
        print(INTERRUPTED.format(command=args.command), file=sys.stderr)
        return 130


INTERRUPTED = ("genlab {command}: interrupted (its outputs are not stamped, so both engines "
               "will run it again)")


def _run(args: argparse.Namespace) -> int:
    t0, started = time.perf_counter(), time.time()
    try:
        code = args.func(args)
        if args.stage is not None:  # a pipeline stage: where its process's time went
            process, start_up, writing = timing.summary(started)
            log.info("genlab %s: process %.2f s: start-up %.2f s, writing %.2f s", args.command,
                     process, start_up, writing)
        # the closing line of the stage's log, which the report's wall-time table reads (wall time
        # goes to logs, never to an artifact: see genlab.provenance)
        log.info("genlab %s: wall time %.2f s", args.command, time.perf_counter() - t0)
        return code
    except (ParamsError, ArtifactError) as exc:
        print(f"genlab {args.command}: error: {exc}", file=sys.stderr)
        return 2
