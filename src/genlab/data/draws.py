"""Each run's own data draw: which draws a study's runs need, and the data settings of each.

An independent unit of a claim is a seed with its own data (training set, label noise,
teacher), so a run trains on the draw of its seed: the study's generator runs with its ``data``
block and the seed ``derive_seed(data.seed, "draw", run.seed)``. Runs that share a seed share
their draw: conditions compared within a seed (p = 0 vs p = 1, a small vs a large step) are
paired, on common random numbers. A study whose conditions change the data itself names them
in its settings' ``DATA_FIELDS`` (run fields named like ``data`` fields, e.g. ``noise_std``):
a run's draw then also sets those data fields to the run's values, with the same seed. Every
study's runs have a ``seed`` field.

On disk a seed's draws are one folder, ``<dataset>/s<seed>/``, made by that seed's own
synthesize stage (``<study>_synthesize_s<seed>``) and read by
:class:`genlab.stages.common.DatasetDraws`: adding a seed adds a stage and a folder and leaves
the others as they were, so the runs trained on them stay cached in both engines.

Cheap on purpose (no numpy): the synthesize stage's fingerprint lists the draws.
"""

from __future__ import annotations

from typing import Any

from genlab.paths import seed_folder
from genlab.seeding import derive_seed

DRAW_SEED_PURPOSE = "draw"


def data_fields(config: Any) -> tuple[str, ...]:
    """The run fields that set data fields of the run's draw (the study's data conditions)."""
    return tuple(getattr(config, "DATA_FIELDS", ()))


def seeds(config: Any) -> list[int]:
    """The seeds of a study's runs, ascending: one dataset folder each."""
    return sorted({run.seed for run in config.runs.values()})


def runs_of_seed(config: Any, seed: int) -> list[str]:
    """The ids of the runs with ``seed``, in params.yaml's order."""
    return runs_of_seeds(config, [seed])


def runs_of_seeds(config: Any, chosen: Any) -> list[str]:
    """The ids of the runs whose seed is in ``chosen``, in params.yaml's order."""
    wanted = set(chosen)
    return [run for run, settings in config.runs.items() if settings.seed in wanted]


def seed_blocks(config: Any, size: int) -> dict[str, list[int]]:
    """A grouped study's training stages: name -> the seeds it trains, ascending.

    Seeds fall in blocks by value, ``[b·size, (b+1)·size)``, so that adding a seed retrains its
    own block only and the others stay cached. A block is named by its range (``s0-9``), or by
    its seed alone when ``size`` is 1 (``s3``: one stage per seed, as before blocks).
    """
    blocks: dict[str, list[int]] = {}
    for seed in seeds(config):
        low = seed - seed % size
        name = seed_folder(seed) if size == 1 else f"{seed_folder(low)}-{low + size - 1}"
        blocks.setdefault(name, []).append(seed)
    return blocks


def draw_id(config: Any, run: Any) -> str:
    """The id of ``run``'s data draw (``s0``; ``s0-noise_std=0.05`` with a data condition)."""
    overrides = "".join(f"-{field}={getattr(run, field)}" for field in data_fields(config))
    return f"{seed_folder(run.seed)}{overrides}"


def run_draw_id(config: Any, run_name: str) -> str:
    return draw_id(config, config.runs[run_name])


def data_draws(config: Any, seed: int | None = None) -> dict[str, dict[str, Any]]:
    """Every draw the study's runs need (of ``seed`` alone, if given), in first-use order:
    id -> the data settings that differ from the ``data`` block (the draw's data seed and any
    data condition)."""
    draws: dict[str, dict[str, Any]] = {}
    for run in config.runs.values():
        if seed is not None and run.seed != seed:
            continue
        draws.setdefault(draw_id(config, run), {
            "seed": derive_seed(config.data.seed, DRAW_SEED_PURPOSE, run.seed) % 2**32,
            **{field: getattr(run, field) for field in data_fields(config)}})
    return draws


def draw_settings(config: Any, draw: str) -> Any:
    """The study's settings with the ``data`` block of ``draw`` (validated like params.yaml's)."""
    overrides = data_draws(config)[draw]
    data = type(config.data).model_validate({**config.data.model_dump(), **overrides})
    return config.model_copy(update={"data": data})


__all__ = ["data_draws", "data_fields", "draw_id", "draw_settings", "run_draw_id", "runs_of_seed",
           "runs_of_seeds", "seed_blocks", "seeds"]
