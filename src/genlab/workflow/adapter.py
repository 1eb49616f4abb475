"""DVC's parsed stages as Snakemake jobs: the adapter behind ``workflow/rules/from_dvc.smk``.

``dvc.yaml`` is the one definition of the pipeline. This module reads it as DVC does (its one
template form, ``foreach`` over a params mapping; tests/workflow/test_dag.py compares the result
with DVC's own parse) and turns each stage into a job description that the Snakefile makes a rule
of, so the two engines cannot drift apart:

- DVC ``deps`` become Snakemake inputs, except the genlab source files and the code digests
  standing for them (each stage's exact code dependencies): a stage's fingerprint holds their
  hashes, and
  :func:`genlab.workflow.sync.reconcile` tells Snakemake which stages an edit makes stale, as for
  params. As inputs they cost every Snakefile parse seconds (the default preset's 341 stages list
  32,000 of them) and told Snakemake nothing the fingerprint does not. A dependency on a folder is
  expanded: into the outputs of the stages inside it (so Snakemake sees the edges DVC sees), or,
  for any other folder, into its files (Snakemake compares a folder's own mtime, which file edits
  do not change).
- An output whose name has no extension is a folder (a group stage's ``runs/``): Snakemake gets
  it as ``directory()``, and a dependency on it, or on anything inside it, becomes an input on
  the folder (Snakemake cannot depend on part of another rule's folder; DVC can, and does).
- DVC ``params`` are not Snakemake ``params``: a stage's fingerprint holds their values, and
  :func:`genlab.workflow.sync.reconcile` tells Snakemake which stages they make stale.
- ``meta`` carries what only Snakemake uses: ``threads``, ``resources``, ``log``. The torch
  stages declare ``resources: {gpu: 1}``; a rule asks for it only when those stages will run on
  CUDA (:func:`stage_resources`). A stage with
  ``meta: {gate: true}`` (the code digests, the params check) runs in both engines, but only DVC
  orders stages behind it: Snakemake validates params.yaml at parse time and
  :func:`genlab.workflow.sync.reconcile` runs the code digests' stage when stale before it
  judges the rest, and a gate's fresh mtime would make Snakemake rerun everything.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from genlab.paths import SRC

PARAMS_FILE = "params.yaml"

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


_FOREACH = re.compile(r"^\$\{([\w.]+)\}$")


def load_yaml(path: Path) -> Any:
    """A YAML file, by libyaml's safe loader where PyYAML has it."""
    text = path.read_text(encoding="utf-8")
    if hasattr(yaml, "CSafeLoader"):  # libyaml's, when PyYAML was built with it: ~10x faster
        return yaml.load(text, Loader=yaml.CSafeLoader)
    return yaml.safe_load(text)


_ITEM_FIELD = re.compile(r"\$\{item\.([A-Za-z_][A-Za-z0-9_]*)\}")


def _substitute(node: Any, key: str, item: Any) -> Any:
    """``${key}`` replaced by the foreach item's key, and ``${item.<field>}`` by its field
    (integers only: how DVC prints a float is not ours to guess), everywhere in a stage body."""
    if isinstance(node, str):
        def field(match: re.Match[str]) -> str:
            value = item[match.group(1)]
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"${{item.{match.group(1)}}} of {key!r} is {value!r}: only "
                                 "integer fields are substituted")
            return str(value)

        return _ITEM_FIELD.sub(field, node.replace("${key}", key))
    if isinstance(node, list):
        return [_substitute(v, key, item) for v in node]
    if isinstance(node, dict):
        return {_substitute(k, key, item): _substitute(v, key, item) for k, v in node.items()}
    return node


def _paths(entries: list[Any]) -> list[str]:
    """dvc.yaml's list of outputs: plain paths or ``{path: {options}}``."""
    return [e if isinstance(e, str) else next(iter(e)) for e in entries]


def _job(name: str, body: dict[str, Any], tree: dict[str, Any]) -> Job:
    params = {key: _lookup(tree, key) for key in body.get("params", [])}
    outs = [*_paths(body.get("outs", [])), *_paths(body.get("metrics", [])),
            *_paths(body.get("plots", []))]
    return Job(stage=name, cmd=str(body["cmd"]), deps=tuple(body.get("deps", [])),
               outs=tuple(outs), params=params, meta=dict(body.get("meta") or {}))


def dvc_jobs(root: str | Path = ".") -> list[Job]:
    """Every stage of ``root/dvc.yaml``, in file order, as DVC parses it.

    Resolved here rather than by DVC's own parser (2 s on every Snakemake start, against
    ~50 ms): the file is generated (:mod:`genlab.workflow.generate`) and uses one template form
    only, ``foreach`` over a params.yaml mapping with ``${key}`` in the body.
    tests/workflow/test_dag.py checks the result against DVC's parse.
    """
    root = Path(root)
    if _REMEMBERED:
        try:
            remembered = _REMEMBERED.get(_sources_key(root))
        except OSError:
            remembered = None
        if remembered is not None:
            return list(remembered)
    return _parse_jobs(root)


