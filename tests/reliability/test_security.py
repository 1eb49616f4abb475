"""Security: nothing unpickles, YAML is loaded safely, names cannot leave the workspace, and the
report shows user text as text.

The audit is static (an AST walk over src/ and a text scan of the workflow files), so it fails the
moment someone adds an unsafe load, whether or not a test exercises that code path.
"""

from __future__ import annotations

import ast
import copy
import re
from pathlib import Path

import pytest
import yaml

from genlab.cli import main
from genlab.config import ParamsError, validate_params
from tests_support import ROOT

SRC = ROOT / "src" / "genlab"

UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "shelve", "marshal",
                  "joblib"}
"""Modules whose loaders run code from the file they read."""


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


SAFE_YAML_LOADERS = {"SafeLoader", "CSafeLoader", "_StrictLoader"}


def audit(source: str, filename: str = "<src>") -> list[str]:
    """Unsafe deserialisation and code execution in one Python source, as ``file:line: what``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                if name.split(".")[0] in UNSAFE_MODULES:
                    found.append(f"{where}: imports {name}")
        if not isinstance(node, ast.Call):
            continue
        func = _dotted(node.func)
        last = func.rsplit(".", 1)[-1]
        if func in {"eval", "exec"}:
            found.append(f"{where}: {func}()")
        elif func in {"torch.load", "load"} and func == "torch.load" and not _is_true(
                _kw(node, "weights_only")):
            found.append(f"{where}: torch.load without weights_only=True")
        elif func.startswith("yaml.") and last in {"load", "load_all"}:
            loader = _kw(node, "Loader") or (node.args[1] if len(node.args) > 1 else None)
            if loader is None or _dotted(loader).rsplit(".", 1)[-1] not in SAFE_YAML_LOADERS:
                found.append(f"{where}: {func} without a safe Loader")
        elif func.startswith("yaml.") and last in {"unsafe_load", "full_load", "unsafe_load_all",
                                                   "full_load_all"}:
            found.append(f"{where}: {func}")
        elif last == "load" and func.split(".")[0] in {"np", "numpy"} and _is_true(
                _kw(node, "allow_pickle")):
            found.append(f"{where}: {func}(allow_pickle=True)")
        elif last in {"read_pickle", "to_pickle"}:
            found.append(f"{where}: {func}")
        elif func == "torch.save":
            found.append(f"{where}: torch.save (a pickle; artifacts are safetensors + JSON)")
        elif last in {"run", "Popen", "call", "check_call", "check_output", "system"} and (
                func == "os.system" or _is_true(_kw(node, "shell"))):
            found.append(f"{where}: {func} through a shell")
    return found


def test_the_audit_catches_what_it_looks_for() -> None:
    bad = """
import pickle
from joblib import load
import yaml, torch, numpy as np, pandas as pd, subprocess, os
torch.load("m.pt")
torch.load("m.pt", weights_only=False)
yaml.load(text)
yaml.load(text, Loader=yaml.Loader)
yaml.unsafe_load(text)
np.load("x.npy", allow_pickle=True)
pd.read_pickle("x.pkl")
torch.save(model, "m.pt")
eval("1")
subprocess.run("ls", shell=True)
os.system("ls")
"""
    assert len(audit(bad)) == 13, audit(bad)
    good = """
