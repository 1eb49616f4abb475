"""The study registry's rules, for every registered study: a package of four modules, settings
that import no code, an experiment that imports neither the claims nor the figures."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import genlab.studies
from genlab.studies import NAMES, STUDIES, load_claims, load_figures, load_study

PACKAGE = Path(genlab.studies.__file__).parent

# what a study's settings module may import: every stage validates params.yaml, so the settings
# are every stage's code dependency (genlab.workflow.code_deps): no torch, numpy, pyarrow or
# genlab code modules
SETTINGS_MAY_IMPORT = ("__future__", "typing", "collections", "itertools", "math", "pydantic",
                       "genlab.settings", "genlab.analyses.settings", "genlab.analyses.registry",
                       "genlab.analyses.attribution_settings",
                       "genlab.data.settings", "genlab.studies.entry",
                       "genlab.train.binary_settings", "genlab.train.penalised_gd_settings",
                       "genlab.train.repetition_settings")


def imports(path: Path) -> list[str]:
    """Every module a file imports, function-level and TYPE_CHECKING ones included, with the
    names imported from it (``from a import b`` gives ``a`` and ``a.b``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module, f"{path}: relative import"
            found += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return found


def within(module: str, allowed: tuple[str, ...]) -> bool:
    return any(module == a or module.startswith(f"{a}.") for a in allowed)


def test_every_package_with_settings_is_registered() -> None:
    assert set(NAMES) == set(STUDIES) == {
        p.name for p in PACKAGE.iterdir() if (p / "settings.py").is_file()}
    assert len(NAMES) >= 10


@pytest.mark.parametrize("name", NAMES)
def test_a_study_is_one_package_of_four_modules(name: str) -> None:
    folder = PACKAGE / name
    assert {"__init__.py", "settings.py", "experiment.py", "claims.py", "figures.py"} <= {
        p.name for p in folder.glob("*.py")}
    assert imports(folder / "__init__.py") == []  # importing the settings runs it
    assert load_study(name).entry is STUDIES[name]
    assert callable(load_claims(name).summarize) and callable(load_figures(name).figures)


@pytest.mark.parametrize("name", NAMES)
def test_the_settings_import_no_code(name: str) -> None:
    found = imports(PACKAGE / name / "settings.py")
    assert found and [m for m in found if not within(m, SETTINGS_MAY_IMPORT)] == []


@pytest.mark.parametrize("name", NAMES)
def test_the_experiment_imports_neither_claims_nor_figures(name: str) -> None:
    """A training stage depends on experiment.py's imports: editing a claim or a figure must not
    retrain, and training must not load matplotlib."""
    found = imports(PACKAGE / name / "experiment.py")
    package = f"genlab.studies.{name}"
    assert f"{package}.settings" in found, "the check reads the wrong file"
    assert [m for m in found if within(m, ("matplotlib", f"{package}.claims",
                                           f"{package}.figures"))] == []


def test_shared_settings_import_no_code() -> None:
    root = PACKAGE.parent
    for path in (root / "train/binary_settings.py", root / "train/penalised_gd_settings.py",
                 root / "train/repetition_settings.py",
                 root / "data/settings.py",
                 root / "analyses/settings.py", root / "analyses/registry.py",
                 root / "analyses/attribution_settings.py",
                 PACKAGE / "entry.py"):
        assert [m for m in imports(path) if not within(m, SETTINGS_MAY_IMPORT + (
            "dataclasses",))] == [], path
