"""One DAG, two engines: Snakemake's rules are DVC's stages, job for job (no execution here)."""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath

import pytest

from genlab import paths
from genlab.analyses.registry import ANALYSES
from tests_support import ROOT, copy_project, run, tool_env

pytestmark = pytest.mark.workflow

# Runs in a subprocess: Snakemake's API changes the working directory and global state.
SNAKEMAKE_RULES = """
import json
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import OutputSettings, Quietness, ResourceSettings
with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
    wf = api.workflow(resource_settings=ResourceSettings(cores=1), snakefile=Path("Snakefile"),
                      workdir=Path("."))
    rules = wf._workflow.rules
    print(json.dumps({r.name: {
        "input": list(r.input), "output": list(r.output), "log": list(r.log),
        "params": {k: v for k, v in r.params.items()}, "shell": r.shellcmd,
        "resources": {k: getattr(v, "raw", v) for k, v in r.resources.items()
                      if isinstance(getattr(v, "raw", v), int) and not k.startswith("_")},
    } for r in rules}))
"""

DVC_STAGES = """
import json
from dvc.dependency.param import ParamsDependency
from dvc.repo import Repo
with Repo(".") as repo:
    out = {}
    for st in repo.index.stages:
        params, deps = {}, []
        for d in st.deps:
            if isinstance(d, ParamsDependency):
                params.update(d.read_params())
            else:
                deps.append(str(d.def_path))
        out[st.addressing] = {"cmd": st.cmd, "deps": deps, "params": params,
                              "outs": [str(o.def_path) for o in st.outs], "meta": st.meta,
                              "plots": {str(o.def_path): o.plot for o in st.outs if o.plot}}
    print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, Path]:
    home = tmp_path_factory.mktemp("home")
    env = tool_env(home)
    project = copy_project(tmp_path_factory.mktemp("dag"), env)
    python = str(Path(env["PATH"].split(":")[0]) / "python")
    snake = json.loads(run([python, "-c", SNAKEMAKE_RULES], project, env).stdout)
    dvc = json.loads(run([python, "-c", DVC_STAGES], project, env).stdout)
    return snake, dvc, project


def rule_name(stage: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in stage)


def test_one_rule_per_stage_and_nothing_else(engines) -> None:
    snake, dvc, _ = engines
    assert set(snake) - {"all"} == {rule_name(s) for s in dvc}
    assert len(dvc) == len(snake) - 1  # no two stages collapse into one rule name


def test_same_commands_and_outputs(engines) -> None:
    snake, dvc, _ = engines
    for stage, st in dvc.items():
        rule = snake[rule_name(stage)]
        assert rule["params"] == {"dvc_cmd": st["cmd"]}, stage
        assert rule["shell"] == "{params.dvc_cmd} > {log} 2>&1"
        assert rule["output"] == st["outs"], stage
        assert rule["log"] == [st["meta"]["log"]]


def test_genlab_reads_dvc_yaml_as_dvc_does(engines) -> None:
    """genlab's own reading of dvc.yaml (fast enough for every Snakemake start) gives DVC's
    stages: commands, dependencies, outputs, meta, and every tracked param with DVC's value."""
    from genlab.workflow.adapter import dvc_jobs

    _, dvc, project = engines
    jobs = {j.stage: j for j in dvc_jobs(project)}
    assert list(jobs) == list(dvc)
    for stage, st in dvc.items():
        job = jobs[stage]
        assert (job.cmd, list(job.deps), list(job.outs), job.meta) == (
            st["cmd"], st["deps"], st["outs"], st["meta"]), stage
        assert job.params == st["params"], stage


