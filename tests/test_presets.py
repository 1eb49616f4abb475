"""Size presets as overrides: workflow/presets/<name>.yaml holds only what differs from
params.yaml, and ``genlab preset NAME`` merges it onto params.yaml (genlab.presets)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from genlab.cli import main
from genlab.config import load_params, parse_yaml, validate_params
from genlab.presets import PRESETS_DIR, REPLACED, PresetError, available, merge, preset_text
from tests_support import ROOT, preset_params

PRESETS = ["ci", "cpu", "paper"]

# Key facts of the full preset files these overrides replaced (their data, descriptions aside,
# was checked equal to the merged text when the overrides were derived from them).
FACTS = {
    "ci": {
        ("scale",): "ci",
        ("studies", "random_labels", "data", "n_train"): 200,
        ("studies", "random_labels", "data", "n_test"): 1000,
        ("studies", "random_labels", "model", "hidden"): [128, 128],
        ("studies", "random_labels", "train", "lr"): 0.05,  # inherited from params.yaml
        ("studies", "random_labels", "analyses", "sharpness", "worst_case"):
            {"rho": 0.05, "max_examples": 128},  # rho inherited, max_examples overridden
        ("studies", "double_descent", "features", "widths"): [5, 10, 20, 36, 40, 44, 80, 160, 320],
        ("studies", "influence", "data", "input_dim"): 4,
        ("studies", "intrinsic_dim", "subspace", "stop_at_target"): True,
        ("studies", "mislabel_detection", "mlp"): {"hidden": [16], "activation": "tanh",
                                                   "l2": 0.001},
        ("studies", "neural_collapse", "recipe", "steps"): 1000,
    },
    "cpu": {  # the default preset's sizes: every run of a study is its run in the cpu preset
        ("scale",): "cpu",
        ("studies", "random_labels", "data", "n_train"): 1000,
        ("studies", "repetition", "enabled"): True,
        ("studies", "measures_grid", "grid", "mnist1d", "width"): [64, 256],
        # the sizes the default shrinks for compute (SHRUNK_IN_DEFAULT) stay the cpu preset's
        ("studies", "sgd_stability", "data", "n_train"): 100,
        ("studies", "layer_rotation", "model", "hidden"): [128, 128, 128],
        ("studies", "layer_rotation", "recipe", "steps"): 3000,
        ("studies", "layer_rotation", "recipe", "eval_every"): 150,
        ("studies", "mnist1d_baselines", "recipe", "steps"): 6000,
        ("studies", "label_sharpness", "model", "hidden"): [128, 128],
        ("studies", "label_sharpness", "recipe", "max_steps"): 3000,
    },
    "paper": {
        ("scale",): "paper",
        ("studies", "random_labels", "data", "n_train"): 5000,
        ("studies", "random_labels", "data", "n_test"): 10000,
        ("studies", "double_descent", "data", "n_test"): 10200,
        ("studies", "intrinsic_dim", "subspace", "stop_at_target"): False,
        ("studies", "mislabel_detection", "mlp"): {"hidden": [128], "activation": "tanh",
                                                   "l2": 0.0001},
        ("studies", "neural_collapse", "data"): {"n_classes": 10, "dim": 64, "mean_scale": 2.0,
                                                 "n_train": 5000, "n_test": 5000, "seed": 0},
        ("studies", "neural_collapse", "model", "hidden"): [512, 512, 512],
        ("studies", "sgd_stability", "data", "n_train"): 100,
        ("studies", "mnist1d_baselines", "recipe", "steps"): 6000,
    },
}
# Studies the default preset runs at sizes shrunk for compute (issue 37: n >= 10 seeds within the
# default's budget): study -> the settings that differ from the cpu preset's (which keeps the old
# sizes). Declared in the study's description in params.yaml; every other setting is the cpu
# preset's, and every other study is the cpu preset's, run for run.
SHRUNK_IN_DEFAULT = {
    "sgd_stability": {("data", "n_train")},
    "layer_rotation": {("model", "hidden"), ("recipe", "steps"), ("recipe", "eval_every")},
    "layer_id": {("data", "mnist1d", "num_samples"), ("data", "mnist1d", "train_split"),
                 ("recipe", "eval_every")},
    "deep_double_descent": {("data", "num_samples"), ("recipe", "steps"),
                            ("recipe", "eval_every")},
    "mnist1d_baselines": {("recipe", "steps")},
    "label_sharpness": {("model", "hidden"), ("recipe", "max_steps")},
}
RUNS = {
    "ci": {"random_labels": 3, "double_descent": 2, "benign_oscillation": 2, "eos_gd": 2,
           "sgd_stability": 2, "intrinsic_dim": 5, "influence": 2, "mislabel_detection": 2,
           "measures_grid": 14, "neural_collapse": 2, "mnist1d_baselines": 8, "layer_id": 4,
           "deep_double_descent": 6, "influence_mnist1d": 2,
           "mislabel_mnist1d": 3, "layer_rotation": 5, "full_batch_gd": 3, "repetition": 3,
           "label_sharpness": 4},
    "cpu": {"random_labels": 30, "benign_oscillation": 40, "double_descent": 10, "eos_gd": 20,
            "sgd_stability": 18, "intrinsic_dim": 90, "influence": 40, "influence_mnist1d": 6,
            "mislabel_detection": 20, "mislabel_mnist1d": 40, "measures_grid": 192,
            "neural_collapse": 40, "mnist1d_baselines": 18, "layer_id": 18,
            "deep_double_descent": 27, "layer_rotation": 66, "full_batch_gd": 25,
            "repetition": 15, "label_sharpness": 30},
    "paper": {"random_labels": 25, "double_descent": 20, "benign_oscillation": 80, "eos_gd": 10,
              "sgd_stability": 50, "intrinsic_dim": 50, "influence": 10, "mislabel_detection": 10,
              "measures_grid": 3645, "neural_collapse": 10, "mnist1d_baselines": 60,
              "layer_id": 30, "deep_double_descent": 240, "influence_mnist1d": 10,
              "mislabel_mnist1d": 40, "layer_rotation": 55, "full_batch_gd": 25,
              "repetition": 50, "label_sharpness": 110},
}


def at(tree, path):
    for key in path:
        tree = tree[key]
    return tree


def leaves(tree, path=()):
    """(key path, value) of every override: a runs or grid block is one leaf."""
    for key, value in tree.items():
        if isinstance(value, dict) and key not in REPLACED:
            yield from leaves(value, (*path, key))
        else:
            yield (*path, key), value


def base() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def overrides(name: str) -> dict:
    return yaml.safe_load((ROOT / PRESETS_DIR / f"{name}.yaml").read_text())


# --- the merge rule ---------------------------------------------------------------------------


def test_mappings_merge_recursively_and_other_values_replace() -> None:
    base_ = {"a": {"b": 1, "c": {"d": 2, "e": 3}}, "f": [1, 2, 3], "g": "x"}
    merged = merge(base_, {"a": {"c": {"e": 30}}, "f": [4]})
    assert merged == {"a": {"b": 1, "c": {"d": 2, "e": 30}}, "f": [4], "g": "x"}
    assert base_["a"]["c"]["e"] == 3 and base_["f"] == [1, 2, 3]  # the inputs are not modified
    assert list(merged) == ["a", "f", "g"]  # the base's key order


def test_a_runs_block_replaces_the_base_runs_whole() -> None:
    runs = {"a-s0": {"seed": 0}, "b-s1": {"seed": 1}}
    base_ = {"studies": {"s": {"data": {"n": 10}, "runs": runs}}}
    merged = merge(base_, {"studies": {"s": {"runs": {"c-s7": {"seed": 7, "new": 1}}}}})
    assert merged["studies"]["s"] == {"data": {"n": 10}, "runs": {"c-s7": {"seed": 7, "new": 1}}}


@pytest.mark.parametrize("over, path", [
    ({"scael": "ci"}, "scael"),
    ({"studies": {"random_labels": {"data": {"n_trian": 5}}}},
     "studies.random_labels.data.n_trian"),
    ({"studies": {"no_such_study": {"runs": {}}}}, "studies.no_such_study"),
])
def test_a_key_params_yaml_lacks_is_rejected_with_its_path(over: dict, path: str) -> None:
    with pytest.raises(PresetError, match=rf"^{path}: not a key of params.yaml"):
        merge(base(), over)


def test_a_typo_in_a_preset_file_names_the_file_and_key(tmp_path: Path) -> None:
    (tmp_path / PRESETS_DIR).mkdir(parents=True)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / PRESETS_DIR / "tiny.yaml").write_text(
        "scale: ci\nstudies:\n  eos_gd:\n    recipe: {stpes: 10}\n")
    with pytest.raises(PresetError, match=r"tiny.yaml: studies.eos_gd.recipe.stpes: not a key"):
        preset_text("tiny", tmp_path)


def test_an_unknown_preset_lists_the_available_ones() -> None:
    with pytest.raises(PresetError, match="available: ci, cpu, paper"):
        preset_text("huge", ROOT)
    with pytest.raises(PresetError, match="no preset"):
        preset_text("../params", ROOT)


def test_a_generated_params_yaml_is_not_a_base(tmp_path: Path) -> None:
    """After `genlab preset paper --out params.yaml`, merging ci onto it would keep paper's sizes
    wherever ci says nothing: refused, with the way back."""
    (tmp_path / PRESETS_DIR).mkdir(parents=True)
    (tmp_path / "params.yaml").write_text(preset_text("paper", ROOT))
    shutil.copy(ROOT / PRESETS_DIR / "ci.yaml", tmp_path / PRESETS_DIR / "ci.yaml")
    with pytest.raises(PresetError, match="git checkout params.yaml"):
        preset_text("ci", tmp_path)


# --- the shipped presets ----------------------------------------------------------------------


def test_the_shipped_presets_are_ci_cpu_and_paper() -> None:
    assert available(ROOT) == PRESETS


@pytest.mark.parametrize("name", PRESETS)
def test_merged_preset_validates_and_keeps_the_old_presets_sizes(name: str) -> None:
    text = preset_text(name, ROOT)
    params = validate_params(parse_yaml(text))
    assert params.scale == name
    data = yaml.safe_load(text)
    for path, value in FACTS[name].items():
        assert at(data, path) == value, path
    assert {s: len(params.study(s).runs) for s in data["studies"]} == RUNS[name]
    assert not params.switched_off  # every preset but the default runs every study


def _settings(study) -> dict:
    """(key path, value) of every setting of a study but its runs, grid and description."""
    return dict(leaves(study.model_dump(mode="json", exclude={"runs", "grid", "description"})))


def test_the_default_preset_is_a_subset_of_the_cpu_preset() -> None:
    """`make reproduce`'s first run holds some of the cpu preset's studies, and of
    measures_grid some tasks: every run it holds is the cpu preset's run with the same settings,
    so its numbers are the cpu preset's for those runs. A study of SHRUNK_IN_DEFAULT differs in
    its listed settings alone (and so its runs, seeds 0-9 of the cpu preset's conditions), and
    its description says so."""
    default, cpu = preset_params("default"), preset_params("cpu")
    assert default.scale == "default" and default.switched_off
    assert set(default.declared_studies()) < set(cpu.declared_studies())
    assert set(SHRUNK_IN_DEFAULT) <= set(default.declared_studies())
    for name, study in default.declared_studies().items():
        full = cpu.study(name)
        if name not in SHRUNK_IN_DEFAULT:
            assert study.runs and study.runs.items() <= full.runs.items(), name
            assert study.model_dump(exclude={"runs", "grid"}) == \
                full.model_dump(exclude={"runs", "grid"}), name
            continue
        mine, theirs = _settings(study), _settings(full)
        assert mine.keys() == theirs.keys(), name
        assert {k for k in mine if mine[k] != theirs[k]} == SHRUNK_IN_DEFAULT[name], name
        conditions = {run.model_copy(update={"seed": 0}) for run in full.runs.values()}
        assert {run.model_copy(update={"seed": 0}) for run in study.runs.values()} == \
            conditions, name
        assert {run.seed for run in study.runs.values()} == set(range(10)), name
        assert len(study.runs) == 10 * len(conditions), name
        assert "for compute" in study.description and "declared condition" in study.description


@pytest.mark.parametrize("name", PRESETS)
def test_merged_text_is_params_yaml_with_the_overrides(name: str) -> None:
    """Generated header first; params.yaml's comments, key order and descriptions kept;
    everything the preset does not override is params.yaml's."""
    text = preset_text(name, ROOT)
    assert text.startswith(f"# GENERATED from params.yaml + workflow/presets/{name}.yaml by "
                           f"`genlab preset {name}`")
    assert "# How to run, never what to compute: editing these reruns nothing." in text
    data, base_, over = yaml.safe_load(text), base(), overrides(name)
    assert list(data) == list(base_) and list(data["studies"]) == list(base_["studies"])
    for study, block in data["studies"].items():
        assert block["description"] == base_["studies"][study]["description"]
    assert data == merge(base_, over)
    for path, value in leaves(over):
        assert at(data, path) == value, path


@pytest.mark.parametrize("name", PRESETS)
def test_overrides_are_minimal_and_exist_in_params_yaml(name: str) -> None:
    """Every override path is a key of params.yaml, none restates params.yaml's value (a change
    that is not about size is made once, in params.yaml), and no preset has a description."""
    base_, over = base(), overrides(name)
    assert over["scale"] == name
    for path, value in leaves(over):
        assert path[-1] != "description", path
        assert at(base_, path) != value, f"{'.'.join(path)} restates params.yaml"


@pytest.mark.parametrize("name", PRESETS)
def test_merging_is_idempotent(name: str) -> None:
    base_, over = base(), overrides(name)
    once = merge(base_, over)
    assert merge(once, over) == once
    assert yaml.safe_load(preset_text(name, ROOT)) == once


def test_the_ci_preset_keeps_its_note_on_its_runs() -> None:
    assert "so they are not_run here" in preset_text("ci", ROOT)


# --- the command ------------------------------------------------------------------------------


def test_the_cli_writes_a_file_load_params_accepts(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "params.yaml"
    assert main(["preset", "ci", "--out", str(out)]) == 0
    assert out.read_text() == preset_text("ci", ROOT)
    assert load_params(out).scale == "ci"
    capsys.readouterr()
    assert main(["preset", "paper"]) == 0
    assert capsys.readouterr().out == preset_text("paper", ROOT)


def test_the_cli_reports_an_unknown_preset_and_exits_2(monkeypatch, capsys) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["preset", "huge"]) == 2
    assert "genlab preset: error: no preset 'huge'" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "least"), [("default", 3), ("paper", 5)])
def test_every_condition_of_every_study_has_enough_independent_seeds(name: str,
                                                                     least: int) -> None:
    """A literature claim rests on >= 3 seeds (default) / >= 5 (paper), each its own data draw:
    every combination of a study's run settings but the seed has that many seeds."""
    raw = base() if name == "default" else yaml.safe_load(preset_text(name))
    for study, block in raw["studies"].items():
        groups: dict[tuple, set[int]] = {}
        for run in block["runs"].values():
            key = tuple(sorted((k, v) for k, v in run.items() if k != "seed"))
            groups.setdefault(key, set()).add(run["seed"])
        thin = {k: sorted(v) for k, v in groups.items() if len(v) < least}
        assert not thin, (study, thin)
