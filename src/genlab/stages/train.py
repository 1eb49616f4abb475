"""``genlab train``: one run of a study, or with no ``--run`` the whole sweep (at once where the
study has a vectorised group trainer) into ``OUT/<run>/``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from genlab.config import ParamsError, settings_hash
from genlab.data.draws import run_draw_id, runs_of_seeds
from genlab.device import configure_torch, describe_device, resolve_device
from genlab.io import write_json, write_parquet, write_safetensors
from genlab.stages.common import DatasetDraws, log, provenance, require_seed, setup, study
from genlab.stages.settings import stage_settings
from genlab.train.checkpoint_folder import CheckpointFolder


def run(args: argparse.Namespace) -> int:
    params = setup(args)
    spec, config = study(params, args.study)
    if args.run is not None and args.run not in config.runs:
        raise ParamsError(f"studies.{args.study}.runs.{args.run}: no such run; declared: "
                          f"{sorted(config.runs)}")
    runs = _sweep(config, args)
    configure_torch(params.runtime.threads)
    device = resolve_device(params.runtime.device)
    draws = DatasetDraws(args.dataset)
    # the first line of a long stage's log: it has started (and what), before any result
    log.info("training %s of %s on %s", f"{len(runs)} run(s)" if args.run is None
             else args.run, args.study, describe_device(device))
    t0 = time.perf_counter()
    if args.run is None:  # the whole sweep (or one seed's runs), into runs/<run>/
        results = {}
        if spec.train_group is not None:  # the group trainer, once: seeds are a batch dimension
            by_draw: dict[str, Any] = {}  # the runs of one draw share its Dataset
            for run in runs:
                if run_draw_id(config, run) not in by_draw:
                    by_draw[run_draw_id(config, run)] = draws.for_run(config, run)
            results = spec.train_group(
                config, runs, {run: by_draw[run_draw_id(config, run)] for run in runs}, device)
        else:
            results = {run: spec.train_run(config, run, draws.for_run(config, run), device, None)
                       for run in runs}
        results = {run: results[run] for run in runs}  # params.yaml's order
        folders = {run: args.out / run for run in runs}
    else:
        checkpoints = CheckpointFolder(args.out / ".checkpoint",
                                       settings_hash(stage_settings(config, "train", args.run)))
        results = {args.run: spec.train_run(
            config, args.run, draws.for_run(config, args.run), device,
            checkpoints.checkpointing(params.runtime.checkpoint_minutes, device))}
        folders = {args.run: args.out}
    elapsed = time.perf_counter() - t0
    for run_id, result in results.items():
        write_run(folders[run_id], result, config, run_id, describe_device(device))
        log.info("trained %s/%s on %s: %s", args.study, run_id, describe_device(device),
                 result.metrics["status"])
    if args.run is not None:
        checkpoints.remove()
    log.info("trained %d run(s) of %s in %.1fs", len(results), args.study, elapsed)
    return 0


def _sweep(config: Any, args: argparse.Namespace) -> list[str]:
    """The runs a sweep trains: all of them, or ``--seed``'s (never with ``--run``)."""
    if args.seed is None:
        return list(config.runs)
    if args.run is not None:
        raise ParamsError("train: --seed selects a sweep's runs; --run names one run")
    for seed in args.seed:
        require_seed(config, args.study, seed)
    return runs_of_seeds(config, args.seed)


def write_run(folder: Path, result: Any, config: Any, run: str, device: str) -> None:
    """A run's four artifacts; its sidecar records the settings of this run alone."""
    prov = provenance(stage_settings(config, "train", run), device, config.runs[run].seed)
    prov["run"] = run
    sha256 = write_safetensors(folder / "model.safetensors", result.weights)
    write_json(folder / "model.json", {**result.model_spec, "provenance": prov,
                                       "weights_sha256": sha256})
    write_parquet(folder / "history.parquet", result.history)
    write_json(folder / "metrics.json", result.metrics)
