"""The engines' books: both judge a stage by its fingerprint (:mod:`genlab.workflow.fingerprint`).

- :func:`reconcile` runs when Snakemake parses the workflow (and as ``genlab sync``). It first
  runs the code digests' stage if it is stale (genlab.workflow.code_digest): every other stage's
  fingerprint reads its outputs, and as a Snakemake job upstream of every stage it would make
  Snakemake rerun them all. Snakemake judges by mtimes; this makes the mtimes say what the
  fingerprints say. Each rule has one extra input, ``.genlab/stale/<rule>``: for a stale stage
  it is rewritten now (the reason, with the time), so Snakemake reruns the stage whatever its
  outputs' mtimes (say, outputs that ``dvc exp run`` wrote from other params); for a current
  stage it is set to the epoch, and
  outputs older than one of their inputs (as ``dvc checkout`` or ``dvc pull`` leave them) get a
  newer mtime, so Snakemake does not rerun what is current. Nothing is deleted; only mtimes
  change.
- :func:`record_in_dvc` runs after a Snakemake run: it commits to DVC exactly the stages that are
  current and whose stamp dvc.lock does not hold yet, through DVC's Python API on one index. A
  stale stage (a targeted or partial run leaves some) is never committed: ``dvc status`` keeps
  listing it, and DVC's run-cache never pairs params with outputs they did not produce.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from genlab.workflow.adapter import Job, dvc_jobs, load_yaml, snakemake_inputs
from genlab.workflow.code_digest import CODE_STAGE
from genlab.workflow.fingerprint import Hasher, Verdict, files_under, judge, stamp_path

GENLAB_DIR = ".genlab"
JUDGED = "_judged"  # the hash cache of what reconcile and record_in_dvc hashed or touched


class SyncError(RuntimeError):
    pass


def _run(args: list[str], root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=root, capture_output=True, text=True)


def run_dvc(root: str | Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``dvc ARGS`` in ``root`` by the interpreter running genlab (its DVC, not PATH's)."""
    return _run([sys.executable, "-m", "dvc", *args], Path(root))


def dvc_status(root: str | Path) -> dict:
    """``dvc status`` as a dict: empty when every stage is up to date."""
    proc = run_dvc(root, "status", "--json")
    if proc.returncode != 0:
        raise SyncError(f"dvc status failed:\n{proc.stderr.strip()}")
    return json.loads(proc.stdout or "{}")


def trigger_path(job: Job) -> str:
    """The rule's extra input whose mtime tells Snakemake the stage is stale."""
    return f"{GENLAB_DIR}/stale/{job.rule_name}"


SNAKEMAKE_MARKER = ".snakemake_timestamp"


def _mtimes(root: Path, paths: list[str]) -> list[int]:
    """The mtimes Snakemake reads: a folder's marker file's, when it keeps one inside."""
    found = []
    for p in paths:  # os.path, not pathlib: ~34,000 paths per Snakefile parse
        full = os.path.join(root, p)
        for candidate in (os.path.join(full, SNAKEMAKE_MARKER), full):
            try:
                found.append(os.stat(candidate).st_mtime_ns)
                break
            except (FileNotFoundError, NotADirectoryError):
                continue
    return found


def _touch(root: Path, out: str, mtime_ns: int, hasher: Hasher) -> None:
    full = root / out
    for f in files_under(root, out):
        os.utime(root / f, ns=(mtime_ns, mtime_ns))
        hasher.retime(f)
    if full.is_dir():
        # Snakemake reads a folder output's mtime from the marker it keeps inside, if any
        marker = full / SNAKEMAKE_MARKER
        if marker.exists():
            os.utime(marker, ns=(mtime_ns, mtime_ns))
        os.utime(full, ns=(mtime_ns, mtime_ns))


def reconcile(root: str | Path, jobs: list[Job] | None = None,
              out=sys.stderr) -> dict[str, Verdict]:
    """Set the mtimes Snakemake judges by to what the stamps say; print what is stale."""
    root = Path(root)
    jobs = dvc_jobs(root) if jobs is None else jobs
    # the code digests first: every other stage's fingerprint reads them (the params stamp is
    # in none, so the params check may run as a job)
    run_stale_gates(root, [j for j in jobs if j.stage == CODE_STAGE])
    hasher = Hasher.load(root)
    verdicts = judge(root, jobs, hasher)
    (root / GENLAB_DIR / "stale").mkdir(parents=True, exist_ok=True)
    clock = time.time_ns()
    for job in jobs:  # dvc.yaml lists upstream stages first
        trigger = root / trigger_path(job)
        verdict = verdicts[job.stage]
        if not verdict.current:
            # new content too: Snakemake skips an input newer than the outputs whose checksum
            # is the one it recorded when the job last ran. Newer than every output, also one
            # an earlier reconcile dated ahead of the clock (below)
            outs = [o for o in job.outs if (root / o).exists()]
            when = max([clock, *(m + 1_000_000 for m in _mtimes(root, outs))])
            trigger.write_text(f"{clock}: {verdict.reason}\n", encoding="utf-8")
            os.utime(trigger, ns=(when, when))
            continue
        trigger.touch()
        os.utime(trigger, ns=(0, 0))
        newest_input = max(_mtimes(root, snakemake_inputs(job, jobs, root)), default=0)
        outs = [o for o in job.outs if (root / o).exists()]
        if outs and min(_mtimes(root, outs)) < newest_input:
            clock = max(clock, newest_input) + 1_000_000
            for o in outs:
                _touch(root, o, clock, hasher)
    hasher.save(JUDGED)  # sources and files genlab touched
    _print_stale(verdicts, out)
    return verdicts