import yaml, torch, numpy as np
torch.load("m.pt", weights_only=True)
yaml.load(text, Loader=yaml.SafeLoader)
yaml.load(text, Loader=_StrictLoader)
yaml.safe_load(text)
np.load("x.npy")
model.eval()
"""
    assert audit(good) == []


def test_no_unsafe_load_or_code_execution_in_src() -> None:
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 20
    found = [f for path in files
             for f in audit(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == []


WORKFLOW_FILES = [ROOT / "Snakefile", *sorted((ROOT / "workflow").rglob("*.smk"))]
UNSAFE_TEXT = re.compile(r"\bpickle\b|torch\.load\(|yaml\.(unsafe_|full_)?load\(|read_pickle|"
                         r"allow_pickle\s*=\s*True|\beval\(|\bexec\(")


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_no_unsafe_load_in_the_workflow_files(path: Path) -> None:
    """Snakemake files are not plain Python: a text scan, comments excluded."""
    lines = [(n, line.split("#", 1)[0]) for n, line in enumerate(path.read_text().splitlines(), 1)]
    assert [f"{path.name}:{n}: {code.strip()}" for n, code in lines
            if UNSAFE_TEXT.search(code)] == []


def test_params_yaml_is_read_with_a_safe_loader() -> None:
    from genlab.config import _StrictLoader

    # libyaml's CSafeLoader or PyYAML's SafeLoader: either way the safe constructor, which
    # builds plain data only
    assert issubclass(_StrictLoader, yaml.constructor.SafeConstructor)
    assert not issubclass(_StrictLoader, yaml.constructor.FullConstructor)
    assert issubclass(_StrictLoader, yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader)


# --------------------------------------------------------------------------------------------
# Names: no artifact path can leave the workspace.
# --------------------------------------------------------------------------------------------

RAW = yaml.safe_load((ROOT / "params.yaml").read_text())
ESCAPES = ["../x", "../../etc/passwd", "a/b", "/abs", "a\\b", "..", ".", "~", "x\x00y", "x y",
           "é", "A", "-x"]


@pytest.mark.parametrize("name", ESCAPES)
def test_a_path_like_run_name_is_rejected(name: str) -> None:
    raw = copy.deepcopy(RAW)
    runs = raw["studies"]["random_labels"]["runs"]
    runs[name] = runs.pop(next(iter(runs)))
    with pytest.raises(ParamsError, match=r"studies\.random_labels\.runs"):
        validate_params(raw)


@pytest.mark.parametrize("name", ESCAPES)
def test_a_path_like_study_name_is_rejected(name: str) -> None:
    raw = copy.deepcopy(RAW)
    raw["studies"][name] = raw["studies"]["random_labels"]
    with pytest.raises(ParamsError, match="unknown key"):
        validate_params(raw)


def test_the_schema_restricts_run_names_to_slugs() -> None:
    """Every ``runs`` mapping in the published schema constrains its keys to the slug pattern
    (``patternProperties`` alone would let ``../x`` through a JSON-schema validator)."""
    import json

    from genlab.settings import SLUG_PATTERN

    schema = json.loads((ROOT / "workflow" / "schemas" / "params.schema.json").read_text())
    runs = [d["properties"]["runs"] for d in schema["$defs"].values()
            if "runs" in d.get("properties", {})]
    assert runs
    for block in runs:
        assert block["propertyNames"]["pattern"] == SLUG_PATTERN
    jsonschema = pytest.importorskip("jsonschema")
    raw = copy.deepcopy(RAW)
    jsonschema.validate(raw, schema)
    runs_ = raw["studies"]["random_labels"]["runs"]
    runs_["../x"] = runs_.pop(next(iter(runs_)))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(raw, schema)


@pytest.mark.parametrize("flag", ["--run", "--study"])
def test_the_cli_refuses_a_path_like_name(tmp_path: Path, flag: str) -> None:
    """A name that reaches the CLI without passing through params.yaml is refused too, and
    nothing is written anywhere."""
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(RAW))
    names = {"--study": "random_labels", "--run": "p0-s0", flag: "../../escaped"}
    work = tmp_path / "work"
    work.mkdir()
    args = ["train", "--params", str(params), "--study", names["--study"], "--run",
            names["--run"], "--dataset", str(work / "dataset"), "--out", str(work / "out")]
    try:
        code = main(args)
    except KeyError:  # an unknown --study: refused, if not yet with a message
        code = 1
    assert code != 0
    assert sorted(tmp_path.rglob("*")) == [params, work]


# --------------------------------------------------------------------------------------------
# The report shows user text as text.
# --------------------------------------------------------------------------------------------

EVIL = '"><script>alert(1)</script><img src=x onerror=alert(2)><a href="javascript:x">'


def _fake_report(text: str):
    """A report from a fake summary with ``text`` in every string the report shows."""
    from genlab.report.collect import AnalysisSection, Report, StudySection

    claim = {"study": text, "key": text, "claim": text, "citation": text, "criterion": text,
             "status": "reproduced", "numbers": {text: text, "x": 1.5}}
    section = StudySection(
        name="random_labels", title=text, description=text, claims=[claim],
        figures=[(text, "<svg></svg>")], run_columns=("test_acc", text),
        runs=[{"run": text, "test_acc": text, text: [text]}],
        provenance={"settings_sha256": "1" * 64, "device": text},
        analyses=[AnalysisSection(title=text, intro=text, figure="<svg></svg>", caption=text,
                                  columns=(text,), rows=[{"run": text, text: {text: text}}])])
    return Report(title=text, params_sha256="0" * 64, scale=text, sections=[section],
                  provenance={"git_commit": text, "genlab_version": text,
                              "versions": {text: text}, "devices": [text]})


def test_the_report_escapes_every_user_string() -> None:
    """Hostile text everywhere renders to exactly the page a harmless word renders to, with the
    word replaced by the escaped text: it never becomes an element or an attribute."""
    from markupsafe import escape

    from genlab.report.render import render_html

    harmless = "Qz7harmless"
    evil_html, harmless_html = render_html(_fake_report(EVIL)), render_html(_fake_report(harmless))
    assert evil_html.replace(str(escape(EVIL)), harmless) == harmless_html
    lowered = evil_html.lower()
    assert "<script" not in lowered and "<img" not in lowered
    assert lowered.count("<a ") == harmless_html.lower().count("<a ")  # only the page's own links
    assert evil_html.count("&lt;script&gt;") >= 10  # shown, as text, wherever it was used


def test_the_report_title_from_params_is_escaped(tmp_path: Path) -> None:
    """The one user string that reaches the report straight from params.yaml (the description
    goes through the same template, see above)."""
    raw = copy.deepcopy(RAW)
    raw["report"]["title"] = EVIL
    raw["studies"]["random_labels"]["description"] = EVIL
    params = validate_params(raw)
    assert params.report.title == EVIL  # accepted: it is only ever shown as text
