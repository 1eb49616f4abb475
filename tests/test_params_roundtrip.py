"""``dvc exp run -S key=value`` rewrites params.yaml through DVC's own YAML load and dump
(``dvc.utils.hydra.apply_overrides`` → ``dvc.utils.serialize.modify_yaml``: ruamel.yaml round trip,
80-column width, block style for the lists it replaces). params.yaml, and every preset that
``genlab preset NAME`` writes, are laid out so that this rewrite changes nothing but the value
set: a one-value experiment is a one-line diff. DVC's functions are called directly (no
``dvc exp run``); they are what ``-S`` runs."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
import yaml
from dvc.utils.hydra import apply_overrides
from dvc.utils.serialize import modify_yaml, parse_yaml

from genlab.presets import available, preset_text
from tests_support import ROOT

PARAMS = ROOT / "params.yaml"

OVERRIDES = [
    # key=value, the key path in the loaded file, the new value
    ("studies.eos_gd.analyses.sharpness.k=4",
     ("studies", "eos_gd", "analyses", "sharpness", "k"), 4),
    ("studies.random_labels.runs.p0-s0.seed=7",  # inside a one-line run entry
     ("studies", "random_labels", "runs", "p0-s0", "seed"), 7),
    ("runtime.threads=2", ("runtime", "threads"), 2),  # a line with a comment after its value
    ("studies.intrinsic_dim.subspace.full_train.stop_at_train_acc=0.9",  # null, then a comment
     ("studies", "intrinsic_dim", "subspace", "full_train", "stop_at_train_acc"), 0.9),
    ("studies.sgd_stability.recipe.target_loss=1e-6",
     ("studies", "sgd_stability", "recipe", "target_loss"), 1e-6),
]


def _changed(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(),
                                                  lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def _at(data: dict, path: tuple[str, ...]) -> object:
    for key in path:
        data = data[key]
    return data


NAMES = ["params.yaml"] + [f"preset {name}" for name in available(ROOT)]


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    """params.yaml and the full file of each preset (`genlab preset NAME`)."""
    return {"params.yaml": PARAMS.read_text(encoding="utf-8"),
            **{f"preset {name}": preset_text(name, ROOT) for name in available(ROOT)}}


def _copy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", NAMES)
def test_dvcs_yaml_load_and_dump_leave_the_file_byte_identical(name: str, texts, tmp_path) -> None:
    text = texts[name]
    path = _copy(tmp_path, text)
    with modify_yaml(path):  # DVC's load (ruamel round trip) then its dump, as -S does
        pass
    after = path.read_text(encoding="utf-8")
    assert after == text, f"{name}: DVC's YAML dump rewrites it:\n" + "\n".join(
        _changed(text, after)[:40])


@pytest.mark.parametrize("name", NAMES)
def test_setting_a_value_to_itself_through_dash_s_changes_nothing(name: str, texts,
                                                                   tmp_path) -> None:
    """-S merges OmegaConf's plain copy back: every list is replaced by a plain one."""
    text = texts[name]
    path = _copy(tmp_path, text)
    k = _at(yaml.safe_load(text), ("studies", "eos_gd", "analyses", "sharpness", "k"))
    apply_overrides(path, [f"studies.eos_gd.analyses.sharpness.k={k}"])
    assert _changed(text, path.read_text(encoding="utf-8")) == []


# every kind of line in params.yaml; the presets' files (larger, slower) with the first one
CASES = [("params.yaml", *case) for case in OVERRIDES] + [
    (name, *OVERRIDES[0]) for name in NAMES[1:]]


@pytest.mark.parametrize(("name", "override", "key_path", "value"), CASES,
                         ids=[f"{c[0]}:{c[1].split('=')[0]}" for c in CASES])
def test_dash_s_changes_exactly_one_line(name: str, override: str, key_path: tuple[str, ...],
                                         value: object, texts, tmp_path) -> None:
    text = texts[name]
    path = _copy(tmp_path, text)
    apply_overrides(path, [override])  # what `dvc exp run -S override` does to the file
    after = path.read_text(encoding="utf-8")
    changed = _changed(text, after)
    assert len(changed) == 2 and changed[0][0] == "-" and changed[1][0] == "+", changed
    # read as DVC reads it (YAML 1.2): ruamel writes 1e-6 as `1e-06`, a string to PyYAML's 1.1
    before_data, after_data = parse_yaml(text, "before"), parse_yaml(after, "after")
    assert _at(after_data, key_path) == value
    # and nothing else: the same file with the old value put back
    parent = _at(after_data, key_path[:-1])
    parent[key_path[-1]] = _at(before_data, key_path)
    assert after_data == before_data

