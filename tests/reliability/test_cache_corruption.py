"""Fault injection, the local DVC cache: an object in ``.dvc/cache/files/md5`` damaged after the
stage that produced it was committed (``dvc repro``, or ``dvc commit`` as ``genlab sync`` does).

What DVC 3 (3.67) does, measured here on a one-stage workspace (about 5 s a test, no study):

- DVC trusts a cache file whose mode is still read-only (0444, as DVC protects it): it does not
  hash it. Damage that keeps the mode (bit rot, a write as root, a tool that ignores the mode)
  is checked out as the artifact with exit 0, ``dvc status`` calls it clean, ``dvc fetch``/``dvc
  pull`` from a good remote do not replace it, and ``dvc push`` uploads the damaged bytes to
  a remote that lacks the object (one that has it keeps its good copy).
  A colleague whose remote has ``verify = true`` (the default remote's setting) refuses them.
- A damaged object left writable is hashed, but only after ``dvc checkout`` copied it: the bad
  bytes are in the workspace, the object is dropped from the cache, and once a pull has put the
  good object back DVC's state db still vouches for the bad workspace file.
- genlab's readers are the backstop: a truncated Parquet file gives an ``ArtifactError`` naming it.
- ``genlab verify-cache`` (genlab.workflow.cache_check) is the check DVC skips: it hashes every
  cache object against its name; ``--repair`` deletes the damaged ones and the workspace files
  checked out from them, then runs ``dvc pull``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from genlab.io import ArtifactError, read_parquet
from genlab.workflow.cache_check import affected_outputs, check
from genlab.workflow.cache_check import damaged_objects as damaged_objects_in
from tests_support import run, tool_env

OUT = "data/dataset/train.parquet"
CACHE_MODE = 0o444  # DVC's protected cache files: trusted without hashing

MAKE = """\
import pyarrow as pa
import pyarrow.parquet as pq
from pathlib import Path

Path("data/dataset").mkdir(parents=True, exist_ok=True)
pq.write_table(pa.table({"x": list(range(2000)), "y": [i % 7 for i in range(2000)]}),
               "data/dataset/train.parquet")
"""

DVC_YAML = {"stages": {"make": {"cmd": "python make.py", "deps": ["make.py"], "outs": [OUT]}}}


@dataclass
class Workspace:
    root: Path
    remote: Path
    env: dict[str, str]

    def sh(self, *args: str, check: bool = True):
        return run(list(args), self.root, self.env, check=check, timeout=120)

    def md5(self) -> str:
        """The output's md5 as dvc.lock records it."""
        lock = yaml.safe_load((self.root / "dvc.lock").read_text())
        return lock["stages"]["make"]["outs"][0]["md5"]

    def obj(self, md5: str | None = None) -> Path:
        md5 = md5 or self.md5()
        return self.root / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]

    def status(self) -> dict:
        return json.loads(self.sh("dvc", "status", "--json").stdout or "{}")


def corrupt(path: Path, how: str, keep_mode: bool = True) -> bytes:
    """Truncate to half, or flip one byte, as a failing disk or a write as root would: the mode
    stays read-only unless ``keep_mode`` is false. Returns the damaged bytes."""
    data = bytearray(path.read_bytes())
    if how == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    os.chmod(path, 0o644)
    path.write_bytes(bytes(data))
    if keep_mode:
        os.chmod(path, CACHE_MODE)
    return bytes(data)


