"""What every stage does first: validate params.yaml, set up logging, find its study."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from genlab.config import Params, load_params, settings_hash

log = logging.getLogger("genlab")


def setup(args: argparse.Namespace) -> Params:
    params = load_params(args.params)
    logging.basicConfig(level=params.runtime.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return params


def study(params: Params, name: str):  # -> (StudySpec, study settings)
    """The study's experiment and its settings; an undeclared name is a ParamsError naming the
    declared ones."""
    from genlab.studies import load_study

    settings = params.study(name)
    return load_study(name), settings


def stage_settings(config: Any, stage: str, run: str | None = None) -> dict[str, Any]:
    """Exactly the settings a stage reads, which are the params dvc.yaml tracks for it (both come
    from :mod:`genlab.workflow.generate`'s rules; a test checks they agree): what its sidecar
    records, so an artifact's provenance is the same whether it was made in a fresh run or kept
    from an earlier one."""
    from genlab.analyses.registry import ANALYSES

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


def provenance(settings: dict[str, Any], device: str, seed: int | None = None) -> dict:
    from genlab.provenance import provenance as make

    return make(settings, settings_hash(settings), device, seed)


def load_dataset(folder: Path):
    from genlab.data.dataset import dataset_from_tables
    from genlab.io import read_json, read_parquet

    return dataset_from_tables(read_parquet(folder / "train.parquet"),
                               read_parquet(folder / "test.parquet"),
                               read_json(folder / "dataset.json"))
