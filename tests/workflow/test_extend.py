"""Adding a study and an analysis touches only the places the README names, and both engines run
them: the study's package, its params block and its tests; the analysis' module, its registry
entry and its tests. dvc.yaml, the schema and the stages follow (tests/workflow/toy/ holds the
files; this test copies them into a throwaway project)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests_support import ROOT, copy_project, run, tool_env

pytestmark = pytest.mark.workflow

TOY = ROOT / "tests/workflow/toy"
REGISTRY_SETTINGS = '''class ToyNormSettings(FrozenModel):
    power: float = Field(2.0, gt=0)


ANALYSES: dict[str, AnalysisSpec] = '''
REGISTRY_ENTRY = '''    AnalysisSpec(
        "toy_norm", ToyNormSettings, "A toy analysis: the parameters' norm; null = skip.",
        record="genlab.analyses.toy_norm:record", view="genlab.analyses.toy_norm:view",
        tables=("norms",)),
)}'''
TOY_BLOCK = {
    "data": {"n_classes": 3, "dim": 4, "mean_scale": 2.0, "n_train": 60, "n_test": 60,
             "seed": 0},
    "model": {"hidden": [8]},
    "train": {"optimizer": "gd", "lr": 0.1, "max_steps": 40, "eval_every": 20},
    "analyses": {"toy_norm": {"power": 2.0}},
    "runs": {"s0": {"seed": 0}, "s1": {"seed": 1}},
}


def add_toy(project: Path) -> None:
    # the study: its package
    shutil.copytree(TOY / "study", project / "src/genlab/studies/toy")
    # the analysis: its module and its registry entry
    shutil.copy2(TOY / "analysis/toy_norm.py", project / "src/genlab/analyses/toy_norm.py")
    registry = project / "src/genlab/analyses/registry.py"
    text = registry.read_text()
    assert text.count("\n)}\n") == 1
    text = text.replace("\n)}\n", "\n" + REGISTRY_ENTRY + "\n", 1)
    # its settings beside its entry: the registry stays free of analysis code, so only the
    # analysis' own stages depend on its module
    assert text.count("ANALYSES: dict[str, AnalysisSpec] = ") == 1
    text = text.replace("ANALYSES: dict[str, AnalysisSpec] = ", REGISTRY_SETTINGS, 1)
    registry.write_text(text)
    # the study's params block
    params = project / "params.yaml"
    raw = yaml.safe_load(params.read_text())
    raw["studies"]["toy"] = TOY_BLOCK
    params.write_text(yaml.safe_dump(raw, sort_keys=False))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    env = tool_env(tmp_path_factory.mktemp("home"))
    root = copy_project(tmp_path_factory.mktemp("extend"), env)
    add_toy(root)
    # the copy's sources, not the installed (editable) genlab of this checkout
    env["PYTHONPATH"] = str(root / "src")
    return root, env


def test_the_toy_study_and_analysis_run_in_snakemake(project) -> None:
    root, env = project
    run(["genlab", "check-params"], root, env)
    # Snakemake regenerates dvc.yaml itself; the toy stages are there, with the analysis
    run(["snakemake", "--cores", "2", "data/toy/summary.json"], root, env, timeout=900)
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    assert {"toy_synthesize_s0", "toy_synthesize_s1", "toy_train", "toy_toy_norm",
            "toy_aggregate"} <= set(stages)
    norm = "data/code/closure/genlab.analyses.toy_norm.digest"  # genlab.workflow.code_digest
    assert norm in stages["toy_toy_norm"]["deps"]
    assert norm not in stages["toy_train"]["do"]["deps"]
    assert (root / norm).is_file()  # Snakemake's parse wrote the new module's digests
    assert (root / "data/code/genlab/analyses/toy_norm.py.digest").is_file()
    summary = json.loads((root / "data/toy/summary.json").read_text())
    assert summary["claims"][0]["study"] == "toy"
    norms = summary["analyses"]["toy_norm"]
    assert set(norms) == {"s0", "s1"} and all(r["norm"] > 0 for r in norms.values())
    assert (root / "data/toy/toy_norm_norms.parquet").is_file()
    assert (root / "data/toy/plots/test_acc.csv").is_file()
    # recorded in DVC after the run: the toy stages are up to date there too
    status = json.loads(run(["dvc", "status", "--json"], root, env).stdout)
    assert not [s for s in status if s.startswith("toy_")], status


def test_the_toy_study_and_analysis_run_in_dvc(project) -> None:
    root, env = project
    before = json.loads((root / "data/toy/summary.json").read_text())
    shutil.rmtree(root / "data/toy")
    run(["dvc", "repro", "--force", "--no-run-cache", "toy_aggregate"], root, env, timeout=900)
    after = json.loads((root / "data/toy/summary.json").read_text())
    assert after["analyses"] == before["analyses"]
    assert after["claims"] == before["claims"]