def test_same_inputs(engines) -> None:
    """Each DVC dependency is a Snakemake input, except genlab's source files and the gates'
    outputs (the code digests, the params stamp: the fingerprint judges those, and reconcile
    brings the gates up to date at parse time; tests/workflow/test_workflow.py edits a source);
    folders expand into what DVC hashes in them."""
    snake, dvc, project = engines
    gate_outs = {o for st in dvc.values() if st["meta"].get("gate") for o in st["outs"]}
    all_outs = {o for st in dvc.values() for o in st["outs"]}
    folder_outs = {o for o in all_outs if not PurePosixPath(o).suffix}  # dvc.yaml's naming rule
    for stage, st in dvc.items():
        inputs = set(snake[rule_name(stage)]["input"])
        # the marker genlab makes newer than the outputs of a stale stage (genlab.workflow.sync)
        assert f".genlab/stale/{rule_name(stage)}" in inputs
        inputs.discard(f".genlab/stale/{rule_name(stage)}")
        expected = set()
        for dep in st["deps"]:
            if any(PurePosixPath(dep).is_relative_to(o) for o in gate_outs):
                continue  # only DVC orders stages behind the gates
            enclosing = {o for o in folder_outs if PurePosixPath(dep).is_relative_to(o)}
            if enclosing:  # a folder another stage writes: Snakemake waits on all of it
                expected |= enclosing
                continue
            inside = {o for o in all_outs if PurePosixPath(o).is_relative_to(dep) and o != dep}
            if inside:
                expected |= inside
            elif dep not in all_outs and PurePosixPath(dep).is_relative_to("src"):
                continue
            elif (project / dep).is_dir():
                expected |= {p.relative_to(project).as_posix()
                             for p in (project / dep).rglob("*") if p.is_file()}
            else:
                expected.add(dep)
        assert inputs == expected, stage
        assert not any(i.startswith(("src/", "data/code/")) for i in inputs), stage


def test_gates_guard_every_stage_in_dvc(engines) -> None:
    """The code digests come first (the one stage reading the sources' bytes), then the params
    check; every other stage depends on the params stamp and on code digests, never on a
    source file."""
    _, dvc, _ = engines
    gates = [s for s, st in dvc.items() if st["meta"].get("gate")]
    assert gates == ["code_digests", "check_params"] == list(dvc)[:2]
    assert dvc["code_digests"]["deps"] == ["src/genlab"]
    assert dvc["code_digests"]["outs"][0] == "data/code"
    stamp = dvc["check_params"]["outs"][0]
    for s, st in dvc.items():
        if s == "code_digests":
            continue
        assert s == "check_params" or stamp in st["deps"], s
        code = [d for d in st["deps"] if d.startswith("data/code/")]
        assert code and all(d.endswith(".digest") for d in code), s
        assert not any(d.startswith("src/") for d in st["deps"]), s
    assert "runtime" not in dvc["check_params"]["params"]  # a runtime edit must not rerun it


def test_resources_come_from_meta(engines) -> None:
    """Declared resources reach the rules; `gpu` only where the stages will run on CUDA (the ci
    preset's runtime.device is auto; tests/workflow/test_gpu_resources.py covers cuda and cpu)."""
    import torch

    snake, dvc, _ = engines
    for stage, st in dvc.items():
        want = dict(st["meta"].get("resources", {}))
        if "gpu" in want and not torch.cuda.is_available():
            want["gpu"] = 0
        got = snake[rule_name(stage)]["resources"]
        assert {k: got.get(k) for k in want} == want, stage


def test_exactly_the_torch_stages_declare_a_gpu(engines) -> None:
    _, dvc, _ = engines
    for stage, st in dvc.items():
        # python -m genlab --stage NAME <command>
        torch_stage = st["cmd"].split()[5] in ("train", "analyze")
        assert st["meta"].get("resources", {}).get("gpu") == (1 if torch_stage else None), stage


