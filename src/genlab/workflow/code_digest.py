"""Code fingerprints that ignore comments, docstrings and formatting: ``data/code/``.

A stage depends on the genlab modules its command imports (:mod:`genlab.workflow.code_deps`),
but on what they compute, not on their bytes: a comment, a docstring or a reflowed line must
rerun nothing, and a one-token change must rerun exactly the stages whose import closure holds
the module. Neither engine can be told how to hash a file, so the ``code_digests`` stage (the
first of dvc.yaml, run by ``genlab code-digests``) writes one small file per source file,
``data/code/<path below src/>.digest``, and every other stage depends on those files instead of
the sources. The digest of a ``.py`` file is the md5 of its abstract syntax tree without
positions and without docstrings (the first string statement of the module and of each class
and function body); of any other file (the report's template), the md5 of its bytes. A digest
file is rewritten only when its content changes, so its mtime and hash hold still across edits
that do not change the code.

Why docstrings may go: no stage writes one into an output (grep ``__doc__``/``getdoc``: the CLI's
help text and the params schema's descriptions, neither an artifact). String statements that
are not a body's first (attribute docstrings, which pydantic can read) are kept, as is every
other constant. The AST is Python's, so a new Python version, whose tree may differ, reruns
everything, as a changed interpreter should.

A stage depends on a few of those digests, not on one per file: for every module of the
package the stage also writes the digest of its import closure,
``data/code/closure/<module>.digest``, which lists each file of the closure
(:meth:`genlab.workflow.code_deps.CodeDeps.files`) with its digest, and a stage depends on the
closure digests of the modules its command runs (its roots: the CLI, the stage's module, the
study's and the analysis' modules; a root that another root's closure holds is left out). So a
one-token change reruns the same stages as before (the closures holding the module change), an
import added changes the closures (dvc.yaml stays as it is; an import removed can leave a root
no longer covered, which ``genlab dag --check`` reports and Snakemake's parse writes), and each
stage lists 2-5 code dependencies instead of ~100: DVC's per-dependency work (an object per
dependency, dvc.lock's size, a state lookup each) is paid a few times per stage, not a hundred.
``git diff --no-index`` of two closure files (or ``dvc diff``) says which source changed.

DVC runs ``code_digests`` whenever a byte of ``src/genlab`` changes (it depends on the folder),
in well under a second, and then reruns only the stages whose digests changed. Snakemake never
schedules it: :func:`genlab.workflow.sync.reconcile` runs it at parse time when it is stale,
before it judges the other stages, so a Snakemake plan never holds it (a job upstream of every
stage would make Snakemake rerun them all).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from genlab.paths import CODE_DIGESTS, SRC

if TYPE_CHECKING:
    from genlab.workflow.code_deps import CodeDeps

CODE_STAGE = "code_digests"
"""Its dvc.yaml stage (genlab.workflow.generate)."""
SUFFIX = ".digest"
PACKAGE = SRC / "genlab"
"""What the digests cover: every file of the genlab package (``__pycache__`` aside)."""
CLOSURES = CODE_DIGESTS / "closure"
"""One digest per module of the package: its import closure's files and their digests."""


def closure_path(module: str) -> str:
    """The file that stands for a module's import closure: ``genlab.stages.analyze`` ->
    ``data/code/closure/genlab.stages.analyze.digest``."""
    return str(CLOSURES / f"{module}{SUFFIX}")


def module_of(dep: str | PurePosixPath) -> str | None:
    """The module whose closure a dependency stands for (the inverse of :func:`closure_path`);
    None if ``dep`` is not a closure file."""
    path = PurePosixPath(dep)
    if path.parent != CLOSURES or not path.name.endswith(SUFFIX):
        return None
    return path.name[: -len(SUFFIX)]


def module_name(source: str | PurePosixPath) -> str | None:
    """The module a package file is (``src/genlab/x/__init__.py`` -> ``genlab.x``); None for a
    file that is not Python."""
    rel = PurePosixPath(source).relative_to(SRC)
    if rel.suffix != ".py":
        return None
    parts = rel.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def digest_path(source: str | PurePosixPath) -> str:
    """The digest file that stands for a source file: ``src/genlab/x.py`` ->
    ``data/code/genlab/x.py.digest``."""
    rel = PurePosixPath(source).relative_to(SRC)
    return str(CODE_DIGESTS / f"{rel}{SUFFIX}")


def source_of(digest: str) -> str | None:
    """The source file a digest file stands for (the inverse of :func:`digest_path`); None if
    ``digest`` is not one."""
    path = PurePosixPath(digest)
    if not (path.is_relative_to(CODE_DIGESTS) and path.name.endswith(SUFFIX)) or (
            path.is_relative_to(CLOSURES)):
        return None
    return str(SRC / str(path.relative_to(CODE_DIGESTS))[: -len(SUFFIX)])


def closure_sources(deps: list[str], root: str | Path = ".",
                    code: CodeDeps | None = None) -> list[str]:
    """The source files (sorted) that a stage's closure dependencies stand for: what the stage's
    command imports (``code``: the sources already parsed, for many stages at once)."""
    from genlab.workflow.code_deps import CodeDeps

    modules = [m for m in map(module_of, deps) if m is not None]
    return (code or CodeDeps(root)).files(modules)


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:]
    return tree


def python_digest(source: str, filename: str = "<unknown>") -> str:
    """md5 of the code's syntax tree: positions, comments, docstrings and layout left out."""
    tree = _strip_docstrings(ast.parse(source, filename=filename))
    return hashlib.md5(ast.dump(tree, include_attributes=False).encode()).hexdigest()


def source_digest(path: Path) -> str:
    """A source file's digest line: ``ast <md5>`` for Python, ``bytes <md5>`` otherwise."""
    if path.suffix == ".py":
        return f"ast {python_digest(path.read_text(encoding='utf-8'), str(path))}\n"
    return f"bytes {hashlib.md5(path.read_bytes()).hexdigest()}\n"


def write_digests(root: str | Path = ".") -> list[str]:
    """Bring ``data/code/`` up to date with the package's sources: each file's digest and each
    module's closure digest; return the digest files written or deleted (a source file's syntax
    error is the stage's error, with its name)."""
    from genlab.io import write_text
    from genlab.workflow.code_deps import CodeDeps
    from genlab.workflow.fingerprint import files_under

    root = Path(root)
    sources = list(files_under(root, str(PACKAGE)))
    digests = {f: source_digest(root / f) for f in sources}
    wanted = {digest_path(f): digests[f] for f in sources}
    deps = CodeDeps(root)
    for module in filter(None, map(module_name, sources)):
        wanted[closure_path(module)] = "".join(
            f"{f} {digests[f]}" for f in deps.files([module]))
    changed = []
    for dest, text in wanted.items():
        target = root / dest
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            write_text(target, text)
            changed.append(dest)
    for f in files_under(root, str(CODE_DIGESTS)):
        if f not in wanted:  # its source was deleted or renamed
            (root / f).unlink()
            changed.append(f)
    return changed


def run(args: argparse.Namespace) -> int:
    """``genlab code-digests``: the ``code_digests`` stage."""
    changed = write_digests(Path.cwd())
    print(f"{CODE_DIGESTS}: {len(changed)} digest file(s) changed"
          + (f": {', '.join(changed[:8])}" + (" ..." if len(changed) > 8 else "")
             if changed else ""))
    return 0
