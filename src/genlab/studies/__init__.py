"""The study registry. A study is one scientific question: data, model, recipe, grid, claims.

Each study is one package ``genlab/studies/<name>/``:

- ``settings.py``: its pydantic settings and ``STUDY``, its :class:`~genlab.studies.entry.
  StudyEntry` (cheap: no torch, no study code);
- ``experiment.py``: ``SPEC``, its :class:`~genlab.studies.base.StudySpec` (data and training);
- ``claims.py``: ``summarize(config, metrics, histories) -> Summary``, the claims checked;
- ``figures.py``: ``figures(summary data, summary table) -> [(caption, Figure)]``.

:data:`STUDIES` holds the entries, which is all that validating params.yaml and planning the
pipeline need; :func:`load_study`, :func:`load_claims` and :func:`load_figures` import the part a
stage runs (by name: a stage's code dependencies are what it imports, genlab.workflow.code_deps).

Adding a study = its package, its block in ``params.yaml`` and its tests (``genlab dag --write``
then regenerates dvc.yaml; Snakemake does that itself).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from genlab.studies.entry import StudyEntry

if TYPE_CHECKING:
    from genlab.studies.base import StudySpec

def _discover() -> tuple[str, ...]:
    """Every subpackage of this package with a ``settings.py`` is a study, by name (sorted):
    adding a study is adding its package, nothing here."""
    here = Path(__file__).parent
    return tuple(sorted(p.name for p in here.iterdir()
                        if (p / "settings.py").is_file() and (p / "__init__.py").is_file()))


NAMES: tuple[str, ...] = _discover()
"""The registered studies, sorted: the order of params.yaml's schema. The pipeline and the report
follow the order in which params.yaml declares its studies."""


def settings_module(name: str) -> str:
    return f"genlab.studies.{name}.settings"


def experiment_module(name: str) -> str:
    return f"genlab.studies.{name}.experiment"


def claims_module(name: str) -> str:
    return f"genlab.studies.{name}.claims"


def figures_module(name: str) -> str:
    return f"genlab.studies.{name}.figures"


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
    """The study's experiment (data and training): imports torch-side code."""
    return importlib.import_module(experiment_module(_known(name))).SPEC


def load_claims(name: str) -> ModuleType:
    """The study's ``claims`` module (``summarize``)."""
    return importlib.import_module(claims_module(_known(name)))


def load_figures(name: str) -> ModuleType:
    """The study's ``figures`` module (``figures``)."""
    return importlib.import_module(figures_module(_known(name)))


def _known(name: str) -> str:
    if name not in STUDIES:
        raise KeyError(f"no study {name!r}; registered: {sorted(STUDIES)}")
    return name


__all__ = ["NAMES", "STUDIES", "StudyEntry", "load_claims", "load_figures", "load_study"]
