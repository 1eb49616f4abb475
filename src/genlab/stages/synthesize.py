"""``genlab synthesize``: a study's data draws (:mod:`genlab.data.draws`), each seed's into its
own folder ``OUT/s<seed>/`` (``--seed N``: that seed's alone, as its DVC stage runs it):
train/test Parquet (a ``draw`` column names the draw), the draws' generator info, and the
stage's provenance."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from genlab import paths
from genlab.data.dataset import dataset_to_tables
from genlab.data.draws import data_draws, draw_settings, seeds
from genlab.io import write_json, write_parquet
from genlab.stages.common import log, provenance, require_seed, setup, study
from genlab.stages.settings import stage_settings


def _with_draw(table: pa.Table, draw: str) -> pa.Table:
    return table.append_column("draw", pa.array([draw] * table.num_rows, pa.string()))


def _concat(tables: list[pa.Table]) -> pa.Table:
    """One table of a seed's draws. Draws of different input widths (measures_grid's teacher and
    MNIST-1D tasks) store ``x`` as variable-length lists, which a run's reader turns back into
    its draw's matrix (:func:`genlab.io.columns_to_numpy`); draws of one width keep the
    fixed-size lists, byte for byte as before."""
    if len({table.schema for table in tables}) > 1:
        tables = [table.set_column(table.column_names.index("x"), "x", table.column("x").cast(
            pa.list_(table.schema.field("x").type.value_type))) for table in tables]
    return pa.concat_tables(tables, promote_options="default")


def run(args: argparse.Namespace) -> int:
    params = setup(args)
    spec, config = study(params, args.study)
    if args.seed is not None:
        require_seed(config, args.study, args.seed)
    for seed in seeds(config) if args.seed is None else [args.seed]:
        _synthesize_seed(spec, config, seed, args.out / paths.seed_folder(seed), args.study)
    return 0


def _synthesize_seed(spec: Any, config: Any, seed: int, folder: Path, name: str) -> None:
    t0 = time.perf_counter()
    trains, tests, infos = [], [], {}
    for draw, overrides in data_draws(config, seed).items():
        dataset = spec.synthesize(draw_settings(config, draw))
        train, test = dataset_to_tables(dataset)
        trains.append(_with_draw(train, draw))
        tests.append(_with_draw(test, draw))
        infos[draw] = {**dataset.info, "n_classes": dataset.n_classes, "data": overrides,
                       "n_train": train.num_rows, "n_test": test.num_rows}
    write_parquet(folder / "train.parquet", _concat(trains))
    write_parquet(folder / "test.parquet", _concat(tests))
    # what a run trains on, and nothing that moves with the code's commit (the runs depend on
    # these three files; the provenance beside them is not their input)
    write_json(folder / paths.DRAWS_INFO, infos)
    write_json(folder / paths.DATASET_PROVENANCE, provenance(
        stage_settings(config, "synthesize", seed=seed), "cpu", config.data.seed))
    log.info("synthesized %s seed %d in %.1fs: %s", name, seed, time.perf_counter() - t0,
             ", ".join(f"{d} ({i['n_train']} train, {i['n_test']} test)"
                       for d, i in infos.items()))
