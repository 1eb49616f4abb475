"""The study registry. A study is one scientific question: data, model, recipe, grid, claims.

Each study is one package ``genlab/studies/<name>/``: ``settings.py`` (its pydantic settings and
``STUDY``, its :class:`~genlab.studies.entry.StudyEntry`: cheap, no torch) and ``experiment.py``
(``SPEC``, its :class:`~genlab.studies.base.StudySpec`: data, training, summary, claims, figures).
:data:`STUDIES` holds the entries, which is all that validating params.yaml and planning the
pipeline need; :func:`load_study` imports a study's experiment when a stage runs it.

Adding a study = its package, its name in :data:`NAMES`, its block in ``params.yaml`` and its
tests; ``genlab dag --write`` then regenerates dvc.yaml.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from genlab.studies.entry import StudyEntry

if TYPE_CHECKING:
    from genlab.studies.base import StudySpec

NAMES: tuple[str, ...] = (
    "random_labels", "double_descent", "benign_oscillation", "eos_gd", "sgd_stability",
    "intrinsic_dim", "influence", "mislabel_detection", "measures_grid", "neural_collapse",
)
"""Registry order: the order of params.yaml's schema, of dvc.yaml's stages and of the report."""


def settings_module(name: str) -> str:
    return f"genlab.studies.{name}.settings"


def experiment_module(name: str) -> str:
    return f"genlab.studies.{name}.experiment"


def _entries() -> dict[str, StudyEntry]:
    # importlib with a computed name on purpose: the modules a stage imports decide its code
    # dependencies (genlab.workflow.code_deps), and this package must not pull in every study
    entries = {}
    for name in NAMES:
        entry = importlib.import_module(settings_module(name)).STUDY
        if entry.name != name:
            raise RuntimeError(f"{settings_module(name)}.STUDY is named {entry.name!r}")
        entries[name] = entry
    return entries


STUDIES: dict[str, StudyEntry] = _entries()


def load_study(name: str) -> StudySpec:
    """The study's experiment (training, summary, claims, figures): imports torch-side code."""
    if name not in STUDIES:
        raise KeyError(f"no study {name!r}; registered: {sorted(STUDIES)}")
    return importlib.import_module(experiment_module(name)).SPEC


__all__ = ["NAMES", "STUDIES", "StudyEntry", "load_study"]
