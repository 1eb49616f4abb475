"""``genlab preset NAME [--out FILE]``: a size preset's full params file.

``params.yaml`` is the ``default`` preset and the one full config. ``workflow/presets/<name>.yaml``
holds only what a preset changes (its ``scale:``, its sizes, its run grids), and this module merges
it onto ``params.yaml`` (:func:`merge`): mappings merge key by key, any other value replaces, a
``runs:`` or ``grid:`` block replaces the base's whole, and a key that ``params.yaml`` does not
have is an error naming its path, so a typo cannot add a key silently. :func:`preset_text`
writes the merged file with ``params.yaml``'s comments and key order (ruamel.yaml round trip) and
validates it, in the layout DVC's own YAML dump keeps (:func:`dvc_stable`), so that
``dvc exp run -S key=value`` on a generated file changes one line, not the file's layout.
``genlab preset paper --out params.yaml`` switches presets; ``git checkout params.yaml`` goes back.
"""

from __future__ import annotations

import argparse
import copy
import io
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedBase
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import FoldedScalarString

from genlab.config import ParamsError, format_key_path, parse_yaml, validate_params

PRESETS_DIR = Path("workflow/presets")
"""Where the presets' override files live, relative to the project root."""
BASE = Path("params.yaml")
REPLACED = frozenset({"runs", "grid", "regimes"})
"""A mapping under these keys replaces the base's whole: a preset's runs are its own, and so are
the regimes it compares (repetition: a paper-scale sweep of data budgets the default omits)."""
GENERATED = "# GENERATED from params.yaml + workflow/presets/{name}.yaml by `genlab preset {name}`"
HEADER = (GENERATED + "\n"
          "# (`--out FILE` writes it): edit those two files, not this one, and regenerate.\n"
          "# Validate with `genlab check-params`; schema: workflow/schemas/params.schema.json.\n")
_NAME = re.compile(r"[\w-]+")
WIDTH = 80
"""The line width of DVC's YAML dump (ruamel.yaml's default, which ``dvc.utils.serialize`` keeps):
a flow collection or a folded string that runs past it is re-wrapped by ruamel's own rules."""


class PresetError(ParamsError):
    """A preset that cannot be merged: no such preset, bad YAML or a key params.yaml lacks."""


def merge(base: dict, overrides: dict, path: tuple[Any, ...] = ()) -> dict:
    """``base`` with ``overrides`` applied, as a new mapping of ``base``'s type (neither input is
    modified). Mappings merge recursively, every other value replaces, a ``runs:`` or ``grid:``
    mapping replaces the base's whole; an override key that ``base`` does not have raises
    :class:`PresetError` naming its key path (``path`` is the key path of ``base`` itself)."""
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        where = (*path, key)
        if key not in merged:
            allowed = ", ".join(str(k) for k in merged)
            raise PresetError(f"{format_key_path(where)}: not a key of params.yaml (a preset only "
                              f"overrides existing keys; allowed here: {allowed})")
        if key not in REPLACED and isinstance(value, Mapping) and isinstance(merged[key], Mapping):
            merged[key] = merge(merged[key], value, where)
        else:
            merged[key] = copy.deepcopy(value)
            if key in REPLACED:
                _carry_comment(overrides, merged, key)
    return merged


def _carry_comment(source: Any, target: Any, key: Any) -> None:
    """The comment after ``key:`` in ``source`` (a ruamel mapping) replaces ``target``'s: a
    preset's runs carry the preset's note on them, if it has one."""
    token = getattr(source, "ca", None) and (source.ca.items.get(key) or [None] * 4)[2]
    if token is None or not token.value.lstrip().startswith("#") or not hasattr(target, "ca"):
        return
    slots = target.ca.items.setdefault(key, [None] * 4)
    slots[2] = copy.deepcopy(token)


def _round_trip() -> YAML:
    # round trip, as DVC loads a params file (dvc.utils.serialize.parse_yaml_for_update): comments,
    # key order, flow style and folded strings are kept; quotes are not (DVC's dump drops them)
    return YAML(typ="rt")


