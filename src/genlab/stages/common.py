"""What every stage does first: validate params.yaml, set up logging, find its study."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from genlab import timing
from genlab.config import Params, ParamsError, load_params, settings_hash
from genlab.data.draws import seeds
from genlab.stages.stage_logging import configure_logging, log  # noqa: F401 - the stages' logger


def setup(args: argparse.Namespace) -> Params:
    params = load_params(args.params)
    configure_logging(params)
    timing.work_begins()
    return params


def study(params: Params, name: str):  # -> (StudySpec, study settings)
    """The study's experiment and its settings; an undeclared name is a ParamsError naming the
    declared ones."""
    from genlab.studies import load_study

    settings = params.study(name)
    spec = load_study(name)
    timing.work_begins()  # the study's code imported (torch with it): start-up ends here
    return spec, settings


def require_seed(config: Any, study_name: str, seed: int) -> None:
    """``--seed`` must be a seed of the study's runs (a ParamsError naming them otherwise)."""
    if seed not in seeds(config):
        raise ParamsError(f"studies.{study_name}.runs: no run has seed {seed}; the seeds are "
                          f"{seeds(config)}")


def provenance(settings: dict[str, Any], device: str, seed: int | None = None) -> dict:
    from genlab.provenance import provenance as make

    return make(settings, settings_hash(settings), device, seed)


class DatasetDraws:
    """A synthesize stage's output: a study's data draws, one folder per seed
    (:mod:`genlab.data.draws`), each read once when a run first needs it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._seeds: dict[int, tuple[Any, Any, dict[str, Any]]] = {}

    def _seed(self, seed: int) -> tuple[Any, Any, dict[str, Any]]:
        from genlab import paths
        from genlab.io import read_json, read_parquet

        if seed not in self._seeds:
            folder = self.folder / paths.seed_folder(seed)
            self._seeds[seed] = (read_parquet(folder / "train.parquet"),
                                 read_parquet(folder / "test.parquet"),
                                 read_json(folder / paths.DRAWS_INFO))
        return self._seeds[seed]

    def for_run(self, config: Any, run: str):  # -> Dataset
        """The Dataset run ``run`` of the study ``config`` trains on: its seed's draw."""
        import pyarrow.compute as pc

        from genlab.data.dataset import dataset_from_tables
        from genlab.data.draws import run_draw_id
        from genlab.io import ArtifactError

        seed, draw = config.runs[run].seed, run_draw_id(config, run)
        train, test, infos = self._seed(seed)
        if draw not in infos:
            raise ArtifactError(f"{self.folder}: seed {seed}'s folder has no data draw {draw!r} "
                                f"(it holds {sorted(infos)}): rerun the synthesize stage")

        def rows(table: Any) -> Any:
            return table.filter(pc.equal(table.column("draw"), draw)).drop_columns(["draw"])

        return dataset_from_tables(rows(train), rows(test), {**infos[draw], "draw": draw})