def test_paths_follow_genlab_paths(engines) -> None:
    from genlab.config import load_params
    from genlab.data.draws import seeds

    _, dvc, project = engines
    params = load_params(project / "params.yaml")
    for stage, st in dvc.items():
        # every stage stamps its outputs with its inputs (genlab.workflow.fingerprint)
        assert str(paths.stamp(stage)) in st["outs"], stage
        outs = [o for o in st["outs"] if o != str(paths.stamp(stage))]
        if "_train@" in stage:
            study, run_id = stage.split("_train@")
            assert outs == [str(paths.run_dir(study, run_id) / f) for f in paths.RUN_FILES]
        elif stage.endswith("_train"):  # a group: the whole sweep, into the runs folder
            assert outs == [str(paths.runs_dir(stage.removesuffix("_train")))]
        elif stage.endswith(("_sharpness", "_intrinsic_dim")):
            study, analysis = next((stage.removesuffix(f"_{a}"), a) for a in ANALYSES
                                   if stage.endswith(f"_{a}"))
            assert outs == [str(paths.analysis_dir(study, analysis))]
        elif "_synthesize_s" in stage:  # one stage per seed of the runs: its folder
            study, seed = stage.rsplit("_synthesize_s", 1)
            assert int(seed) in seeds(params.study(study)), stage
            assert outs == [*paths.draw_files(study, seed),
                            str(paths.dataset_dir(study) / f"s{seed}" / paths.DATASET_PROVENANCE)]
        elif "_train@" in stage:  # a run depends on its own seed's draws, not the others'
            study, run_id = stage.split("_train@")
            seed = params.study(study).runs[run_id].seed
            drawn = [d for d in st["deps"] if d.startswith(str(paths.dataset_dir(study)))]
            assert drawn == paths.draw_files(study, seed), stage
        elif stage == "report":
            assert outs == [str(paths.REPORTS / f) for f in paths.REPORT_FILES]


def test_plots_are_the_studies_plot_specs(engines) -> None:
    """Each study's aggregate declares as DVC plots exactly its StudySpec.plots (the CSVs
    ``genlab aggregate`` writes), with the same axes, template and title; no other stage has
    plots."""
    from genlab.studies import STUDIES

    _, dvc, _ = engines
    for stage, st in dvc.items():
        study = stage.removesuffix("_aggregate")
        if study == stage or study not in STUDIES:
            assert st["plots"] == {}, stage
            continue
        expected = {str(paths.study_dir(study) / p.file): {
            "x": p.x, "y": p.y, "template": p.template, "title": p.title}
            for p in STUDIES[study].plots}
        assert st["plots"] == expected, stage
        assert set(expected) <= set(st["outs"]), stage  # cached outputs: Snakemake's too


def test_every_declared_run_has_a_train_stage(engines) -> None:
    from genlab.config import load_params
    from genlab.data.draws import runs_of_seeds, seed_blocks
    from genlab.studies import STUDIES

    _, dvc, project = engines
    params = load_params(project / "params.yaml")
    for study, config in params.declared_studies().items():
        per_run = {s.split("@")[1] for s in dvc if s.startswith(f"{study}_train@")}
        groups = {s for s in dvc if re.fullmatch(f"{study}_train_s[0-9]+(-[0-9]+)?", s)}
        group = bool(groups)
        assert per_run == set() if group else per_run == set(config.runs), study
        # a study trains as a group exactly when it has a group trainer, one group per block of
        # seeds, whose outputs are the runs of those seeds
        entry = STUDIES[study]
        assert group == entry.grouped, study
        if group:
            blocks = seed_blocks(config, entry.seed_block)
            assert groups == {f"{study}_train_{block}" for block in blocks}, study
            for block, block_seeds in blocks.items():
                outs = {o.rsplit("/", 1)[1] for o in dvc[f"{study}_train_{block}"]["outs"]
                        if "/runs/" in o}
                assert outs == set(runs_of_seeds(config, block_seeds)), (study, block)


