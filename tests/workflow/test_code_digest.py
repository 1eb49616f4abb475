"""Code digests: comments, docstrings and layout change nothing, a token changes the digest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from genlab.workflow.code_digest import (
    digest_path,
    module_of,
    python_digest,
    source_of,
    write_digests,
)

CODE = '''"""A module."""
import math


class Model:
    """A class."""

    width: int = 3
    """An attribute's docstring (pydantic can read it): kept."""

    def area(self, r):
        """A method."""
        return math.pi * r ** 2  # a comment
'''

SAME = [
    CODE + "# a comment at the end\n",
    CODE.replace('"""A module."""', '"""Another module docstring,\n\nover lines."""'),
    CODE.replace('"""A method."""', "'''Reworded.'''"),
    CODE.replace('    """A class."""\n\n', ""),  # a docstring removed
    CODE.replace("math.pi * r ** 2", "(math.pi\n                * r**2)"),  # reflowed
    CODE.replace("\n\nclass", "\n\n\n\n\nclass"),
]
DIFFERENT = [
    CODE.replace("r ** 2", "r ** 3"),  # a constant
    CODE.replace("math.pi *", "math.tau *"),  # a name
    CODE.replace("width: int = 3", "width: int = 4"),
    CODE.replace("An attribute's docstring", "The attribute's docstring"),  # not a body's first
    CODE + "pass\n",  # one token, a statement
    CODE.replace("return math.pi", "return -math.pi"),
]


@pytest.mark.parametrize("variant", range(len(SAME)))
def test_comments_docstrings_and_layout_leave_the_digest(variant: int) -> None:
    assert python_digest(SAME[variant]) == python_digest(CODE)


@pytest.mark.parametrize("variant", range(len(DIFFERENT)))
def test_a_code_change_changes_the_digest(variant: int) -> None:
    assert python_digest(DIFFERENT[variant]) != python_digest(CODE)


def test_digest_paths_round_trip() -> None:
    path = "src/genlab/analyses/curvature/trace.py"
    assert digest_path(path) == "data/code/genlab/analyses/curvature/trace.py.digest"
    assert source_of(digest_path(path)) == path
    assert source_of("data/params.checked") is None


def test_write_digests_rewrites_only_what_changed(tmp_path: Path) -> None:
    src = tmp_path / "src/genlab"
    (src / "sub").mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "sub/mod.py").write_text(CODE)
    (src / "sub/page.html.j2").write_text("<p>{{ x }}</p>\n")
    (src / "sub/__pycache__").mkdir()
    (src / "sub/__pycache__/mod.cpython-311.pyc").write_bytes(b"\0")
    written = write_digests(tmp_path)
    digests = sorted(p.relative_to(tmp_path).as_posix()
                     for p in (tmp_path / "data/code").rglob("*") if p.is_file())
    closures = ["data/code/closure/genlab.digest", "data/code/closure/genlab.sub.mod.digest"]
    assert sorted(written) == digests == [
        *closures, "data/code/genlab/__init__.py.digest", "data/code/genlab/sub/mod.py.digest",
        "data/code/genlab/sub/page.html.j2.digest"]
    mod = tmp_path / "data/code/genlab/sub/mod.py.digest"
    closure = tmp_path / closures[1]
    assert mod.read_text() == f"ast {python_digest(CODE)}\n"
    assert (tmp_path / digests[4]).read_text().startswith("bytes ")
    # a module's closure digest: each file its import reaches, with that file's digest
    assert closure.read_text() == (f"src/genlab/__init__.py {(src / '__init__.py').read_text()}"
                                   f"ast {python_digest('')}\n"
                                   f"src/genlab/sub/mod.py ast {python_digest(CODE)}\n")
    assert module_of(closures[1]) == "genlab.sub.mod" and source_of(closures[1]) is None
    os.utime(mod, ns=(1, 1))
    os.utime(closure, ns=(1, 1))
    (src / "sub/mod.py").write_text(SAME[0])  # a comment: nothing rewritten
    assert write_digests(tmp_path) == [] and mod.stat().st_mtime_ns == 1
    assert closure.stat().st_mtime_ns == 1
    (src / "sub/page.html.j2").write_text("<p>{{ x }} </p>\n")  # a template: its bytes count
    assert write_digests(tmp_path) == [digests[4]]
    (src / "sub/mod.py").write_text(DIFFERENT[0])  # its digest and its closure's change
    assert write_digests(tmp_path) == [str(mod.relative_to(tmp_path)), closures[1]]
    (src / "sub/mod.py").unlink()  # a deleted source loses its digest and its closure's
    assert sorted(write_digests(tmp_path)) == [closures[1], str(mod.relative_to(tmp_path))]
    assert not mod.exists() and not closure.exists()


def test_a_new_import_changes_the_importers_closure_only(tmp_path: Path) -> None:
    """An import added changes the closure digest of every module that reaches it (so their
    stages rerun, dvc.yaml unchanged) and no file's own digest but the importer's."""
    src = tmp_path / "src/genlab"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "a.py").write_text("X = 1\n")
    (src / "b.py").write_text("Y = 2\n")
    (src / "c.py").write_text("from genlab import a\n")
    write_digests(tmp_path)
    (src / "a.py").write_text("from genlab import b\nX = 1\n")
    assert sorted(write_digests(tmp_path)) == [
        "data/code/closure/genlab.a.digest", "data/code/closure/genlab.c.digest",
        "data/code/genlab/a.py.digest"]
    assert "src/genlab/b.py" in (tmp_path / "data/code/closure/genlab.c.digest").read_text()


def test_a_syntax_error_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "src/genlab").mkdir(parents=True)
    (tmp_path / "src/genlab/broken.py").write_text("def f(:\n")
    with pytest.raises(SyntaxError, match="broken.py"):
        write_digests(tmp_path)
