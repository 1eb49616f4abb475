"""``genlab synthesize``: a study's dataset, as train/test Parquet and its sidecar."""

from __future__ import annotations

import argparse
import time

from genlab.data.dataset import dataset_to_tables
from genlab.io import write_json, write_parquet
from genlab.stages.common import log, provenance, setup, study
from genlab.stages.settings import stage_settings


def run(args: argparse.Namespace) -> int:
    params = setup(args)
    spec, config = study(params, args.study)
    t0 = time.perf_counter()
    dataset = spec.synthesize(config)
    train, test = dataset_to_tables(dataset)
    write_parquet(args.out / "train.parquet", train)
    write_parquet(args.out / "test.parquet", test)
    write_json(args.out / "dataset.json", {
        **dataset.info, "n_train": train.num_rows, "n_test": test.num_rows,
        "provenance": provenance(stage_settings(config, "synthesize"), "cpu", config.data.seed)})
    log.info("synthesized %s: %d train, %d test in %.1fs", args.study, train.num_rows,
             test.num_rows, time.perf_counter() - t0)
    return 0
