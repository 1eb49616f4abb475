"""The shortcuts recording takes inside DVC's commit give DVC's own answers: params read once
per file content, and git's index read once."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from dvc.dependency import param
from dvc_objects.fs.local import LocalFileSystem

from genlab.workflow.sync import _params_read_once, _tracked_from_one_index_read

PARAMS = """\
studies:
  a:
    data: {n: 3, seed: 0}
    runs:
      r-1: {lr: 0.1}
      r.2: {lr: 0.2}
    widths: [5, 10, 20]
scale: default
"""
KEYS = ["studies.a.data", "studies.a.runs.r-1", "studies.a.widths.1", "scale", "missing.key",
        "studies.a.data.n"]


def test_params_are_read_as_dvc_reads_them(tmp_path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(PARAMS)
    fs = LocalFileSystem()
    expected = param.read_param_file(fs, str(path), KEYS, flatten=True)
    assert expected["studies.a.widths.1"] == 10 and "missing.key" not in expected
    with _params_read_once():
        first = param.read_param_file(fs, str(path), KEYS, flatten=True)
        first["scale"] = "edited by a caller"  # each caller gets its own copy
        again = param.read_param_file(fs, str(path), KEYS, flatten=True)
        path.write_text(PARAMS.replace("n: 3", "n: 4"))  # an edit is read, not served stale
        edited = param.read_param_file(fs, str(path), KEYS, flatten=True)
        whole = param.read_param_file(fs, str(path))  # other calls go to DVC's own reader
    assert again == expected
    assert edited["studies.a.data"] == {"n": 4, "seed": 0} and edited["studies.a.data.n"] == 4
    assert whole["scale"] == "default"
    assert param.read_param_file.__module__ == "dvc.dependency.param"  # put back


def test_is_tracked_from_one_index_read(tmp_path) -> None:
    from scmrepo.git import Git

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "a.py").write_text("a = 1\n")
    (tmp_path / "top.txt").write_text("x\n")
    (tmp_path / "untracked.txt").write_text("y\n")
    (tmp_path / "src" / "pkgs").mkdir()
    git("add", "src/pkg/a.py", "top.txt")
    scm = Git(str(tmp_path))
    try:
        fast = _tracked_from_one_index_read(scm)
        for rel in ("src", "src/pkg", "src/pkg/a.py", "top.txt", "untracked.txt", "src/pkgs",
                    "src/pk", "data"):
            path = str(tmp_path / rel)
            assert fast(path) == scm.is_tracked(path), rel
        assert fast(str(tmp_path / "src/pkg")) and not fast(str(tmp_path / "src/pk"))
    finally:
        scm.close()



def test_each_dependency_file_is_hashed_once_per_content(tmp_path, monkeypatch) -> None:
    import hashlib

    from dvc.dependency.base import Dependency
    from dvc.output import Output
    from dvc_data.hashfile.hash_info import HashInfo

    from genlab.workflow.sync import _dependency_hashes_once

    hashed: list[str] = []

    def dvc_hash(self):  # stands for DVC's own (a state lookup and a new object per call)
        hashed.append(self.fs_path)
        path = Path(self.fs_path)
        data = path.read_bytes() if path.is_file() else b"folder"
        return HashInfo("md5", hashlib.md5(data).hexdigest())

    monkeypatch.setattr(Output, "get_hash", dvc_hash)

    class Dep:  # what the memo reads of a dependency
        protocol, hash_name = "local", "md5"

        def __init__(self, path: Path) -> None:
            self.fs_path = str(path)

    code, folder = tmp_path / "a.py", tmp_path / "pkg"
    code.write_text("a = 1\n")
    folder.mkdir()
    with _dependency_hashes_once():
        first = [Dependency.get_hash(Dep(code)) for _ in range(3)]  # three stages list it
        assert hashed == [str(code)] and first[0] == first[2] and first[0] is not first[1]
        code.write_text("a = 22\n")  # edited during the commit: hashed again
        assert Dependency.get_hash(Dep(code)) != first[0] and hashed.count(str(code)) == 2
        Dependency.get_hash(Dep(folder))
        Dependency.get_hash(Dep(folder))  # a folder goes to DVC every time
        assert hashed.count(str(folder)) == 2
    assert "get_hash" not in Dependency.__dict__  # put back: DVC's own again
    Dependency.get_hash(Dep(code))
    assert hashed.count(str(code)) == 3


def test_run_cache_entries_are_written_with_libyaml_only_where_dvc_reads_the_same(
        tmp_path) -> None:
    """A run-cache entry written inside the commit loads, with DVC's own reader, to the data DVC
    would have written; where YAML 1.1's writer leaves a string that YAML 1.2 reads as a number
    ("1e5"), DVC's own writer writes it."""
    from collections import OrderedDict

    from dvc.utils import serialize
    from dvc.utils.serialize import load_yaml

    from genlab.workflow.sync import _run_cache_entries_with_libyaml

    entry = OrderedDict([("cmd", "python -m genlab train"), ("deps", [OrderedDict(
        [("path", "src/genlab/a.py"), ("hash", "md5"), ("md5", "0" * 32), ("size", 12)])]),
        ("params", {"params.yaml": {"studies.a.lr": 0.001, "studies.a.on": True,
                                    "studies.a.name": "yes", "studies.a.none": None}}),
        ("outs", [])])
    tricky = OrderedDict(entry, params={"params.yaml": {"studies.a.tag": "1e5"}})
    original = serialize.dump_yaml
    with _run_cache_entries_with_libyaml():
        serialize.dump_yaml(str(tmp_path / "fast"), entry)
        serialize.dump_yaml(str(tmp_path / "tricky"), tricky)
    assert serialize.dump_yaml is original  # put back
    original(str(tmp_path / "dvc"), entry)
    assert load_yaml(str(tmp_path / "fast")) == load_yaml(str(tmp_path / "dvc")) == entry
    assert (tmp_path / "fast").read_text() != (tmp_path / "dvc").read_text()  # libyaml's text
    assert load_yaml(str(tmp_path / "tricky"))["params"]["params.yaml"]["studies.a.tag"] == "1e5"
    # the case the check guards: libyaml's text alone would have become a number
    assert serialize.parse_yaml(yaml.safe_dump({"tag": "1e5"}), "x") == {"tag": 100000.0}