def test_snakemake_lint_is_clean(engines) -> None:
    _, _, project = engines
    proc = run(["snakemake", "--lint"], project, tool_env(), check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_snakemake_reads_the_workflow_profile(engines) -> None:
    """mtime must be Snakemake's only rerun trigger (profiles/default; genlab.workflow.sync),
    and Snakemake looks for a workflow profile only in profiles/default, beside the Snakefile or
    in the working folder: from workflow/profiles/ it was silently never read."""
    _, _, project = engines
    proc = run(["snakemake", "-n", "--cores", "1"], project, tool_env(), check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "workflow specific profile profiles/default" in proc.stdout + proc.stderr
    assert "rerun-triggers: mtime" in (project / "profiles/default/config.yaml").read_text()


def test_root_files_are_where_the_brief_says() -> None:
    for name in ("Snakefile", "dvc.yaml", "params.yaml", "workflow", "src", "tests"):
        assert (ROOT / name).exists(), name


def test_sidecars_record_exactly_the_settings_dvc_tracks(engines) -> None:
    """A stage's provenance (genlab.cli.stage_settings) covers the params dvc.yaml tracks for it,
    no more: otherwise a kept artifact and a fresh one would record different settings."""
    from genlab.config import load_params
    from genlab.stages.settings import run_blocks, stage_settings

    _, dvc, project = engines
    params = load_params(project / "params.yaml")
    studies = params.declared_studies()
    for study, config in studies.items():
        for stage, st in dvc.items():
            # the study whose name is the longest prefix (influence_mnist1d's are not influence's)
            if max((s for s in studies if stage.startswith(f"{s}_")), key=len,
                   default=None) != study:
                continue
            kind, _, run_id = stage.removeprefix(f"{study}_").partition("@")
            seed = None
            if kind.startswith("synthesize_s"):
                kind, seed = "synthesize", int(kind.removeprefix("synthesize_s"))
            elif kind.startswith("train_s"):  # a grouped study's group of one seed's runs
                kind = "train"
            recorded = stage_settings(config, kind, run_id or None, seed=seed)
            prefix = f"studies.{study}"
            tracked = {k.removeprefix(prefix).lstrip(".") for k in st["params"]}
            if kind == "aggregate":
                assert tracked == {""}, stage  # the whole study block
                assert recorded == config.model_dump(mode="json")
            else:
                # a run's own block; a seed's draws, which the runs name only when they carry
                # data conditions (otherwise the stage's seed and the data block fix them)
                conditions = getattr(config, "DATA_FIELDS", ())
                draws_from = set(run_blocks(config)) if conditions else set()
                expected = {f"runs.{run_id}" if k == "run" else k for k in recorded
                            if k != "draws"} | (draws_from if "draws" in recorded else set())
                assert tracked == expected, stage
                if kind == "train" and not run_id:  # a group: each run's sidecar, its own run
                    for run in config.runs:
                        one = stage_settings(config, "train", run)
                        assert one["run"] == recorded["runs"][run]
                        assert one.keys() - {"run"} == recorded.keys() - {"runs"}


def test_dvc_ignores_the_caches_written_beside_the_code(tmp_path: Path) -> None:
    """numba writes compiled kernels into src/genlab/analyses/__pycache__ when they are first
    used (and Python its bytecode): DVC must not count them in the src/ folders stages depend on,
    or a run that meets a new argument type would make every such stage look changed."""
    env = tool_env(tmp_path / "home")
    project = copy_project(tmp_path / "project", env)
    cache = project / "src/genlab/analyses/__pycache__"
    cache.mkdir()
    written = [cache / "neighbor_screen.scan_diagonal-120.py311.nbi",
               cache / "neighbor_screen.cpython-311.pyc"]
    for path in written:
        path.write_bytes(b"\0")
    relative = [p.relative_to(project).as_posix() for p in written]
    ignored = run(["dvc", "check-ignore", *relative], project, env)
    assert ignored.stdout.split() == relative
    source = run(["dvc", "check-ignore", "src/genlab/analyses/dimension/neighbor_screen.py"],
                 project, env, check=False)
    assert source.returncode == 1 and not source.stdout.strip()
