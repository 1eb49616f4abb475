"""params.yaml: the shipped files validate; every kind of bad input names its key and value."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from genlab.cli import main
from genlab.config import ParamsError, load_params, params_json_schema, validate_params
from genlab.io import dumps_json
from genlab.presets import REPLACED, available, preset_text

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ["default", *available(ROOT)]
"""params.yaml and each preset merged onto it (workflow/presets/ holds only overrides)."""


def shipped_text(name: str) -> str:
    return (ROOT / "params.yaml").read_text() if name == "default" else preset_text(name, ROOT)


@pytest.fixture
def raw() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def error_of(raw: dict) -> str:
    with pytest.raises(ParamsError) as info:
        validate_params(raw)
    return str(info.value)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_params_validate(name: str, tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(shipped_text(name))
    params = load_params(path)
    assert params.study("random_labels").runs


def test_presets_differ_in_sizes_only() -> None:
    """Same keys everywhere (the code path cannot depend on the preset), different values; a
    preset's runs and grids are its own (presets.REPLACED: e.g. the paper preset's CNN grid)."""
    def keys(tree, prefix=""):
        if not isinstance(tree, dict):
            return {prefix}
        return {k2 for k, v in tree.items() if k not in REPLACED
                for k2 in keys(v, f"{prefix}.{k}")}

    trees = [yaml.safe_load(shipped_text(name)) for name in SHIPPED]
    assert all(keys(t) == keys(trees[0]) for t in trees)
    assert sorted(t["scale"] for t in trees) == ["ci", "cpu", "default", "paper"]


def test_negative_lr_names_key_bound_and_value(raw: dict) -> None:
    raw["studies"]["random_labels"]["train"]["lr"] = -0.1
    assert "studies.random_labels.train.lr: must be > 0, got -0.1" in error_of(raw)


def test_literal_lists_allowed_values(raw: dict) -> None:
    raw["scale"] = "huge"
    message = error_of(raw)
    assert "scale:" in message and "'huge'" in message
    assert "'ci', 'default', 'cpu' or 'paper'" in message


def test_unknown_key_is_rejected_with_allowed_keys(raw: dict) -> None:
    raw["studies"]["random_labels"]["train"]["learning_rate"] = 0.1
    message = error_of(raw)
    assert "studies.random_labels.train.learning_rate: unknown key" in message
    assert "allowed:" in message and "lr" in message


def test_unknown_study_is_rejected(raw: dict) -> None:
    raw["studies"]["no_such_study"] = {}
    assert ("studies.no_such_study: unknown key; allowed: benign_oscillation, deep_double_descent"
            in error_of(raw))


def test_every_error_is_listed_at_once(raw: dict) -> None:
    raw["studies"]["random_labels"]["train"]["lr"] = 0
    raw["studies"]["random_labels"]["data"]["n_train"] = -5
    message = error_of(raw)
    assert "train.lr: must be > 0, got 0" in message
    assert "data.n_train: must be >= 1, got -5" in message


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_numbers_are_rejected(raw: dict, value: float) -> None:
    raw["studies"]["random_labels"]["train"]["lr"] = value
    assert "studies.random_labels.train.lr" in error_of(raw)


def test_missing_section(raw: dict) -> None:
    del raw["studies"]["random_labels"]["train"]
    assert "studies.random_labels.train: required key is missing" in error_of(raw)


def test_no_study_declared(raw: dict) -> None:
    raw["studies"] = {}
    assert "declare at least one study" in error_of(raw)


def test_run_id_must_match_its_settings(raw: dict) -> None:
    runs = raw["studies"]["random_labels"]["runs"]
    runs["p0_3-s0"] = {"label_noise": 0.5, "seed": 0}
    assert "studies.random_labels.runs.p0_3-s0" in error_of(raw)
    assert "expected 'p0_5-s0'" in error_of(raw)


@pytest.mark.parametrize("name", ["../x", "a/b", "A", "p0.5-s0", ""])
def test_path_like_or_dotted_run_names_are_rejected(raw: dict, name: str) -> None:
    raw["studies"]["random_labels"]["runs"] = {name: {"label_noise": 0.5, "seed": 0}}
    assert "studies.random_labels.runs" in error_of(raw)


def test_empty_grid_is_rejected(raw: dict) -> None:
    raw["studies"]["random_labels"]["runs"] = {}
    assert "studies.random_labels.runs" in error_of(raw)


def test_params_are_frozen(raw: dict) -> None:
    params = validate_params(copy.deepcopy(raw))
    with pytest.raises(ValueError):
        params.scale = "ci"  # type: ignore[misc]


def test_yaml_aliases_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text("a: &x [1, 2]\nb: *x\n")
    with pytest.raises(ParamsError, match="aliases"):
        load_params(path)


def test_non_utf8_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_bytes(b"scale: \xff\xfe\n")
    with pytest.raises(ParamsError, match="not UTF-8"):
        load_params(path)


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(ParamsError, match="must be a mapping"):
        load_params(path)


def test_check_params_cli(tmp_path: Path, raw: dict, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(raw))
    stamp = tmp_path / "stamp"
    assert main(["check-params", str(good), "--stamp", str(stamp)]) == 0
    assert stamp.read_text() == "params.yaml is valid\n"
    raw["studies"]["random_labels"]["train"]["lr"] = -0.1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    bad_stamp = tmp_path / "bad_stamp"
    assert main(["check-params", str(bad), "--stamp", str(bad_stamp)]) == 2
    assert "studies.random_labels.train.lr: must be > 0, got -0.1" in capsys.readouterr().err
    assert not bad_stamp.exists()


def test_json_schema_is_current() -> None:
    """workflow/schemas/params.schema.json is generated from the model: `genlab schema`."""
    path = ROOT / "workflow" / "schemas" / "params.schema.json"
    assert path.read_text() == dumps_json(params_json_schema()), "stale: run `genlab schema`"


def test_json_schema_accepts_shipped_and_rejects_unknown_keys(raw: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "workflow" / "schemas" / "params.schema.json").read_text())
    jsonschema.validate(raw, schema)
    raw["studies"]["random_labels"]["train"]["learning_rate"] = 0.1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(raw, schema)


def test_validating_params_does_not_import_torch() -> None:
    """Snakemake validates params.yaml at every start and `genlab check-params` should answer at
    once; importing torch (2 s here) for that would tax every no-op `snakemake -n`."""
    import subprocess
    import sys

    code = "import sys, genlab.config; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
