"""A study switched off (``enabled: false``) or deleted: a valid params file, no stages, and the
report lists a switched-off study as not run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from genlab.config import ParamsError, load_params
from genlab.workflow.generate import render
from tests_support import ROOT, ci_params_text


def params_file(tmp_path: Path, edit) -> Path:
    raw = yaml.safe_load(ci_params_text())
    edit(raw["studies"])
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_switched_off_and_deleted_studies_have_no_stages(tmp_path: Path) -> None:
    def edit(studies):
        studies["eos_gd"]["enabled"] = False
        studies["random_labels"]["enabled"] = True
        del studies["neural_collapse"]
    params = load_params(params_file(tmp_path, edit))
    assert params.switched_off == ("eos_gd",)
    assert "eos_gd" not in params.declared_studies()
    assert "random_labels" in params.declared_studies()
    stages = yaml.safe_load(render(params, ROOT))["stages"]
    assert not [s for s in stages if s.startswith(("eos_gd_", "neural_collapse_"))]
    assert "random_labels_train_s0-9" in stages
    report = stages["report"]["cmd"]
    assert "data/eos_gd" not in report and "data/random_labels" in report


def test_enabled_must_be_a_boolean_and_one_study_must_stay_on(tmp_path: Path) -> None:
    def text(studies):
        studies["eos_gd"]["enabled"] = "no"
    with pytest.raises(ParamsError, match=r"studies\.eos_gd\.enabled: must be true or false"):
        load_params(params_file(tmp_path, text))

    def all_off(studies):
        for study in studies.values():
            study["enabled"] = False
    with pytest.raises(ParamsError, match="every declared study is switched off"):
        load_params(params_file(tmp_path, all_off))


def test_a_switched_off_block_is_still_validated(tmp_path: Path) -> None:
    def bad(studies):
        studies["eos_gd"]["enabled"] = False
        studies["eos_gd"]["recipe"]["steps"] = 0
    with pytest.raises(ParamsError, match=r"studies\.eos_gd\.recipe\.steps"):
        load_params(params_file(tmp_path, bad))


def test_the_report_lists_a_switched_off_study_as_not_run(tmp_path: Path) -> None:
    from genlab.report.collect import collect

    def edit(studies):
        studies["eos_gd"]["enabled"] = False
    report = collect(load_params(params_file(tmp_path, edit)), {})
    (off,) = [m for m in report.missing if m.name == "eos_gd"]
    assert "switched off" in off.reason
