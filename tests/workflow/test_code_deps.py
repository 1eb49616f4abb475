"""Each stage's code dependencies are the genlab files its command imports (genlab.workflow)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from test_presets import SHRUNK_IN_DEFAULT

from genlab.workflow.code_deps import CodeDeps
from genlab.workflow.code_digest import closure_sources
from genlab.workflow.generate import render
from tests_support import ROOT, preset_params

TRACE = "src/genlab/analyses/curvature/trace.py"


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / "src" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_closure_follows_every_import_that_runs(tmp_path: Path) -> None:
    write(tmp_path, {
        "genlab/__init__.py": "",
        "genlab/a.py": "import os\nfrom genlab import b\n\ndef f():\n    import genlab.c.d\n",
        "genlab/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                       "    from genlab import never\nelse:\n    from . import e\n",
        "genlab/c/__init__.py": "",
        "genlab/c/d.py": "from .f import g\n",
        "genlab/c/f.py": "g = 1\n",
        "genlab/e.py": "",
        "genlab/never.py": "",
        "genlab/unused.py": "",
    })
    deps = CodeDeps(tmp_path)
    assert deps.closure(["genlab.a"]) == {
        "genlab", "genlab.a", "genlab.b", "genlab.e", "genlab.c", "genlab.c.d", "genlab.c.f"}
    assert deps.files(["genlab.c.f"]) == ["src/genlab/__init__.py", "src/genlab/c/__init__.py",
                                          "src/genlab/c/f.py"]


def preset_stages(preset: str) -> dict[str, dict]:
    """The dvc.yaml stages of a preset (``default``: params.yaml itself), by name."""
    return yaml.safe_load(render(preset_params(preset), ROOT))["stages"]


@pytest.fixture(scope="module")
def stages() -> dict[str, dict]:
    """Every study's stages: the cpu preset's (the default switches ten studies off)."""
    return {name: st.get("do", st) for name, st in preset_stages("cpu").items()}


_CODE = CodeDeps(ROOT)  # the sources parsed once for every stage's question


def code_files(st: dict) -> list[str]:
    """The source files a stage depends on, through its closure digests
    (genlab.workflow.code_digest)."""
    return closure_sources(st["deps"], ROOT, _CODE)


def test_no_stage_depends_on_a_whole_source_folder(stages) -> None:
    """Each stage depends on its sources' digests, through a few closure digests; only the
    code_digests stage reads the sources themselves (the whole package)."""
    for name, st in stages.items():
        if name == "code_digests":
            assert st["deps"] == ["src/genlab"]
            continue
        assert not any(d.startswith("src/") for d in st["deps"]), name
        code = code_files(st)
        assert code and all(d.endswith((".py", ".j2")) and (ROOT / d).is_file() for d in code), name


def test_an_analysis_module_reaches_only_the_stages_that_import_it(stages) -> None:
    """trace.py is the curvature code's: the sharpness analysis and the studies that measure
    curvature while training (eos_gd, sgd_stability), compute it as a measure (measures_grid,
    and neural_collapse through the measures package) or solve with curvature operators
    (influence, influence_mnist1d, mislabel_detection). The intrinsic-dimension analysis,
    random_labels' training and the studies without curvature do not import it."""
    reach = {name for name, st in stages.items() if TRACE in code_files(st)}
    assert {"random_labels_sharpness", "benign_oscillation_sharpness", "eos_gd_sharpness",
            "sgd_stability_sharpness"} <= reach
    assert not reach & {"check_params", "random_labels_synthesize_s0", "random_labels_train_s0-9",
                        "random_labels_intrinsic_dim", "random_labels_aggregate",
                        "double_descent_train", "benign_oscillation_train",
                        "intrinsic_dim_train_s0-1", "intrinsic_dim_aggregate"}


def test_settings_import_no_study_code(stages) -> None:
    """The gate (and every stage, through params validation) depends on the settings modules
    only: no experiment, generator, model, training or analysis code."""
    gate = code_files(stages["check_params"])
    code = [d for d in gate if d.startswith(("src/genlab/data/", "src/genlab/models/",
                                             "src/genlab/train/", "src/genlab/analyses/",
                                             "src/genlab/studies/", "src/genlab/report/"))]
    assert code, "the gate validates the studies' settings"
    for path in code:
        # draws.py: the seeds of the runs, which name the synthesize stages (no numpy)
        assert Path(path).name in ("__init__.py", "settings.py", "binary_settings.py",
                                   "penalised_gd_settings.py", "repetition_settings.py",
                                   "attribution_settings.py", "entry.py", "registry.py",
                                   "draws.py"), path
    assert "src/genlab/analyses/registry.py" in gate  # the analyses' names, not their code


def test_committed_dvc_yaml_is_current() -> None:
    """dvc.yaml is generated from params.yaml (the default preset)."""
    from genlab.config import load_params

    assert (ROOT / "dvc.yaml").read_text() == render(load_params(ROOT / "params.yaml"), ROOT), (
        "dvc.yaml is stale: run `genlab dag --write`")


@pytest.mark.parametrize("preset", ["ci", "paper"])
def test_a_preset_differs_from_the_cpu_presets_dvc_yaml_only_in_its_seeds_data_stages(
        preset: str) -> None:
    """The presets that run every study declare the same studies and analyses; their seeds
    differ, and so their per-seed stages (synthesize; a grouped study's train): switching
    presets, `genlab dag --write` (Snakemake does it itself; DVC's gate asks for it) renders
    those and nothing else differs in kind."""
    full, other = preset_stages("cpu"), preset_stages(preset)
    differ = set(full) ^ set(other)
    per_seed = re.compile("_(synthesize_s[0-9]+|train_s[0-9]+(-[0-9]+)?)$")  # s3; a block s0-1
    assert differ and all(per_seed.search(stage) for stage in differ), sorted(differ)


