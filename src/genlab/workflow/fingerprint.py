"""Outputs that say what made them: each stage's fingerprint, written by the stage itself.

A stage command run with ``--stage NAME`` (dvc.yaml's commands are) reads the inputs dvc.yaml
lists for it before it starts (the values of its tracked params, the md5 of each code file and
input artifact) and, when it succeeds, writes them with the md5 of each output it wrote to
``data/stamps/NAME.json``, one of the stage's outputs. Whichever engine ran the command, the
stamp is right, and DVC versions and shares it with the outputs it describes. A stamp holds
content only (md5s and sizes), so the same inputs give the same stamp on any machine and under
any schedule; the mtimes that let a later judgement skip rehashing an unchanged file are kept
apart, in the workspace's ``.genlab/hashes/``, which is never shared.

A stage is **current** when its stamp's inputs are what the inputs give now and its outputs are
the bytes the stamp lists; otherwise it is stale, with a reason a person can read. Both engines
are then held to that one judgement (:mod:`genlab.workflow.books`): Snakemake reruns every stale
stage whatever the mtimes say, and only current stages are recorded in DVC.

The params gate's stamp (``data/params.checked``) is left out of every fingerprint: it says the
params file was checked, not what a stage computes from (the params it tracks say that).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genlab import paths
from genlab.workflow.adapter import Job, dvc_jobs

GATE_STAMP = str(paths.GATE_STAMP)
_CHUNK = 1 << 20
# bytecode beside the code; the mtime carrier Snakemake's --touch leaves in folder outputs
IGNORED = frozenset({"__pycache__", ".snakemake_timestamp"})
stamp_path = paths.stamp
HASH_CACHE = ".genlab/hashes"  # one file per stage: md5 by (size, mtime) of what it wrote


def files_under(root: Path, path: str) -> Iterator[str]:
    """``path`` if it is a file, else every file inside it (sorted); nothing if it is missing."""
    full = root / path
    if full.is_file():
        yield path
    elif full.is_dir():
        for p in sorted(full.rglob("*")):
            if p.is_file() and not IGNORED.intersection(p.parts):
                yield p.relative_to(root).as_posix()


def _md5(path: Path) -> str:
    digest = hashlib.md5()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class Hasher:
    """md5 of files, reusing what was recorded before for a file of the same size and mtime.

    :meth:`load` takes the records each stage left in ``.genlab/hashes/`` when it stamped its
    outputs, so judging the whole pipeline hashes only the source files and what changed since.
    """

    def __init__(self, root: Path, known: Iterable[tuple[str, dict[str, Any]]] = ()) -> None:
        self.root = root
        self._known: dict[str, tuple[int, int, str]] = {}
        self._digests: dict[str, str | None] | None = None  # while a snapshot is open
        self.learn(known)

    @classmethod
    def load(cls, root: Path) -> Hasher:
        """A hasher that knows every record saved in ``root``'s cache (none in a fresh clone)."""
        hasher = cls(root)
        for path in sorted((root / HASH_CACHE).glob("*.json")):
            try:
                hasher.learn(json.loads(path.read_text(encoding="utf-8")).items())
            except (OSError, json.JSONDecodeError, AttributeError, KeyError, TypeError):
                continue  # a cache only: a bad record costs a rehash, never a wrong verdict
        return hasher

    def save(self, name: str, paths: Iterable[str] | None = None) -> None:
        """Keep the records of ``paths`` (all known if None) in ``.genlab/hashes/NAME.json``."""
        from genlab.io import write_text

        table = self.table()
        if paths is not None:
            table = {p: table[p] for p in paths if p in table}
        write_text(self.root / HASH_CACHE / f"{name}.json", json.dumps(table, sort_keys=True))

    def learn(self, known: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """Take md5s recorded before (the cache's tables), each valid for its size and mtime
        only."""
        for path, rec in known:
            had = self._known.get(path)
            if had is None or had[1] < rec["mtime_ns"]:  # the latest record is the one to match
                self._known[path] = (rec["size"], rec["mtime_ns"], rec["md5"])

    def record(self, path: str) -> dict[str, Any] | None:
        """md5, size and mtime of one file; None if it is missing."""
        try:
            st = (self.root / path).stat()
        except FileNotFoundError:
            return None
        known = self._known.get(path)
        if known is not None and known[:2] == (st.st_size, st.st_mtime_ns):
            md5 = known[2]
        else:
            md5 = _md5(self.root / path)
            self._known[path] = (st.st_size, st.st_mtime_ns, md5)
        return {"md5": md5, "size": st.st_size, "mtime_ns": st.st_mtime_ns}

    def retime(self, path: str) -> None:
        """Keep a known file's md5 after only its mtime changed (genlab touched it)."""
        if path in self._known:
            st = (self.root / path).stat()
            self._known[path] = (st.st_size, st.st_mtime_ns, self._known[path][2])

    def table(self) -> dict[str, dict[str, Any]]:
        """Everything hashed or known so far, as :meth:`record` gives it."""
        return {path: {"size": size, "mtime_ns": mtime, "md5": md5}
                for path, (size, mtime, md5) in self._known.items()}

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Within it, :meth:`digest` looks at each path once: judging the default preset's 341
        stages asks for ~34,000 digests of ~1,000 paths (every stage lists its ~100 source
        files), a stat and a Path join each. For readers only: a file written meanwhile may
        keep its earlier digest until the snapshot closes."""
        self._digests = {}
        try:
            yield
        finally:
            self._digests = None

    def digest(self, path: str) -> str | None:
        """A file's md5, or a folder's: the md5 of its files' paths and md5s; None if missing."""
        if self._digests is None:
            return self._digest(path)
        if path not in self._digests:
            self._digests[path] = self._digest(path)
        return self._digests[path]

    def _digest(self, path: str) -> str | None:
        full = self.root / path
        if full.is_file():
            return self.record(path)["md5"]
        if not full.is_dir():
            return None
        listing = [(f, self.record(f)["md5"]) for f in files_under(self.root, path)]
        return hashlib.md5(json.dumps(listing).encode()).hexdigest()


def inputs_of(job: Job, hasher: Hasher) -> dict[str, Any]:
    """What the stage computes from: its command, its tracked params' values and its inputs'
    digests."""
    return {"cmd": job.cmd, "params": job.params,
            "deps": {dep: hasher.digest(dep) for dep in job.deps if dep != GATE_STAMP}}


def outputs_of(job: Job, hasher: Hasher) -> dict[str, dict[str, Any]]:
    """md5 and size of every file the stage wrote (folders expanded), its own stamp left out."""
    own = str(stamp_path(job.stage))
    return {f: {k: v for k, v in hasher.record(f).items() if k != "mtime_ns"}
            for out in job.outs if out != own for f in files_under(hasher.root, out)}


def find_job(root: Path, stage: str) -> Job:
    for job in dvc_jobs(root):
        if job.stage == stage:
            return job
    raise KeyError(f"dvc.yaml has no stage {stage!r}")


def write_stamp(root: Path, job: Job, inputs: dict[str, Any]) -> None:
    """Record that the stage's outputs, as they are now, were computed from ``inputs``."""
    from genlab.io import write_text

    hasher = Hasher(root)
    outputs = outputs_of(job, hasher)
    stamp = {"stage": job.stage, "inputs": inputs, "outputs": outputs}
    write_text(root / stamp_path(job.stage), json.dumps(stamp, indent=1, sort_keys=True) + "\n")
    hasher.save(job.stage, outputs)


def read_stamp(root: Path, stage: str) -> dict[str, Any] | None:
    try:
        return json.loads((root / stamp_path(stage)).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


@dataclass(frozen=True)
class Verdict:
    stage: str
    reason: str | None  # None: current

    @property
    def current(self) -> bool:
        return self.reason is None


def _first_difference(old: dict[str, Any], new: dict[str, Any]) -> str:
    if old.get("cmd") != new.get("cmd"):
        return "command changed"
    for kind in ("params", "deps"):
        for key in sorted(set(old.get(kind, {})) | set(new.get(kind, {}))):
            was, now = old.get(kind, {}).get(key), new.get(kind, {}).get(key)
            if was != now:
                what = "param" if kind == "params" else "input"
                if now is None:
                    return f"{what} {key} is missing"
                return f"{what} {key} changed" + (f" ({was!r} -> {now!r})"
                                                   if kind == "params" else "")
    return "inputs changed"


def judge(root: str | Path, jobs: list[Job] | None = None,
          hasher: Hasher | None = None) -> dict[str, Verdict]:
    """Each stage's verdict, current or stale with the reason, from its stamp and the inputs now.

    A stage whose outputs are missing is stale (never run, or deleted); one whose inputs are
    missing too is stale (an earlier stage must run first).
    """
    root = Path(root)
    jobs = dvc_jobs(root) if jobs is None else jobs
    stamps = {job.stage: read_stamp(root, job.stage) for job in jobs}
    hasher = hasher or Hasher.load(root)
    with hasher.snapshot():
        return {job.stage: Verdict(job.stage, _reason(job, stamps[job.stage], hasher))
                for job in jobs}


def _reason(job: Job, stamp: dict[str, Any] | None, hasher: Hasher) -> str | None:
    if stamp is None:
        return "no stamp: never run by this version of genlab, or its outputs are missing"
    inputs = inputs_of(job, hasher)
    if stamp.get("inputs") != json.loads(json.dumps(inputs)):
        return _first_difference(stamp.get("inputs", {}), inputs)
    recorded = stamp.get("outputs", {})
    for path, rec in recorded.items():
        now = hasher.record(path)
        if now is None:
            return f"output {path} is missing"
        if now["md5"] != rec["md5"]:
            return f"output {path} was changed after the stage wrote it"
    for out in job.outs:
        if out != str(stamp_path(job.stage)) and not (hasher.root / out).exists():
            return f"output {out} is missing"
    return None
