"""``genlab analyze <analysis>``: one post-hoc analysis of every run of a study, into
``OUT/<run>.json`` (numbers, or why the run was skipped) and, where the analysis has tables,
``OUT/<run>_<table>.parquet``. Which analysis runs comes from the registry
(:mod:`genlab.analyses.registry`); its function is imported by name, so this module does not
depend on any analysis' code. A run is skipped, with the reason, when it diverged or when the
study gives it no training objective (a run that trains no network, or saves none that
:func:`genlab.models.registry.load_model` rebuilds)."""

from __future__ import annotations

import argparse
import importlib
import time
from typing import Any

from genlab.analyses.registry import ANALYSES
from genlab.config import ParamsError
from genlab.device import configure_torch, describe_device, resolve_device
from genlab.io import read_json, write_json, write_parquet
from genlab.models.registry import MODELS, load_model, seeded_model_from_spec
from genlab.progress import progress
from genlab.stages.common import DatasetDraws, log, provenance, setup, study
from genlab.stages.settings import stage_settings


def run(args: argparse.Namespace) -> int:
    params = setup(args)
    spec, config = study(params, args.study)
    if spec.objective is None:
        raise ParamsError(f"studies.{args.study}: this study has no post-hoc analyses")
    settings = getattr(config.analyses, args.analysis)
    if settings is None:
        raise ParamsError(f"studies.{args.study}.analyses.{args.analysis}: not set, so there is "
                          "nothing to run (set it, then `genlab dag --write`)")
    module, _, function = ANALYSES[args.analysis].record.partition(":")
    record_fn = getattr(importlib.import_module(module), function)
    configure_torch(params.runtime.threads)
    device = resolve_device(params.runtime.device)
    draws = DatasetDraws(args.dataset)
    prov = provenance(stage_settings(config, args.analysis), describe_device(device))
    # only the declared runs: a leftover folder is ignored
    for run_id in progress(config.runs, f"{args.study} {args.analysis}", unit="run"):
        folder = args.runs / run_id
        metrics = read_json(folder / "metrics.json")
        t0 = time.perf_counter()
        if metrics["status"] == "diverged":
            record: dict[str, Any] = {
                "status": "skipped",
                "reason": f"the run diverged at step {metrics.get('diverged_step')}"}
            tables = {}
        else:
            model_json = read_json(folder / "model.json")
            objective = spec.objective(config, run_id, draws.for_run(config, run_id), device)
            if objective is None:  # no trained network to analyse
                record, tables = {"status": "skipped", "reason": no_model_reason(model_json)}, {}
            else:
                model = load_model(model_json, folder / "model.safetensors").to(device)
                dtype = next(model.parameters()).dtype

                def untrained(spec_=model_json, seed=config.runs[run_id].seed, dtype=dtype):
                    # every study seeds its model's init with the run seed (build_seeded_model),
                    # in the dtype it trains in
                    return seeded_model_from_spec(spec_, seed, device).to(dtype)

                record, tables = record_fn(model, objective, settings, untrained)
        for name, table in tables.items():
            write_parquet(args.out / f"{run_id}_{name}.parquet", table)
        write_json(args.out / f"{run_id}.json", {**record, "provenance": {**prov, "run": run_id}})
        log.info("%s of %s/%s: %s in %.1fs", args.analysis, args.study, run_id,
                 record.get("status", "done"), time.perf_counter() - t0)
    return 0


def no_model_reason(model_json: dict[str, Any]) -> str:
    """Why a run the study gives no objective is skipped: its model.json's own reason (a run
    that trains no model says why), or that it holds no model load_model rebuilds."""
    kind = model_json.get("kind")
    if model_json.get("reason"):
        return str(model_json["reason"])
    if kind not in MODELS:
        return f"no single model that load_model rebuilds (model.json is of kind {kind!r})"
    return "the study gives this run no training objective"
