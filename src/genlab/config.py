"""The typed model of ``params.yaml`` and its one loader.

Every stage and the workflow call :func:`load_params`; nothing else reads ``params.yaml``. The model
is frozen and rejects unknown keys, so a typo fails loudly instead of silently using a default.

Settings that change results (``studies``) are kept apart from runtime settings (``runtime``):
only the first kind is tracked by Snakemake and DVC, so changing the thread count or log level
recomputes nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from genlab.settings import FieldValueError, FrozenModel, ReportSettings, RuntimeSettings


class ParamsError(ValueError):
    """``params.yaml`` is invalid; the message names each bad key path, its value and what is
    allowed."""


# --------------------------------------------------------------------------------------------
# The whole file.
# --------------------------------------------------------------------------------------------


def _studies_model() -> type[BaseModel]:
    """One optional field per registered study, so the schema lists each study's own block."""
    from genlab.studies import STUDIES

    fields: dict[str, Any] = {
        name: (spec.config | None, Field(None, description=spec.title))
        for name, spec in STUDIES.items()
    }
    return create_model("Studies", __base__=FrozenModel, **fields)


Studies = _studies_model()


class Params(FrozenModel):
    """The whole of ``params.yaml``."""

    scale: Literal["ci", "default", "cpu", "paper"] = Field(
        description="Which size preset this file is (workflow/presets/); sizes only, same code.")
    runtime: RuntimeSettings = RuntimeSettings()
    report: ReportSettings = ReportSettings()
    studies: Studies  # type: ignore[valid-type]

    @model_validator(mode="wrap")
    @classmethod
    def _switch_off(cls, data: Any, handler: Any) -> Params:
        """``enabled: false`` in a study's block switches the study off: it is validated like
        the rest, then treated as not declared (no stages; the report lists it as not run)."""
        off: list[str] = []
        if isinstance(data, dict) and isinstance(data.get("studies"), dict):
            studies = {}
            for name, study in data["studies"].items():
                if isinstance(study, dict) and "enabled" in study:
                    enabled = study["enabled"]
                    if not isinstance(enabled, bool):
                        raise FieldValueError(("studies", name, "enabled"), enabled,
                                              "must be true or false")
                    study = {k: v for k, v in study.items() if k != "enabled"}
                    if not enabled:
                        off.append(name)
                studies[name] = study
            data = {**data, "studies": studies}
        params = handler(data)
        object.__setattr__(params, "_switched_off", tuple(off))
        object.__setattr__(params, "_order", tuple(data["studies"]) if isinstance(data, dict)
                           and isinstance(data.get("studies"), dict) else ())
        if not params.declared_studies():
            if not off:
                raise FieldValueError(("studies",), {}, "declare at least one study")
            raise FieldValueError(("studies",), list(off), "every declared study is switched "
                                  "off; switch at least one on")
        return params

    @field_validator("studies", mode="before")
    @classmethod
    def _no_empty_study(cls, studies: Any) -> Any:
        # `random_labels:` with its block deleted or commented out parses as null; skipping the
        # study silently would look like success. To skip a study, remove its key or set
        # `enabled: false` in its block.
        if isinstance(studies, dict):
            for name, study in studies.items():
                if study is None and isinstance(name, str):
                    raise FieldValueError(name, study, "empty study block (to skip a study, "
                                          "remove its key or set `enabled: false`)")
        return studies

    @model_validator(mode="after")
    def _run_ids_are_canonical(self) -> Params:
        from genlab.studies import STUDIES

        for name, spec in STUDIES.items():
            study = getattr(self.studies, name)
            if study is None:
                continue
            for run_id, run in study.runs.items():
                expected = spec.run_id(run)
                if run_id != expected:
                    raise FieldValueError(
                        ("studies", name, "runs", run_id), run_id,
                        f"a run's name is derived from its settings; expected {expected!r}")
        return self

    _switched_off: tuple[str, ...] = PrivateAttr(default=())

    @property
    def switched_off(self) -> tuple[str, ...]:
        """Studies whose block says ``enabled: false``, in file order."""
        return self._switched_off

    _order: tuple[str, ...] = PrivateAttr(default=())

    def declared_studies(self) -> dict[str, BaseModel]:
        """The studies present and switched on, by name, in the order the file declares them
        (the order of dvc.yaml's stages and of the report)."""
        names = [*self._order, *(n for n in type(self.studies).model_fields
                                 if n not in self._order)]
        return {n: s for n in names
                if (s := getattr(self.studies, n)) is not None and n not in self._switched_off}

    def studies_block(self, name: str) -> BaseModel:
        """A study's settings, switched on or off."""
        return getattr(self.studies, name)

    def study(self, name: str) -> BaseModel:
        study = self.declared_studies().get(name)
        if study is None:
            raise ParamsError(f"studies.{name}: not declared in this params file; declared: "
                              f"{sorted(self.declared_studies())}")
        return study