def _one_line(node: Any) -> str:
    """``node`` (a flow collection) written on one line, as YAML."""
    yaml = YAML(typ="rt")
    yaml.width = 1 << 16
    buffer = io.StringIO()
    yaml.dump(node, buffer)
    return buffer.getvalue().splitlines()[0]


def dvc_stable(node: Any, indent: int = 0) -> Any:
    """Restyle ``node`` (ruamel.yaml round-trip data, a block mapping or sequence at column
    ``indent``) in place so that DVC's YAML dump, the one ``dvc exp run -S`` rewrites a params
    file with, writes it back byte for byte; returns ``node``. Three rules: a flow mapping stays
    on its one line where that line fits in :data:`WIDTH` columns, else it becomes a block
    mapping (ruamel would wrap it); a list under a block mapping is a block sequence (``-S``
    replaces every list with a plain one, which DVC dumps in block style); a folded string
    (``>-``) is re-wrapped by ruamel itself at :data:`WIDTH`. Values are never changed."""
    items = node.items() if isinstance(node, Mapping) else enumerate(node)
    for key, value in list(items):
        if isinstance(value, FoldedScalarString):
            node[key] = FoldedScalarString(str(value))  # no fold positions: ruamel's wrapping
        elif isinstance(value, (Mapping, list)) and isinstance(value, CommentedBase):
            if not value or (isinstance(value, Mapping) and value.fa.flow_style()
                             and indent + len(f"{key}: ") + len(_one_line(value)) <= WIDTH):
                continue  # an empty one has no block form: ``{}`` or ``[]``
            value.fa.set_block_style()
            dvc_stable(value, indent + 2)
    return node


def _load(rt: YAML, path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PresetError(f"{path}: no such file") from None
    try:
        data = rt.load(text)
    except YAMLError as exc:
        raise PresetError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, Mapping):
        raise PresetError(f"{path}: the top level must be a mapping of keys")
    return data


def available(root: Path = Path(".")) -> list[str]:
    return sorted(p.stem for p in (root / PRESETS_DIR).glob("*.yaml"))


def preset_text(name: str, root: Path = Path(".")) -> str:
    """The full params file of preset ``name``: ``root/params.yaml`` with
    ``root/workflow/presets/<name>.yaml``'s overrides applied, as YAML text that keeps
    params.yaml's comments and key order under a header saying it is generated. Raises
    :class:`PresetError` (a :class:`ParamsError`) if the merge or the validation fails."""
    root = Path(root)
    source = root / PRESETS_DIR / f"{name}.yaml"
    if not _NAME.fullmatch(name) or not source.is_file():
        raise PresetError(f"no preset {name!r} in {root / PRESETS_DIR}; available: "
                          f"{', '.join(available(root)) or 'none'}")
    base_path = root / BASE
    if base_path.is_file() and base_path.read_text(encoding="utf-8").startswith(
            GENERATED.split("{", 1)[0]):
        raise PresetError(f"{base_path} is itself a generated preset: restore the default one "
                          "(`git checkout params.yaml`) before generating another")
    rt = _round_trip()
    base, overrides = _load(rt, base_path), _load(rt, source)
    try:
        merged = merge(base, overrides)
    except PresetError as exc:
        raise PresetError(f"{source}: {exc}") from None
    from dvc.utils.serialize import dumps_yaml  # DVC's own dump, the one `dvc exp run -S` uses

    # params.yaml's own header describes params.yaml (the default preset): the header replaces it
    lines = dumps_yaml(dvc_stable(merged)).splitlines(keepends=True)
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        lines.pop(0)
    text = HEADER.format(name=name) + "".join(lines)
    validate_params(parse_yaml(text, f"preset {name}"), f"preset {name}")
    return text


def run(args: argparse.Namespace) -> int:
    """``genlab preset NAME [--out FILE]``: print the preset's full params file, or write it."""
    text = preset_text(args.name)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    from genlab.io import write_text

    write_text(args.out, text)
    print(f"{args.out}: the {args.name} preset (params.yaml + {PRESETS_DIR / args.name}.yaml)")
    return 0
