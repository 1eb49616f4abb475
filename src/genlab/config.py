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
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from genlab.settings import FrozenModel, ReportSettings, RuntimeSettings


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

    scale: Literal["ci", "default", "paper"] = Field(
        description="Which size preset this file is (workflow/presets/); sizes only, same code.")
    runtime: RuntimeSettings = RuntimeSettings()
    report: ReportSettings = ReportSettings()
    studies: Studies  # type: ignore[valid-type]

    @field_validator("studies")
    @classmethod
    def _at_least_one_study(cls, studies: BaseModel) -> BaseModel:
        if not any(getattr(studies, name) is not None for name in type(studies).model_fields):
            raise ValueError("declare at least one study")
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
                    raise ValueError(
                        f"studies.{name}.runs.{run_id}: a run's name is derived from its "
                        f"settings; expected {expected!r}")
        return self

    def declared_studies(self) -> dict[str, BaseModel]:
        """The studies present in the file, by name, in registry order."""
        return {n: s for n in type(self.studies).model_fields
                if (s := getattr(self.studies, n)) is not None}

    def study(self, name: str) -> BaseModel:
        study = self.declared_studies().get(name)
        if study is None:
            raise ParamsError(f"studies.{name}: not declared in this params file; declared: "
                              f"{sorted(self.declared_studies())}")
        return study


# --------------------------------------------------------------------------------------------
# Loading.
# --------------------------------------------------------------------------------------------


class _NoAliasLoader(yaml.SafeLoader):
    """YAML's safe loader without anchors/aliases: they serve no purpose in a config and an
    alias bomb would make validation exponential."""

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases (*name) are not allowed in params.yaml", event.start_mark)
        return super().compose_node(parent, index)


def parse_yaml(text: str, source: str = "params.yaml") -> Any:
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ParamsError(f"{source}: not valid YAML: {exc}") from None


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _format_error(err: Mapping[str, Any]) -> str:
    path = ".".join(str(p) for p in err["loc"]) or "<top level>"
    kind, msg = err["type"], err["msg"]
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        return f"{path}: unknown key" + _allowed_keys_hint(err["loc"][:-1])
    if kind == "missing":
        return f"{path}: required key is missing"
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
        lines = [_format_error(e) for e in exc.errors(include_url=False)]
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
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "genlab params.yaml"
    return schema
