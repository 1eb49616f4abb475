"""Each stage's exact code dependencies: the genlab source files its command imports.

A stage depends on the import closure of the modules it runs, found statically: every ``import``
and ``from ... import`` of a ``genlab`` module anywhere in a file (function-level imports
included, since they run when the function does; imports under ``if TYPE_CHECKING:`` excluded,
since they never run), followed transitively, plus the ``__init__.py`` of every package on the
way (Python runs them on import). Library code outside genlab is covered by the pinned
environment, as before.

Two imports are made by name at run time and are therefore declared here rather than found:
the CLI imports the module of the stage it runs (the stage's roots name it), and the study
registry imports every study's ``settings`` module (:data:`DYNAMIC`); a study's ``experiment``
module is a root of each of that study's stages. Non-Python files a module reads are listed in
:data:`DATA_FILES`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path, PurePosixPath

from genlab.paths import SRC


def _dynamic_studies() -> list[str]:
    from genlab.studies import NAMES, settings_module

    return [settings_module(name) for name in NAMES]


DYNAMIC: dict[str, Callable[[], list[str]]] = {"genlab.studies": _dynamic_studies}
"""Modules that import others by a computed name -> the modules they import that way."""

DATA_FILES: dict[str, tuple[str, ...]] = {
    "genlab.report.render": ("genlab/report/templates/index.html.j2",),
}
"""Module -> package files (relative to ``src/``) it reads at run time."""


class CodeDeps:
    """Import closures over the genlab sources under ``root/src`` (parsed once each)."""

    def __init__(self, root: str | Path = ".") -> None:
        self.src = Path(root) / SRC

    @cache  # noqa: B019 - one instance per generation; the cache dies with it
    def module_file(self, name: str) -> PurePosixPath | None:
        """``src/``-relative path of a genlab module (a package: its ``__init__.py``), or None."""
        rel = PurePosixPath(*name.split("."))
        for candidate in (rel / "__init__.py", rel.with_suffix(".py")):
            if (self.src / candidate).is_file():
                return candidate
        return None

    @cache  # noqa: B019
    def imports(self, name: str) -> frozenset[str]:
        """The genlab modules ``name``'s file imports directly, with their parent packages."""
        path = self.module_file(name)
        if path is None:
            return frozenset()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in _executed_nodes(ast.parse((self.src / path).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: resolve against this module's package
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                found.add(module)
                # `from genlab.x import y` imports the submodule genlab.x.y when there is one
                found.update(f"{module}.{alias.name}" for alias in node.names
                             if self.module_file(f"{module}.{alias.name}") is not None)
        found.update(DYNAMIC[name]() if name in DYNAMIC else ())
        return frozenset(m for module in found if module.split(".")[0] == "genlab"
                         for m in _with_parents(module) if self.module_file(m) is not None)

    def closure(self, roots: Iterable[str]) -> set[str]:
        """Every genlab module that importing ``roots`` can import."""
        seen: set[str] = set()
        todo = [m for root in roots for m in _with_parents(root)]
        while todo:
            module = todo.pop()
            if module in seen or self.module_file(module) is None:
                continue
            seen.add(module)
            todo.extend(self.imports(module))
        return seen

    def files(self, roots: Iterable[str]) -> list[str]:
        """The closure of ``roots`` as sorted repository-relative file paths, for dvc.yaml."""
        modules = self.closure(roots)
        paths = {SRC / self.module_file(m) for m in modules}
        paths.update(SRC / f for m in modules for f in DATA_FILES.get(m, ()))
        return sorted(str(p) for p in paths)


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _executed_nodes(tree: ast.AST) -> Iterable[ast.AST]:
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
