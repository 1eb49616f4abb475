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
    # genlab's own level too: kronfluence sets the root logger's level to WARNING when it makes
    # its loggers, which silenced influence's and mislabel_detection's logs entirely
    log.setLevel(params.runtime.log_level)
    return params


def study(params: Params, name: str):  # -> (StudySpec, study settings)
    """The study's experiment and its settings; an undeclared name is a ParamsError naming the
    declared ones."""
    from genlab.studies import load_study

    settings = params.study(name)
    return load_study(name), settings


def provenance(settings: dict[str, Any], device: str, seed: int | None = None) -> dict:
    from genlab.provenance import provenance as make

    return make(settings, settings_hash(settings), device, seed)


def load_dataset(folder: Path):
    from genlab.data.dataset import dataset_from_tables
    from genlab.io import read_json, read_parquet

    return dataset_from_tables(read_parquet(folder / "train.parquet"),
                               read_parquet(folder / "test.parquet"),
                               read_json(folder / "dataset.json"))