def _parse_jobs(root: Path) -> list[Job]:
    stages = load_yaml(root / "dvc.yaml")["stages"]
    tree = load_yaml(root / PARAMS_FILE) or {}
    jobs = []
    for name, body in stages.items():
        if "foreach" not in body:
            jobs.append(_job(name, body, tree))
            continue
        match = _FOREACH.match(str(body["foreach"]))
        if match is None:
            raise ValueError(f"dvc.yaml stage {name}: unsupported foreach {body['foreach']!r}")
        for key, item in _lookup(tree, match.group(1)).items():
            jobs.append(_job(f"{name}@{key}", _substitute(body["do"], str(key), item), tree))
    return jobs


_REMEMBERED: dict[tuple, list[Job]] = {}
"""The stages of one workspace as :func:`remember_jobs` parsed them, keyed by its dvc.yaml and
params.yaml as they were then."""


def _sources_key(root: Path) -> tuple:
    stats = [os.stat(root / name) for name in ("dvc.yaml", PARAMS_FILE)]
    return (str(root.resolve()),
            *((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) for st in stats))


def remember_jobs(root: str | Path) -> None:
    """Parse ``root``'s stages now so that :func:`dvc_jobs` answers from memory while its
    dvc.yaml and params.yaml stay as they are (same inode, size and times). The fork server
    calls it before each fork: a job's stage lookup then costs a few stat calls instead of
    parsing the default preset's 13,000-line dvc.yaml (~0.3 s a job)."""
    root = Path(root)
    key = _sources_key(root)
    if key not in _REMEMBERED:
        jobs = _parse_jobs(root)
        _REMEMBERED.clear()
        _REMEMBERED[key] = jobs


def is_source(path: str) -> bool:
    """Whether a dependency lies in the genlab source tree (``src/``, as dvc.yaml names it)."""
    return path.startswith(f"{SRC}/")


def is_folder_output(path: str) -> bool:
    """The naming rule of dvc.yaml: a stage's output without a file extension is a folder."""
    return PurePosixPath(path).suffix == ""


class _Outputs:
    """Every stage's outputs, indexed for the questions :func:`snakemake_inputs` asks (sets and
    string prefixes: the default preset's 34,000 dependencies against its outputs by list scans
    or PurePosixPath took seconds of every Snakefile parse)."""

    def __init__(self, jobs: list[Job]) -> None:
        self.gate = {o for j in jobs if j.gate for o in j.outs}
        self.all = {o for j in jobs for o in j.outs}
        self.folders = {o for o in self.all if is_folder_output(o)}
        self.under: dict[str, list[str]] = {}  # each ancestor folder -> the outputs inside it
        for o in sorted(self.all):
            parts = o.split("/")
            for i in range(1, len(parts)):
                self.under.setdefault("/".join(parts[:i]), []).append(o)

    def enclosing_folder(self, path: str) -> str | None:
        """The folder output that ``path`` lies inside, if any (outputs never overlap, so there
        is at most one)."""
        parts = path.split("/")
        for i in range(1, len(parts)):
            ancestor = "/".join(parts[:i])
            if ancestor in self.folders:
                return ancestor
        return None


_INDEX: dict[int, tuple[list[Job], _Outputs]] = {}


def _outputs(jobs: list[Job]) -> _Outputs:
    cached = _INDEX.get(id(jobs))
    if cached is None or cached[0] is not jobs:
        cached = _INDEX[id(jobs)] = (jobs, _Outputs(jobs))
    return cached[1]


def snakemake_inputs(job: Job, jobs: list[Job], root: str | Path = ".") -> list[str]:
    """The job's inputs as Snakemake must see them (see the module docstring)."""
    root = Path(root)
    outs = _outputs(jobs)
    inputs: list[str] = []
    for dep in job.deps:
        enclosing = outs.enclosing_folder(dep)
        if dep in outs.gate or enclosing in outs.gate:
            continue  # a gate's outputs: brought up to date at parse time (module docstring)
        if enclosing is not None:
            inputs.append(enclosing)
            continue
        produced = outs.under.get(dep.rstrip("/"), [])
        if produced:
            inputs += produced
        elif dep in outs.all:
            inputs.append(dep)
        elif is_source(dep):
            continue  # judged by the stage's fingerprint (module docstring)
        elif not (root / dep).is_dir():
            inputs.append(dep)
        else:
            inputs += sorted(
                p.relative_to(root).as_posix() for p in (root / dep).rglob("*")
                if p.is_file() and "__pycache__" not in p.parts)
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
