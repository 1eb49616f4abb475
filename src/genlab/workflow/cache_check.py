"""Check the local DVC cache against its object names, the check DVC 3 skips.

DVC names every cache object by the md5 of its bytes but trusts an object whose file is still
read-only (as DVC protects them) without hashing it. Damage that keeps the mode (bit rot, a write
as root, a tool that ignores the mode) is then checked out as the artifact, ``dvc status`` calls
it clean and ``dvc push`` uploads it (measured with DVC 3.67: tests/reliability/
test_cache_corruption.py). :func:`verify_cache` hashes every object; with ``repair`` it deletes the
damaged ones and the workspace files checked out from them, then pulls them again from the
default remote (which re-checks what it sends where ``verify = true``, as in .dvc/config).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from genlab.workflow.sync import cache_objects_dir, run_dvc

DIR_SUFFIX = ".dir"  # a folder output's object: the JSON listing of its files' md5s


@dataclass(frozen=True)
class CacheReport:
    checked: int
    damaged: tuple[Path, ...]  # cache objects whose md5 is not their name
    affected: tuple[Path, ...]  # workspace outputs checked out from them (files or folders)


def object_hash(path: Path) -> str:
    """The md5 a cache object is named by: its directory (two hex digits) + its file name,
    without the ``.dir`` suffix of a folder listing."""
    return path.parent.name + path.name.removesuffix(DIR_SUFFIX)


def damaged_objects(objects: Path) -> tuple[int, list[Path]]:
    """(number of objects hashed, the ones whose md5 is not their name)."""
    damaged, count = [], 0
    for path in sorted(objects.glob("??/*")):
        if not path.is_file():
            continue
        count += 1
        with path.open("rb") as f:
            if hashlib.file_digest(f, "md5").hexdigest() != object_hash(path):
                damaged.append(path)
    return count, damaged


def _lock_outputs(root: Path) -> list[tuple[str, str]]:
    """(workspace path, md5 as dvc.lock records it) of every stage output."""
    lock = root / "dvc.lock"
    if not lock.exists():
        return []
    stages = (yaml.safe_load(lock.read_text()) or {}).get("stages", {})
    return [(out["path"], out["md5"]) for stage in stages.values()
            for out in stage.get("outs", []) if "md5" in out]


def affected_outputs(root: Path, objects: Path, damaged: set[str]) -> list[Path]:
    """The workspace files (or whole folders, if a folder's listing is damaged) that were checked
    out from damaged objects, per dvc.lock."""
    affected: list[Path] = []
    for path, md5 in _lock_outputs(root):
        if md5.removesuffix(DIR_SUFFIX) in damaged:
            affected.append(root / path)
        elif md5.endswith(DIR_SUFFIX):
            listing = objects / md5[:2] / md5[2:]
            if not listing.is_file():
                continue
            for entry in json.loads(listing.read_text()):
                if entry["md5"] in damaged:
                    affected.append(root / path / entry["relpath"])
    return sorted(set(affected))


def check(root: str | Path) -> CacheReport:
    root = Path(root)
    objects = cache_objects_dir(root)
    count, damaged = damaged_objects(objects) if objects.is_dir() else (0, [])
    hashes = {object_hash(p) for p in damaged}
    return CacheReport(count, tuple(damaged), tuple(affected_outputs(root, objects, hashes)))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def verify_cache(root: str | Path, repair: bool = False) -> int:
    """Print what :func:`check` finds; 0 if the cache is intact (or was repaired), else 1."""
    root = Path(root)
    report = check(root)
    if not report.damaged:
        print(f"genlab verify-cache: {report.checked} objects, every one matches its md5")
        return 0
    print(f"genlab verify-cache: {len(report.damaged)} of {report.checked} objects do not match "
          "their md5:", file=sys.stderr)
    for path in report.damaged:
        print(f"  damaged object {path}", file=sys.stderr)
    for path in report.affected:
        print(f"  checked out from it: {path.relative_to(root)}", file=sys.stderr)
    if not repair:
        print("Run `genlab verify-cache --repair` to delete them and pull them again from the "
              "remote.", file=sys.stderr)
        return 1
    for path in (*report.damaged, *report.affected):
        _remove(path)
    proc = run_dvc(root, "pull")
    if proc.returncode != 0:
        print(f"genlab verify-cache: deleted them, but `dvc pull` failed:\n{proc.stderr.strip()}",
              file=sys.stderr)
        return 1
    after = check(root)
    if after.damaged:
        print("genlab verify-cache: still damaged after the pull: "
              + ", ".join(map(str, after.damaged)), file=sys.stderr)
        return 1
    print(f"genlab verify-cache: repaired: deleted {len(report.damaged)} damaged objects and "
          f"{len(report.affected)} outputs, pulled them again; {after.checked} objects match")
    return 0


def run(args) -> int:
    """``genlab verify-cache``."""
    return verify_cache(Path.cwd(), repair=args.repair)
