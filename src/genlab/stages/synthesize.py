"""``genlab synthesize``: a study's data draws (:mod:`genlab.data.draws`), one folder per seed
its runs use, each with train/test Parquet (a ``draw`` column names the draw) and the draws'
generator info; the stage's provenance beside the folders."""

from __future__ import annotations

import argparse
import time

import pyarrow as pa

from genlab import paths
from genlab.data.dataset import dataset_to_tables
from genlab.data.draws import data_draws, draw_settings, seeds
from genlab.io import write_json, write_parquet
from genlab.stages.common import log, provenance, setup, study
from genlab.stages.settings import stage_settings


def _with_draw(table: pa.Table, draw: str) -> pa.Table:
    return table.append_column("draw", pa.array([draw] * table.num_rows, pa.string()))


def run(args: argparse.Namespace) -> int:
    params = setup(args)
    spec, config = study(params, args.study)
    t0 = time.perf_counter()
    for seed in seeds(config):
        trains, tests, infos = [], [], {}
        for draw, overrides in data_draws(config, seed).items():
            dataset = spec.synthesize(draw_settings(config, draw))
            train, test = dataset_to_tables(dataset)
            trains.append(_with_draw(train, draw))
            tests.append(_with_draw(test, draw))
            infos[draw] = {**dataset.info, "n_classes": dataset.n_classes, "data": overrides,
                           "n_train": train.num_rows, "n_test": test.num_rows}
        folder = args.out / paths.seed_folder(seed)
        write_parquet(folder / "train.parquet", pa.concat_tables(trains))
        write_parquet(folder / "test.parquet", pa.concat_tables(tests))
        # what a run trains on, and nothing that changes when another seed is added or the
        # code's commit moves (the runs depend on these three files)
        write_json(folder / paths.DRAWS_INFO, infos)
        log.info("synthesized %s seed %d: %s", args.study, seed, ", ".join(
            f"{d} ({i['n_train']} train, {i['n_test']} test)" for d, i in infos.items()))
    write_json(args.out / paths.DATASET_PROVENANCE, provenance(
        stage_settings(config, "synthesize"), "cpu", config.data.seed))
    log.info("synthesized %s in %.1fs", args.study, time.perf_counter() - t0)
    return 0