def test_the_default_dvc_yaml_is_the_cpu_presets_without_the_switched_off_studies() -> None:
    """The default preset (the committed dvc.yaml) is the cpu preset with three studies switched
    off, measures_grid's MNIST-1D grid left out, influence and neural_collapse at 10 of the cpu
    preset's 20 seeds: it has no stage of the studies switched off, none of those other seeds,
    and every stage it has is the cpu preset's, the same command on the same tracked params,
    with the same files or fewer (measures_grid's runs; the report's summaries). The studies
    shrunk for compute (SHRUNK_IN_DEFAULT: other values of the same params, 10 seeds where the
    cpu preset has 3) have the cpu preset's stages, the same commands, and one synthesize stage
    (and, grouped by seed, one train stage) more per seed; a seed block's train stage lists
    its seeds, 0-9 where the cpu preset's lists 0-2."""
    off = preset_params("default").switched_off
    default, full = preset_stages("default"), preset_stages("cpu")

    def study_of(stage: str, studies=off) -> str:  # the longest study prefix: influence_mnist1d's
        return max((s for s in studies if stage.startswith(f"{s}_")), key=len, default="")

    more_seeds = {f"{study}_synthesize_s{seed}" for study in ("influence", "neural_collapse")
                  for seed in range(10, 20)}
    assert off and set(full) - set(default) == {s for s in full if study_of(s)} | more_seeds
    shrunk = {n for n in default if study_of(n, SHRUNK_IN_DEFAULT)}
    assert {n for n in full if study_of(n, SHRUNK_IN_DEFAULT)} < shrunk
    for name in shrunk - set(full):
        assert re.fullmatch(r"\w+_(synthesize|train)_s[3-9]", name), name
    def command(stages: dict, name: str) -> str:  # a seed block's stage lists the seeds it has
        return re.sub(r"--seed( [0-9]+)+", "--seed …", stages[name].get("do", stages[name])["cmd"])

    for name in shrunk & set(full):
        assert command(default, name) == command(full, name), name
    fewer = set()
    for name, stage in default.items():
        if name in shrunk:
            continue
        other = full[name]
        assert stage.keys() == other.keys(), name
        for key in stage:
            if key in ("deps", "outs") and stage[key] != other[key]:
                assert set(map(str, stage[key])) < set(map(str, other[key])), (name, key)
                fewer.add(name)
            elif name == "check_params" and key == "cmd":  # its --layout names the stage set
                assert stage[key].split(" --layout ")[0] == other[key].split(" --layout ")[0]
            elif name == "report" and key == "cmd":  # the summaries of the studies that run
                assert stage[key].split() == [w for w in other[key].split()
                                              if w not in {f"data/{s}" for s in off}]
            else:
                assert stage[key] == other[key], (name, key)
    assert {re.sub("_train_s[0-9]+(-[0-9]+)?$", "_train", n) for n in fewer} == {
        "measures_grid_train", "report"}, sorted(fewer)


def test_write_skips_rendering_until_params_code_or_dvc_yaml_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Snakefile calls write() at every parse: it renders only when what dvc.yaml is made
    from changed (params, a source file, dvc.yaml itself), and then gives the same file."""
    import os
    import shutil

    import genlab.workflow.generate as generate
    from genlab.config import load_params

    shutil.copytree(ROOT / "src", tmp_path / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    params = load_params(tmp_path / "params.yaml")
    assert generate.write(tmp_path, params) is True
    dvc_yaml = tmp_path / "dvc.yaml"
    assert dvc_yaml.read_text() == (ROOT / "dvc.yaml").read_text()
    real, calls = generate.render, []

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(generate, "render", counted)
    assert generate.write(tmp_path, params) is False and calls == []
    trace = tmp_path / TRACE
    os.utime(trace, ns=(trace.stat().st_atime_ns, trace.stat().st_mtime_ns + 10**9))
    assert generate.write(tmp_path, params) is False and len(calls) == 1  # rendered, same text
    dvc_yaml.write_text(dvc_yaml.read_text().replace("stages:", "stages:  # edited", 1))
    assert generate.write(tmp_path, params) is True and len(calls) == 2
    assert dvc_yaml.read_text() == (ROOT / "dvc.yaml").read_text()
    raw = yaml.safe_load((tmp_path / "params.yaml").read_text())
    raw["studies"]["random_labels"]["enabled"] = False
    (tmp_path / "off.yaml").write_text(yaml.safe_dump(raw))
    assert generate.write(tmp_path, load_params(tmp_path / "off.yaml")) is True
    assert len(calls) == 3 and "random_labels_train" not in dvc_yaml.read_text()


def test_a_stage_lists_the_closures_that_cover_all_its_roots(tmp_path: Path) -> None:
    """A root inside another root's closure is left out, a missing module gives nothing, and the
    closures listed hold every file of the roots' import closure (genlab.workflow.generate)."""
    from genlab.workflow.code_digest import closure_path
    from genlab.workflow.generate import _Builder

    write(tmp_path, {"genlab/__init__.py": "", "genlab/a.py": "from genlab import b\n",
                     "genlab/b.py": "from genlab import d\n", "genlab/c.py": "", "genlab/d.py": ""})
    roots = ["genlab.b", "genlab.a", "genlab.c", "genlab.missing"]
    listed = _Builder(None, tmp_path).digests(roots)  # type: ignore[arg-type]
    assert listed == [closure_path("genlab.a"), closure_path("genlab.c")]
    deps = CodeDeps(tmp_path)
    assert closure_sources(listed, tmp_path, deps) == deps.files(roots)
