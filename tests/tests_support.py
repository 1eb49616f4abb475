"""Helpers for workflow tests: a throwaway copy of the project and subprocess plumbing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CI_PRESET = ROOT / "workflow" / "presets" / "ci.yaml"
"""The ci preset's overrides only: a params file is :func:`ci_params_text`."""


def ci_params_text() -> str:
    """The full params file of the ci preset: params.yaml with the ci overrides applied."""
    from genlab.presets import preset_text

    return preset_text("ci", ROOT)


def preset_params(name: str):
    """The validated params of a preset: params.yaml for ``default``, else merged with its
    overrides (genlab.presets)."""
    from genlab.config import load_params, parse_yaml, validate_params
    from genlab.presets import preset_text

    if name == "default":
        return load_params(ROOT / "params.yaml")
    return validate_params(parse_yaml(preset_text(name, ROOT)))


def tool_env(home: Path | None = None) -> dict[str, str]:
    """Environment for subprocesses: this interpreter's tools first, git identity, and a HOME of
    the test's own so nothing touches the user's caches or DVC remote."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(GIT_AUTHOR_NAME="genlab tests", GIT_AUTHOR_EMAIL="tests@genlab.invalid",
               GIT_COMMITTER_NAME="genlab tests", GIT_COMMITTER_EMAIL="tests@genlab.invalid")
    if home is not None:
        env["HOME"] = str(home)
    return env


def run(args: list[str], cwd: Path, env: dict[str, str], check: bool = True,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {proc.returncode}\n--- stdout\n"
                             f"{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")
    return proc


def copy_project(dest: Path, env: dict[str, str]) -> Path:
    """The project's files as a fresh clone would have them (tracked and not ignored), on the ci
    preset, committed in a new git repository."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        if rel == "dvc.lock":  # a run's record (not committed): a fresh clone has none
            continue
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    (dest / "params.yaml").write_text(ci_params_text())
    # dvc.yaml for the ci preset's seeds (the committed one is the default preset's), as a user
    # switching presets runs it; Snakemake regenerates it by itself
    run(["genlab", "dag", "--write"], dest, env)
    run(["git", "init", "-q", "-b", "main"], dest, env)
    run(["git", "add", "-A"], dest, env)
    run(["git", "commit", "-q", "-m", "ci preset"], dest, env)
    return dest


def held(claim) -> str:
    """The status of a claim that holds: reproduced, or passed for a control."""
    return "passed" if claim.kind == "control" else "reproduced"


def broken(claim) -> str:
    """The status of a claim that does not hold: not reproduced, or failed for a control."""
    return "failed" if claim.kind == "control" else "not_reproduced"


def pipeline_datasets(spec, config) -> dict:
    """Each run's Dataset as the train stage gives it: its seed's draw (genlab.data.draws),
    synthesized once and shared by the runs of that draw."""
    from genlab.data.draws import draw_settings, run_draw_id

    built = {draw: spec.synthesize(draw_settings(config, draw))
             for draw in {run_draw_id(config, name) for name in config.runs}}
    return {name: built[run_draw_id(config, name)] for name in config.runs}


def assert_group_trains_each_run_as_alone(spec, config, datasets) -> dict:
    """Every run of ``config`` through the study's group trainer at once equals, file for file
    and bit for bit (metrics, history, the same weight tensors), the run trained alone by
    ``train_run``; returns the group's artifacts by run."""
    import torch

    cpu = torch.device("cpu")
    grouped = spec.train_group(config, list(config.runs), datasets, cpu)
    assert list(grouped) == list(config.runs)
    for name, artifacts in grouped.items():
        alone = spec.train_run(config, name, datasets[name], cpu)
        assert artifacts.metrics == alone.metrics, name
        assert artifacts.history.equals(alone.history), name
        assert artifacts.weights.keys() == alone.weights.keys(), name
        for key, tensor in alone.weights.items():
            assert torch.equal(tensor, artifacts.weights[key]), (name, key)
    return grouped