def _print_stale(verdicts: dict[str, Verdict], out) -> None:
    stale = [v for v in verdicts.values() if not v.current]
    if not stale:
        return
    never = [v for v in stale if v.reason.startswith("no stamp")]
    print(f"genlab: {len(stale)} of {len(verdicts)} stages out of date", file=out)
    if never:
        print(f"  {len(never)} not run yet (no stamp)", file=out)
    shown = [v for v in stale if v not in never]
    for v in shown[:12]:
        print(f"  {v.stage}: {v.reason}", file=out)
    if len(shown) > 12:
        print(f"  ... and {len(shown) - 12} more", file=out)


def _stat_key(path: Path) -> tuple[int, int] | None:
    """A file's (mtime, size), None if it is missing."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


def _read_lock(root: Path) -> tuple[dict[str, Any], tuple[int, int] | None]:
    """dvc.lock's content (an empty one when it is missing), and its :func:`_stat_key` as
    read."""
    path = root / "dvc.lock"
    key = _stat_key(path)
    lock = (load_yaml(path) or {}) if key is not None else {}
    lock = {"schema": "2.0", **lock}
    lock["stages"] = lock.get("stages") or {}
    return lock, key


def _locked_stamps(lock: dict[str, Any]) -> dict[str, str]:
    """Each stage's stamp md5 as dvc.lock records it."""
    found = {}
    for stage, entry in lock["stages"].items():
        for out in entry.get("outs", []):
            if out.get("path") == str(stamp_path(stage)):
                found[stage] = out.get("md5")
    return found


def run_stale_gates(root: Path, jobs: list[Job]) -> None:
    """Run each stale gate among ``jobs`` (dvc.yaml's first stages: the code digests, then the
    params check), in order, about a second each: DVC lists their outputs as dependencies of
    every stage."""
    for gate in (j for j in jobs if j.gate):
        if not judge(root, [gate])[gate.stage].current:
            _run_gate(root, gate)


def _run_gate(root: Path, gate: Job) -> None:
    argv = shlex.split(gate.cmd)
    if argv[0] == "python":  # the interpreter running us, not whichever is on PATH
        argv[0] = sys.executable
    proc = _run(argv, root)
    if proc.returncode != 0:
        raise SyncError(f"{gate.stage} failed:\n{proc.stderr.strip()}")


def record_in_dvc(root: str | Path, out=sys.stderr) -> list[str]:
    """Commit to DVC the current stages that dvc.lock does not record yet; return their names."""
    root = Path(root)
    t0 = time.perf_counter()
    jobs = dvc_jobs(root)
    run_stale_gates(root, jobs)  # an edit during the run may leave one stale
    hasher = Hasher.load(root)
    verdicts = judge(root, jobs, hasher)
    lock, as_read = _read_lock(root)
    locked = _locked_stamps(lock)
    objects = cache_objects_dir(root)
    # current, and dvc.lock lacks its stamp or lists outputs that this cache lacks (a dvc.lock
    # that came from elsewhere, a colleague's or an earlier workspace's, with the same results)
    todo = [j.stage for j in jobs if verdicts[j.stage].current
            and (locked.get(j.stage) != hasher.digest(str(stamp_path(j.stage)))
                 or not _cached(lock["stages"].get(j.stage, {}), objects))]
    hasher.save(JUDGED)  # sources and files genlab touched
    stale = sorted(v.stage for v in verdicts.values() if not v.current)
    if todo:
        _commit(root, todo, lock, as_read)
    print(f"genlab: recorded {len(todo)} stage(s) in DVC in {time.perf_counter() - t0:.1f} s"
          + (f"; {len(stale)} stale stage(s) left for the next run: {', '.join(stale[:8])}"
             + (" ..." if len(stale) > 8 else "") if stale else ""), file=out)
    return todo