def damaged_objects(root: Path) -> list[Path]:
    return list(check(root).damaged)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once: git + DVC in ``ws/``, a local-folder default remote ``remote/`` beside it with
    ``verify = true`` (as .dvc/config has it; its url is relative, so a copy of both folders
    works), one stage that writes a small Parquet file, reproduced and pushed."""
    base = tmp_path_factory.mktemp("cache-corruption")
    root = base / "ws"
    root.mkdir()
    w = Workspace(root, base / "remote", tool_env(home=base / "home"))
    (root / "make.py").write_text(MAKE)
    (root / "dvc.yaml").write_text(yaml.safe_dump(DVC_YAML, sort_keys=False))
    w.sh("git", "init", "-q", "-b", "main")
    w.sh("dvc", "init", "-q")
    w.sh("dvc", "remote", "add", "-d", "local", "../remote")  # stored as ../../remote
    w.sh("dvc", "remote", "modify", "local", "verify", "true")
    w.sh("dvc", "repro", "-q")
    w.sh("git", "add", "-A")
    w.sh("git", "commit", "-q", "-m", "one stage")
    w.sh("dvc", "push", "-q")
    return base


@pytest.fixture
def ws(template: Path, tmp_path: Path) -> Workspace:
    """A copy of the template (modes kept: cache files stay read-only), checked to be intact
    (its status is checked by the tests that rely on it being clean)."""
    shutil.copytree(template / "ws", tmp_path / "ws", symlinks=True)
    shutil.copytree(template / "remote", tmp_path / "remote", symlinks=True)
    w = Workspace(tmp_path / "ws", tmp_path / "remote", tool_env(home=tmp_path / "home"))
    assert hashlib.md5((w.root / OUT).read_bytes()).hexdigest() == w.md5()
    assert os.stat(w.obj()).st_mode & 0o777 == CACHE_MODE
    assert hashlib.md5(w.obj().read_bytes()).hexdigest() == w.md5()
    assert damaged_objects(w.root) == []
    return w


def test_clean_cache_checks_out_the_original(ws: Workspace) -> None:
    """The control: with the cache intact, a deleted output comes back byte-identical."""
    assert ws.status() == {}
    original = (ws.root / OUT).read_bytes()
    (ws.root / OUT).unlink()
    ws.sh("dvc", "checkout")
    assert (ws.root / OUT).read_bytes() == original


@pytest.mark.parametrize("how", ["truncate", "flip"])
def test_read_only_corrupted_object_is_checked_out_unnoticed(ws: Workspace, how: str) -> None:
    """UNSAFE in DVC 3: a damaged object that kept its read-only mode is never hashed. checkout
    delivers it (exit 0) and status calls it clean; a truncated Parquet file is caught by
    genlab's reader, a flipped byte may not be."""
    bad = corrupt(ws.obj(), how)
    (ws.root / OUT).unlink()
    checkout = ws.sh("dvc", "checkout")
    assert checkout.returncode == 0 and "corrupt" not in (checkout.stdout + checkout.stderr)
    assert (ws.root / OUT).read_bytes() == bad
    assert ws.status() == {}
    ws.sh("dvc", "checkout", "--relink")
    assert (ws.root / OUT).read_bytes() == bad
    if how == "truncate":
        with pytest.raises(ArtifactError, match="train.parquet"):
            read_parquet(ws.root / OUT)


def test_pull_from_a_good_remote_does_not_repair_it(ws: Workspace) -> None:
    """The remote holds the good object, but fetch and pull see the md5 in the cache and skip it."""
    bad = corrupt(ws.obj(), "truncate")
    (ws.root / OUT).unlink()
    fetch = ws.sh("dvc", "fetch")
    assert "Everything is up to date" in fetch.stdout
    ws.sh("dvc", "pull")
    assert (ws.root / OUT).read_bytes() == bad
    assert ws.obj().read_bytes() == bad


def test_push_uploads_it_and_a_verifying_clone_refuses_it(ws: Workspace, tmp_path: Path) -> None:
    """The workspace file is intact and status is clean. push skips an object the remote already
    has (the good copy stays), but uploads the damaged one to a remote that lacks it. A clone
    pulling from that ``verify = true`` remote detects it: exit 1, the file is not checked out
    and status says it is not in cache."""
    original = (ws.root / OUT).read_bytes()
    bad = corrupt(ws.obj(), "flip")
    assert ws.status() == {}
    assert (ws.root / OUT).read_bytes() == original  # the workspace copy is a separate file
    assert "Everything is up to date" in ws.sh("dvc", "push").stdout
    remote_obj = Path("files", "md5", ws.md5()[:2], ws.md5()[2:])
    assert hashlib.md5((ws.remote / remote_obj).read_bytes()).hexdigest() == ws.md5()

    fresh = tmp_path / "fresh-remote"
    config = ws.root / ".dvc" / "config"
    config.write_text(config.read_text().replace("../../remote", str(fresh)))
    assert "1 file pushed" in ws.sh("dvc", "push").stdout
    assert (fresh / remote_obj).read_bytes() == bad
    ws.sh("git", "commit", "-q", "-am", "fresh remote")

    clone = Workspace(tmp_path / "clone", fresh, ws.env)
    run(["git", "clone", "-q", str(ws.root), str(clone.root)], tmp_path, ws.env)
    pull = clone.sh("dvc", "pull", check=False)
    assert pull.returncode != 0
    assert "Checkout failed" in pull.stderr and OUT in pull.stderr
    assert not (clone.root / OUT).exists()
    assert clone.status() == {"make": [{"changed outs": {OUT: "not in cache"}}]}


