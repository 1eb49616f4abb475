"""DVC's parsed stages as Snakemake jobs: the adapter behind ``workflow/rules/from_dvc.smk``.

``dvc.yaml`` is the one definition of the pipeline. This module asks DVC itself to parse it
(templating, ``foreach`` and all) and turns each stage into a job description that the Snakefile
makes a rule of, so the two engines cannot drift apart:

- DVC ``deps`` become Snakemake inputs. A dependency on a folder is expanded: into the outputs of
  the stages inside it (so Snakemake sees the edges DVC sees), or, for a source folder, into its
  files (Snakemake compares a folder's own mtime, which file edits do not change).
- An output whose name has no extension is a folder (a group stage's ``runs/``): Snakemake gets
  it as ``directory()``, and a dependency on it, or on anything inside it, becomes an input on
  the folder (Snakemake cannot depend on part of another rule's folder; DVC can, and does).
- DVC ``params`` become Snakemake ``params`` holding their *values*, since Snakemake notices a
  settings change only through a rule's params.
- ``meta`` carries what only Snakemake uses: ``threads``, ``resources``, ``log``. The torch
  stages declare ``resources: {gpu: 1}``; a rule asks for it only when those stages will run on
  CUDA (:func:`stage_resources`). A stage with
  ``meta: {gate: true}`` (the params check) runs in both engines, but only DVC orders stages
  behind it: Snakemake validates params.yaml at parse time, and a gate's fresh mtime would make
  it rerun everything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml


@dataclass(frozen=True)
class Job:
    """One DVC stage, as both engines must run it."""

    stage: str  # DVC's address, e.g. random_labels_train@p0.5-s0
    cmd: str
    deps: tuple[str, ...]  # as DVC lists them
    outs: tuple[str, ...]
    params: dict[str, Any]  # dotted params.yaml key -> value
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def rule_name(self) -> str:
        """A Snakemake-legal rule name derived from the stage address."""
        return re.sub(r"[^0-9A-Za-z_]", "_", self.stage)

    @property
    def gate(self) -> bool:
        return bool(self.meta.get("gate"))

    @property
    def log(self) -> str:
        return str(self.meta.get("log", f"logs/{self.rule_name}.log"))


def _lookup(tree: Any, dotted: str) -> Any:
    node = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(f"params.yaml has no key {dotted!r} (listed in dvc.yaml)")
        node = node[part]
    return node


def dvc_jobs(root: str | Path = ".") -> list[Job]:
    """Every stage of ``root/dvc.yaml`` as DVC parses it, in file order."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    root = Path(root)
    trees: dict[str, Any] = {}  # each params file parsed once, not once per stage
    with Repo(str(root)) as repo:
        stages = list(repo.index.stages)
        jobs = []
        for stage in stages:
            params: dict[str, Any] = {}
            deps: list[str] = []
            for dep in stage.deps:
                if isinstance(dep, ParamsDependency):
                    if dep.def_path not in trees:
                        trees[dep.def_path] = yaml.safe_load(
                            (root / dep.def_path).read_text(encoding="utf-8"))
                    tree = trees[dep.def_path]
                    for key in dep.params:
                        params[key] = _lookup(tree, key)
                else:
                    deps.append(str(dep.def_path))
            # stage.name, not .addressing: the address from the root whatever the cwd
            jobs.append(Job(stage=stage.name, cmd=str(stage.cmd), deps=tuple(deps),
                            outs=tuple(str(o.def_path) for o in stage.outs), params=params,
                            meta=dict(stage.meta or {})))
    return jobs


def _inside(path: str, folder: str) -> bool:
    return PurePosixPath(path).is_relative_to(PurePosixPath(folder))


def is_folder_output(path: str) -> bool:
    """The naming rule of dvc.yaml: a stage's output without a file extension is a folder."""
    return PurePosixPath(path).suffix == ""


def snakemake_inputs(job: Job, jobs: list[Job], root: str | Path = ".") -> list[str]:
    """The job's inputs as Snakemake must see them (see the module docstring)."""
    root = Path(root)
    gate_outs = {o for j in jobs if j.gate for o in j.outs}
    all_outs = [o for j in jobs for o in j.outs]
    inputs: list[str] = []
    folder_outs = [o for o in all_outs if is_folder_output(o)]
    for dep in job.deps:
        if dep in gate_outs:
            continue
        enclosing = [o for o in folder_outs if _inside(dep, o)]
        if enclosing:
            inputs.append(enclosing[0])
            continue
        produced = [o for o in all_outs if o != dep and _inside(o, dep)]
        if produced:
            inputs += sorted(produced)
        elif (root / dep).is_dir():
            inputs += sorted(
                p.relative_to(root).as_posix() for p in (root / dep).rglob("*")
                if p.is_file() and "__pycache__" not in p.parts)
        else:
            inputs.append(dep)
    return inputs


def stages_use_cuda(device_choice: str) -> bool:
    """Whether the torch stages will run on CUDA, judged where the workflow is scheduled.

    ``cuda``: yes, even on a machine without a GPU (a SLURM login node submits GPU jobs it cannot
    run itself); ``cpu``: no; ``auto``: if torch sees a GPU here. Without NVIDIA device nodes
    (Linux /dev/nvidia*, WSL2's /dev/dxg) torch cannot see one, and importing torch to ask would
    add ~2 s to every Snakemake start on the CPU machines most runs use.
    """
    if device_choice != "auto":
        return device_choice == "cuda"
    if not (any(Path("/dev").glob("nvidia[0-9]*")) or Path("/dev/dxg").exists()):
        return False
    import torch

    return torch.cuda.is_available()


def local_gpu_slots() -> int:
    """How many torch jobs may run at once on this machine's GPUs: one per visible device."""
    import torch

    count = torch.cuda.device_count()
    if count == 0:
        raise RuntimeError("runtime.device is 'cuda' but torch sees no CUDA device on this "
                           "machine: set it to 'auto' or 'cpu', or submit the workflow to a GPU "
                           "cluster (workflow/profiles/slurm)")
    return count


def stage_resources(job: Job, on_cuda: bool) -> dict[str, Any]:
    """The job's Snakemake resources from its ``meta``, with ``gpu`` zeroed off CUDA.

    A CPU run must not hold GPU slots: SLURM's executor plugin turns ``gpu=N`` into
    ``--gpus=N``, which a CPU-only partition rejects or never schedules.
    """
    resources = dict(job.meta.get("resources", {}))
    if "gpu" in resources and not on_cuda:
        resources["gpu"] = 0
    return resources


def snakemake_params(job: Job) -> dict[str, Any]:
    """Params as keyword names Snakemake accepts (dots are not allowed in names)."""
    return {key.replace(".", "__"): value for key, value in job.params.items()}