def cache_objects_dir(root: Path) -> Path:
    """Where this repository's DVC keeps its md5-named objects (``dvc cache dir`` respected),
    read from its config files without opening the repository."""
    from dvc.config import Config

    cache_dir = Config(dvc_dir=str(root / ".dvc")).get("cache", {}).get("dir")
    return Path(cache_dir or root / ".dvc" / "cache") / "files" / "md5"


def _cached(entry: dict[str, Any], objects: Path) -> bool:
    """Whether the cache holds the object of every output a dvc.lock entry lists (a folder's
    listing, for a folder)."""
    for out in entry.get("outs", []):
        md5 = out.get("md5")
        if not md5 or not (objects / md5[:2] / md5[2:]).is_file():
            return False
    return True


def _commit(root: Path, names: list[str], lock: dict[str, Any],
            as_read: tuple[int, int] | None) -> None:
    """``dvc commit --force`` of these stages (in dvc.yaml's order), each loaded alone from
    dvc.yaml (DVC's CLI collects an index per target; DVC's index of all 341 stages of the
    default preset builds an object per dependency of every stage, ~10 s of a one-stage commit).

    ``lock`` is dvc.lock as read when it had the (mtime, size) ``as_read``; if it changed before
    DVC's lock was taken, it is read again for the rewrite. The entries are DVC's own
    (``dvc.stage.serialize.to_lockfile``), but dvc.lock is rewritten here with libyaml: DVC's
    round-trip rewrite of it takes seconds per call on a lockfile that lists every stage's
    source files.
    """
    from dvc.dvcfile import load_file
    from dvc.repo import Repo
    from dvc.stage.serialize import to_lockfile

    from genlab.io import write_text

    lock_path = root / "dvc.lock"
    with (Repo(str(root)) as repo, repo.lock, _params_read_once(), _dependency_hashes_once(),
          _run_cache_entries_with_libyaml()):
        # DVC asks git whether each output is tracked, and dulwich re-reads the index for every
        # question (820 reads, 9 s of the default preset's recording); nothing is staged while
        # we commit, so one read answers them all
        repo.scm.is_tracked = _tracked_from_one_index_read(repo.scm)
        dvcfile = load_file(repo, str(root / "dvc.yaml"))
        # what DVC merges into the stages it loads is their lock entries: given here from the
        # parse above (libyaml), not DVC's ruamel parse of the whole lockfile (~3 s at 341
        # stages); stage.save() recomputes every hash in them anyway
        dvcfile.__dict__["lockfile_contents"] = {"schema": "2.0", "stages": {
            name: copy.deepcopy(lock["stages"][name]) for name in names if name in lock["stages"]}}
        stages = [dvcfile.stages[name] for name in names]
        for stage in stages:
            stage.save()  # hashes deps and outs; the run-cache entry is right: the stage is current
            stage.commit()
        if _stat_key(lock_path) != as_read:  # changed since it was read
            lock = _read_lock(root)[0]
        for stage in stages:
            lock["stages"].update(_plain(to_lockfile(stage)))
        write_text(lock_path, _libyaml_text(lock))


def _plain(data: Any) -> Any:
    """DVC's OrderedDicts as plain dicts and lists (the order is kept)."""
    return json.loads(json.dumps(data))


def _libyaml_text(data: Any) -> str:
    """Plain data as block-style YAML by libyaml (where PyYAML has it): the form of dvc.lock and
    of the run-cache entries genlab writes for DVC."""
    dumper = yaml.CSafeDumper if hasattr(yaml, "CSafeDumper") else yaml.SafeDumper
    return yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True)


def _tracked_from_one_index_read(scm: Any) -> Callable[[str], bool]:
    """``scm.is_tracked`` (scmrepo's dulwich backend: the path, or a file under it, is in the
    git index) answered from one read of the index."""
    original = scm.is_tracked
    tracked: set[bytes] | None = None

    def is_tracked(path: str) -> bool:
        nonlocal tracked
        if tracked is None:
            try:
                paths = [bytes(p) for p in scm.dulwich.repo.open_index()]
            except AttributeError:  # another backend: ask it every time
                return original(path)
            tracked = set(paths)
            for p in paths:  # every folder that holds a tracked file is tracked too
                parts = p.split(b"/")
                tracked.update(b"/".join(parts[:i]) for i in range(1, len(parts)))
        rel = os.path.relpath(path, scm.root_dir).replace(os.path.sep, "/").encode()
        return rel in tracked

    return is_tracked