def test_writable_corrupted_object_is_dropped_but_only_after_checkout(ws: Workspace) -> None:
    """A damaged object left writable is hashed, but checkout copies it first (exit 0): the bad
    bytes are in the workspace. The next status hashes the object, drops it from the cache and
    says "not in cache". After a pull restores the object, DVC's state db vouches for the bad
    workspace file: status is clean."""
    bad = corrupt(ws.obj(), "truncate", keep_mode=False)
    (ws.root / OUT).unlink()
    assert ws.sh("dvc", "checkout").returncode == 0
    assert (ws.root / OUT).read_bytes() == bad
    assert ws.status() == {"make": [{"changed outs": {OUT: "not in cache"}}]}
    assert not ws.obj().exists()
    ws.sh("dvc", "pull")
    assert hashlib.md5(ws.obj().read_bytes()).hexdigest() == ws.md5()
    assert (ws.root / OUT).read_bytes() == bad
    assert ws.status() == {}


@pytest.mark.parametrize("how", ["truncate", "flip"])
def test_verify_cache_finds_the_damage_and_repair_restores_the_original(ws: Workspace,
                                                                        how: str) -> None:
    """`genlab verify-cache` exits 1 naming the damaged object and the output checked out from
    it; `--repair` deletes both (DVC's state db would vouch for the bad workspace file) and
    pulls from the ``verify = true`` remote: the original bytes are back, status is clean and
    the cache hashes clean."""
    assert ws.sh("genlab", "verify-cache").returncode == 0
    original = (ws.root / OUT).read_bytes()
    corrupt(ws.obj(), how)
    (ws.root / OUT).unlink()
    ws.sh("dvc", "checkout")  # the bad bytes reach the workspace, as above
    assert (ws.root / OUT).read_bytes() != original

    found = ws.sh("genlab", "verify-cache", check=False)
    assert found.returncode == 1
    assert str(ws.obj()) in found.stderr and f"checked out from it: {OUT}" in found.stderr
    assert damaged_objects(ws.root) == [ws.obj()]

    repaired = ws.sh("genlab", "verify-cache", "--repair")
    assert "repaired" in repaired.stdout
    assert (ws.root / OUT).read_bytes() == original
    assert ws.status() == {}
    assert damaged_objects(ws.root) == []
    assert read_parquet(ws.root / OUT).num_rows == 2000


def test_a_damaged_file_inside_a_folder_output_is_traced_through_its_listing(
        tmp_path: Path) -> None:
    """A folder output's dvc.lock md5 names its ``.dir`` listing; a damaged file object inside
    it is traced to that file, and a damaged listing to the whole folder."""
    objects = tmp_path / ".dvc" / "cache" / "files" / "md5"

    def store(data: bytes, suffix: str = "") -> str:
        md5 = hashlib.md5(data).hexdigest()
        (objects / md5[:2]).mkdir(parents=True, exist_ok=True)
        (objects / md5[:2] / (md5[2:] + suffix)).write_bytes(data)
        return md5 + suffix

    a, b = store(b"first file"), store(b"second file")
    listing = store(json.dumps([{"md5": a, "relpath": "a.bin"},
                                {"md5": b, "relpath": "sub/b.bin"}]).encode(), ".dir")
    lone = store(b"a lone file")
    lock = {"schema": "2.0", "stages": {"s": {"cmd": "x", "outs": [
        {"path": "data/runs", "md5": listing}, {"path": "data/one.bin", "md5": lone}]}}}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))

    assert affected_outputs(tmp_path, objects, {b}) == [tmp_path / "data/runs/sub/b.bin"]
    assert affected_outputs(tmp_path, objects, {lone}) == [tmp_path / "data/one.bin"]
    assert affected_outputs(tmp_path, objects, {listing.removesuffix(".dir")}) == [
        tmp_path / "data/runs"]
    (objects / b[:2] / b[2:]).write_bytes(b"damaged")
    count, damaged = damaged_objects_in(objects)
    assert count == 4 and damaged == [objects / b[:2] / b[2:]]