# --------------------------------------------------------------------------------------------
# Loading.
# --------------------------------------------------------------------------------------------


# libyaml's parser where PyYAML was built with it (the wheels are): ~10x faster, which is most of
# the 0.2 s every stage spent reading params.yaml; the constructor stays PyYAML's Python one
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeLoader):
    """YAML's safe loader without duplicate keys (aliases are refused before it runs, by
    :func:`_yaml_depth`).

    Aliases serve no purpose in a config and an alias bomb would make validation exponential. A
    duplicate key is an error rather than "the last one wins": two runs under one name would
    otherwise silently become one.
    """

    def construct_mapping(self, node, deep=False):  # type: ignore[no-untyped-def]
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                seen = key in first_line
            except TypeError:  # unhashable: the base class reports it
                continue
            if seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r} (first on line {first_line[key]})",
                    key_node.start_mark)
            first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


MAX_YAML_DEPTH = 50
"""Nesting deeper than this is not a config (the real file nests five levels); PyYAML's composer
recurses per level, so a deeper file would end in a RecursionError instead of a message."""


def _yaml_depth(text: str) -> int:
    """The deepest nesting of YAML collections in ``text``, from the parser's events alone
    (flat: no recursion, no construction); an alias is refused here."""
    depth = deepest = 0
    for event in yaml.parse(text, Loader=_SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases (*name) are not allowed in params.yaml", event.start_mark)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            deepest = max(deepest, depth)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return deepest


def _bracket_depth(text: str) -> int:
    """An upper bound on flow-collection nesting, by counting brackets (strings included): a
    cheap guard, since PyYAML's scanner is quadratic in flow depth (5000 levels: 20 s)."""
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(depth - 1, 0)
    return deepest


def parse_yaml(text: str, source: str = "params.yaml") -> Any:
    if (depth := _bracket_depth(text)) > 20 * MAX_YAML_DEPTH:
        raise ParamsError(f"{source}: {depth} nested brackets; at most {MAX_YAML_DEPTH} levels "
                          "of nesting are allowed")
    try:
        depth = _yaml_depth(text)
        if depth <= MAX_YAML_DEPTH:
            return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ParamsError(f"{source}: not valid YAML: {exc}") from None
    except ValueError as exc:  # e.g. an integer literal beyond Python's 4300-digit limit
        raise ParamsError(f"{source}: not a usable value: {exc}") from None
    raise ParamsError(f"{source}: nested {depth} levels deep; at most {MAX_YAML_DEPTH} are "
                      "allowed")


def _describe(value: Any) -> str:
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int beyond the digit limit; absurd nesting
        return f"a {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


def _key_path(raw: Any, loc: tuple[Any, ...]) -> list[Any]:
    """``loc`` as keys of the file: pydantic puts a tagged union's tag in the location (``runs.
    layers-clean-s0.layers.labels``) though the file has no such key; drop it."""
    parts, node = [], raw
    for part in loc:
        if isinstance(node, dict) and part not in node and any(
                v == part for v in node.values() if isinstance(v, str)):
            continue  # the tag: the value of the block's discriminator key
        parts.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return parts


_PLAIN_KEY = re.compile(r"[\w-]+")


def format_key_path(parts: Sequence[Any]) -> str:
    """A key path as the messages print it: ``studies.random_labels.train.lr``, list items by
    index (``hidden.0``), and a key that is empty or holds dots, spaces or slashes quoted
    (``runs['../x']``), so the path reads unambiguously; pydantic's ``[key]`` marks a bad key."""
    text = ""
    for part in parts:
        if part == "[key]":
            text += " (the key)"
        elif isinstance(part, int) or (isinstance(part, str) and _PLAIN_KEY.fullmatch(part)):
            text += f".{part}" if text else str(part)
        else:
            text += f"[{part!r}]"
    return text or "<top level>"


def _format_error(err: Mapping[str, Any], raw: Any = None) -> str:
    loc = _key_path(raw, err["loc"])
    error = (err.get("ctx") or {}).get("error")
    if isinstance(error, FieldValueError):  # a model-level check naming a key below the model
        return f"{format_key_path((*loc, *error.field))}: {error.message}, got " \
               f"{_describe(error.value)}"
    path = format_key_path(loc)
    kind, msg = err["type"], err["msg"]
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        return f"{path}: unknown key" + _allowed_keys_hint(err["loc"][:-1])
    if kind == "missing":
        return f"{path}: required key is missing"
    if kind in ("union_tag_invalid", "union_tag_not_found"):  # a tagged union's tag key
        key = format_key_path((*loc, str(ctx.get("discriminator", "")).strip("'")))
        if kind == "union_tag_not_found":
            return f"{key}: required key is missing"
        return f"{key}: Input should be one of {ctx.get('expected_tags')}, got " \
               f"{_describe(ctx.get('tag'))}"
    bounds = {"greater_than": "> {gt}", "greater_than_equal": ">= {ge}",
              "less_than": "< {lt}", "less_than_equal": "<= {le}"}
    if kind in bounds:
        msg = "must be " + bounds[kind].format(
            **{k: f"{v:g}" if isinstance(v, float) else v for k, v in ctx.items()})
    elif kind == "value_error":
        msg = str(ctx.get("error", msg))
    return f"{path}: {msg}, got {_describe(err.get('input'))}"


def _allowed_keys_hint(loc: tuple[Any, ...]) -> str:
    """The keys a mapping at ``loc`` may hold, found by walking the model's fields."""
    model: Any = Params
    for part in loc:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return ""
        model = _model_of(field.annotation)
        if model is None:
            return ""
    return f"; allowed: {', '.join(model.model_fields)}"


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def validate_params(raw: Any, source: str = "params.yaml") -> Params:
    """Validate an already-parsed mapping; raise :class:`ParamsError` listing every problem."""
    if not isinstance(raw, dict):
        raise ParamsError(f"{source}: the top level must be a mapping of keys, got "
                          f"{type(raw).__name__}")
    try:
        return Params.model_validate(raw)
    except ValidationError as exc:
        lines = [_format_error(e, raw) for e in exc.errors(include_url=False)]
        raise ParamsError(f"{source} is invalid:\n  " + "\n  ".join(lines)) from None


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read, parse and validate ``params.yaml``. Pure apart from reading that one file."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ParamsError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise ParamsError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return validate_params(parse_yaml(text, str(path)), str(path))


def settings_hash(settings: BaseModel | Mapping[str, Any]) -> str:
    """sha256 of a settings block's canonical JSON: what provenance records and compares."""
    data = settings.model_dump(mode="json") if isinstance(settings, BaseModel) else settings
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def params_json_schema() -> dict[str, Any]:
    """The JSON schema of ``params.yaml``, generated from the typed model."""
    schema = Params.model_json_schema()
    _allow_switch_off(schema)
    _constrain_keys(schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "genlab params.yaml"
    return schema


def _allow_switch_off(schema: dict[str, Any]) -> None:
    """Every study's block may say ``enabled:`` (:meth:`Params._switch_off` reads and removes it
    before the study's own model sees the block, so the model does not list it)."""
    defs = schema["$defs"]
    for study in defs["Studies"]["properties"].values():
        for option in study["anyOf"]:
            if "$ref" in option:
                block = defs[option["$ref"].rsplit("/", 1)[-1]]
                block["properties"] = {"enabled": {
                    "type": "boolean", "default": True,
                    "description": "false switches the study off: still validated, no stages, "
                                   "listed in the report as not run"}, **block["properties"]}


def _constrain_keys(node: Any) -> None:
    """pydantic writes ``dict[Slug, X]`` as ``patternProperties``, which in JSON Schema leaves
    keys that do not match unconstrained (``../x`` would pass); constrain the names too."""
    if isinstance(node, dict):
        patterns = node.get("patternProperties")
        if isinstance(patterns, dict) and len(patterns) == 1:
            node.setdefault("propertyNames", {})["pattern"] = next(iter(patterns))
        for value in node.values():
            _constrain_keys(value)
    elif isinstance(node, list):
        for value in node:
            _constrain_keys(value)