@contextmanager
def _dependency_hashes_once() -> Iterator[None]:
    """Within one commit, hash each dependency file once.

    Every stage lists its ~60 source files, most of them the same files, and DVC hashes each
    dependency of each stage twice (``stage.save`` and the run-cache's ``_can_hash``), each time
    through a state-database lookup and a new hash object: profiled on 218 stages, 24 s of a 50 s
    recording. Here a regular file's hash is kept per (path, hash name, inode, size, mtime), so
    a file edited during the commit is hashed again; folders, outputs and params dependencies
    (which have their own ``get_hash``) go to DVC as before.
    """
    import stat

    from dvc.dependency.base import Dependency

    had_own = "get_hash" in Dependency.__dict__
    original = Dependency.get_hash
    memo: dict[tuple[Any, ...], Any] = {}

    def get_hash(self: Any) -> Any:
        try:
            st = os.stat(self.fs_path) if self.protocol == "local" else None
        except (OSError, TypeError):
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            return original(self)
        key = (self.fs_path, self.hash_name, st.st_ino, st.st_size, st.st_mtime_ns)
        if key not in memo:
            memo[key] = original(self)
        return copy.copy(memo[key])

    Dependency.get_hash = get_hash
    try:
        yield
    finally:
        if had_own:
            Dependency.get_hash = original
        else:
            del Dependency.get_hash


_MISSING = object()


def _lookup(config: Any, key_path: str) -> Any:
    """``config``'s value at a dotted key path through plain mappings, or _MISSING."""
    node = config
    for part in key_path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


@contextmanager
def _run_cache_entries_with_libyaml() -> Iterator[None]:
    """Within one commit, DVC's run-cache entries are written with libyaml.

    ``stage.save()`` writes one entry per stage to ``.dvc/cache/runs`` (the stage's deps, params
    and outputs, ~100 source files each) with ruamel.yaml's pure-Python emitter: profiled on a
    first recording of the default preset's 341 stages, 38 s of 86 s under the profiler. The
    entry's name is the hash of its data, not of its text, so only the text's form changes. An
    entry is written this way only if ruamel.yaml, which DVC reads it with, loads it back to the
    same data (YAML 1.1 and 1.2 read a few unquoted strings differently, "1e5" say); otherwise,
    and for anything else DVC dumps meanwhile, DVC's own writer.
    """
    from dvc.utils import serialize
    from dvc.utils.serialize import parse_yaml

    original = serialize.dump_yaml

    def dump_yaml(path: Any, data: Any, fs: Any = None, **kwargs: Any) -> Any:
        if fs is None and not kwargs and isinstance(path, str):
            plain = _plain(data)
            text = _libyaml_text(plain)
            if parse_yaml(text, path) == plain:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
                return None
        return original(path, data, fs=fs, **kwargs)

    serialize.dump_yaml = dump_yaml
    try:
        yield
    finally:
        serialize.dump_yaml = original


@contextmanager
def _params_read_once() -> Iterator[None]:
    """Within one commit, read each params file once per set of keys.

    DVC re-parses params.yaml (ruamel, pure Python) for every params dependency it hashes, and
    again for the run-cache, and finds each key with ``dpath.get``, which walks the whole tree:
    profiled on the default preset's 171 stages, 684 parses and 1,956 walks were 105 s of a
    174 s recording. Here a file is parsed once per content (keyed by its bytes' sha256, so an
    edit during the commit is still read) and a plain dotted key is looked up directly (dpath
    where the path is not plain mappings); every caller gets its own copy of the result, as
    from DVC's own reader.
    """
    import dpath
    from dvc.dependency import param

    original = param.read_param_file
    parsed: dict[tuple[str, str], Any] = {}
    results: dict[tuple[Any, ...], Any] = {}

    def read_param_file(fs: Any, path: str, key_paths: list[str] | None = None,
                        flatten: bool = False, **load_kwargs: Any) -> Any:
        if not flatten or not key_paths or load_kwargs:
            return original(fs, path, key_paths, flatten=flatten, **load_kwargs)
        digest = hashlib.sha256(fs.read_bytes(path)).hexdigest()
        key = (path, digest, tuple(key_paths))
        if key not in results:
            if (path, digest) not in parsed:
                parsed[(path, digest)] = original(fs, path)
            config, found = parsed[(path, digest)], {}
            for key_path in key_paths:
                value = _lookup(config, key_path)
                if value is _MISSING:  # an index into a list, say: DVC's own walk
                    try:
                        value = dpath.get(config, key_path, separator=".")
                    except KeyError:
                        continue
                found[key_path] = value
            results[key] = found
        return copy.deepcopy(results[key])

    param.read_param_file = read_param_file
    try:
        yield
    finally:
        param.read_param_file = original


def sync(root: str | Path) -> int:
    """``genlab sync``: after ``dvc pull``/``dvc checkout``/``dvc repro``, let Snakemake agree."""
    verdicts = reconcile(Path(root), out=sys.stdout)
    current = sum(v.current for v in verdicts.values())
    print(f"genlab sync: {current} of {len(verdicts)} stages current; Snakemake will rerun the "
          f"other {len(verdicts) - current}" if current < len(verdicts) else
          f"genlab sync: all {len(verdicts)} stages current")
    return 0


def run(args) -> int:
    """``genlab sync``."""
    return sync(Path.cwd())
