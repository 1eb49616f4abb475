"""Fault injection, bad params: random mutations of the shipped ``params.yaml``.

Every mutation either validates, or fails with a :class:`ParamsError` whose message names the key
that was mutated; never a traceback. In-process (``validate_params``/``load_params``) for the
hypothesis examples, then a few files through the real entry points (``genlab check-params`` and
``snakemake -n``) in a throwaway workspace that must be byte-identical afterwards.
"""

from __future__ import annotations

import copy
import hashlib
import math
import os
import re
import shutil
import time
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genlab.config import (
    ParamsError,
    format_key_path,
    load_params,
    settings_hash,
    validate_params,
)
from genlab.paths import run_dir
from genlab.settings import SLUG_PATTERN
from tests_support import ROOT, run, tool_env

DEFAULT = ROOT / "params.yaml"
RAW: dict[str, Any] = yaml.safe_load(DEFAULT.read_text())
# A fixed sample of 60 per test in the suite; GENLAB_FUZZ_EXAMPLES=5000 explores afresh.
FUZZ = int(os.environ.get("GENLAB_FUZZ_EXAMPLES", "0"))
EXAMPLES = settings(max_examples=FUZZ or 60, deadline=None, derandomize=not FUZZ, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

Path_ = tuple[Any, ...]


def _paths(tree: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every key path in the tree (mappings and list items), the root excluded."""
    items = (tree.items() if isinstance(tree, dict)
             else enumerate(tree) if isinstance(tree, list) else ())
    found = []
    for key, value in items:
        found.append((*prefix, key))
        found += _paths(value, (*prefix, key))
    return found


def _get(tree: Any, path: Path_) -> Any:
    for key in path:
        tree = tree[key]
    return tree


PATHS = _paths(RAW)
MAPPINGS = [()] + [p for p in PATHS if isinstance(_get(RAW, p), dict)]
RUNS = [(study, run_) for study, block in RAW["studies"].items() for run_ in block["runs"]]

BAD_VALUES = st.one_of(
    st.sampled_from([None, "", "x", "../x", "a/b", "ci", -1, 0, -0.0, 1, 1e308, -1e308,
                     float("nan"), float("inf"), float("-inf"), 10**40, True, False, [], {},
                     [1, "a"], {"k": 1}, "\u202e", "<script>", "a" * 3000, [[[]]]]),
    st.integers(), st.floats(), st.text(max_size=12), st.booleans(),
    st.lists(st.integers(-5, 5), max_size=3))
NAMES = st.one_of(
    st.sampled_from(["../x", "a/b", "/abs", "x.y", "A", "", " ", "-x", "x\n", "..", "nul\x00",
                     "learning_rate", "a" * 65]),
    st.text(max_size=10))


def _dotted(path: Path_) -> str:
    return ".".join(str(p) for p in path)


def check(raw: Any, mutated: Path_) -> None:
    """The oracle: valid and safe to use, or an error naming the mutated key (or the block whose
    cross-field check it broke, with the key in the message)."""
    try:
        params = validate_params(raw)
    except ParamsError as exc:
        message = str(exc)
        assert "Traceback" not in message
        want = tuple(str(p) for p in mutated)
        for line in message.split("\n  "):  # the header, then one problem per line
            named = [k for k in range(len(want), 0, -1) if line.startswith(tuple(
                format_key_path(mutated[:k]) + sep for sep in (":", ".", "[", " (the key)")))]
            if not named or named[0] < min(2, len(want)):
                continue
            if named[0] >= len(want) - 1 or any(k in line for k in want[named[0]:]):
                return
        raise AssertionError(f"no line of the error names {_dotted(mutated)!r}:\n{message}") \
            from None
    # Valid: then nothing non-finite slipped through, and every artifact path stays inside data/.
    settings_hash(params.model_dump(mode="json"))  # json with allow_nan=False
    for study, block in params.declared_studies().items():
        for name in block.runs:
            assert re.fullmatch(SLUG_PATTERN, name)
            path = PurePosixPath(run_dir(study, name))
            assert ".." not in path.parts and path.parts[:3] == ("data", study, "runs")


def test_the_default_file_is_valid() -> None:
    check(copy.deepcopy(RAW), ())


@EXAMPLES
@given(path=st.sampled_from(PATHS), value=BAD_VALUES)
def test_replacing_any_value(path: Path_, value: Any) -> None:
    raw = copy.deepcopy(RAW)
    _get(raw, path[:-1])[path[-1]] = value
    check(raw, path)


@EXAMPLES
@given(path=st.sampled_from([p for p in PATHS if not isinstance(p[-1], int)]))
def test_deleting_any_key(path: Path_) -> None:
    raw = copy.deepcopy(RAW)
    del _get(raw, path[:-1])[path[-1]]
    check(raw, path)


@EXAMPLES
@given(where=st.sampled_from(MAPPINGS), name=NAMES, value=BAD_VALUES)
def test_adding_an_unknown_key(where: Path_, name: str, value: Any) -> None:
    raw = copy.deepcopy(RAW)
    block = _get(raw, where)
    if name in block:
        return
    block[name] = value
    check(raw, (*where, name))


@EXAMPLES
@given(which=st.sampled_from(RUNS), name=NAMES)
def test_renaming_a_run(which: tuple[str, str], name: str) -> None:
    """Path-like, dotted, empty, duplicate-in-spirit names: rejected, naming the run."""
    study, old = which
    raw = copy.deepcopy(RAW)
    runs = raw["studies"][study]["runs"]
    runs[name] = runs.pop(old)
    check(raw, ("studies", study, "runs", name))


@EXAMPLES
@given(path=st.sampled_from([p for p in PATHS if isinstance(_get(RAW, p), list | dict)]))
def test_emptying_any_section_or_grid(path: Path_) -> None:
    raw = copy.deepcopy(RAW)
    parent = _get(raw, path[:-1])
    parent[path[-1]] = type(parent[path[-1]])()
    check(raw, path)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.0, 0, -1, 1e308, True, "0.1x"])
def test_every_float_field_of_a_study_rejects_nonsense(value: Any) -> None:
    """Over every float leaf of the file (a sweep, not a sample): non-finite, non-numeric and
    boolean values never validate."""
    for path in PATHS:
        leaf = _get(RAW, path)
        if not isinstance(leaf, float) or isinstance(leaf, bool):
            continue
        raw = copy.deepcopy(RAW)
        _get(raw, path[:-1])[path[-1]] = value
        if isinstance(value, bool | str) or not math.isfinite(value):
            with pytest.raises(ParamsError):
                validate_params(raw)
        check(raw, path)


def test_every_enum_lists_its_allowed_values() -> None:
    """Over every string leaf of the file: an unknown value of a choice (optimizer, loss,
    activation, device, ...) is an error naming the key and listing the choices, the current
    value among them."""
    enums = 0
    for path in PATHS:
        leaf = _get(RAW, path)
        if not isinstance(leaf, str) or isinstance(path[-1], int):
            continue
        raw = copy.deepcopy(RAW)
        _get(raw, path[:-1])[path[-1]] = "no-such-choice"
        try:
            validate_params(raw)
        except ParamsError as exc:
            line = next(ln for ln in str(exc).split("\n  ")
                        if ln.startswith(format_key_path(path) + ":"))
            if "Input should be" in line:
                enums += 1
                assert repr(leaf) in line, line
    assert enums >= 5


# --------------------------------------------------------------------------------------------
# Text-level faults: what the YAML parser sees.
# --------------------------------------------------------------------------------------------

TEXT = DEFAULT.read_bytes()


@EXAMPLES
@given(data=st.data())
def test_corrupted_bytes_never_give_a_traceback(tmp_path_factory, data) -> None:
    """Truncated anywhere, random bytes (non-UTF-8 included) spliced in anywhere: valid or a
    ParamsError that names the file."""
    cut = data.draw(st.integers(0, len(TEXT)))
    junk = data.draw(st.one_of(st.binary(max_size=8), st.sampled_from(
        [b"\xff\xfe", b"\x00", b"\t", b"{", b"&a", b"*a", b"!!python/object:os.system ", b"%"])))
    keep_tail = data.draw(st.booleans())
    blob = TEXT[:cut] + junk + (TEXT[cut:] if keep_tail else b"")
    path = tmp_path_factory.mktemp("bytes") / "params.yaml"
    path.write_bytes(blob)
    try:
        load_params(path)
    except ParamsError as exc:
        assert str(path) in str(exc)


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "params.yaml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ParamsError) as info:
        load_params(path)
    return str(info.value)


def test_an_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    t0 = time.perf_counter()
    message = error_of(write(tmp_path, "\n".join(levels) + "\n"))
    assert "aliases" in message and time.perf_counter() - t0 < 1


def test_a_duplicate_key_is_an_error_not_last_one_wins(tmp_path: Path) -> None:
    """Two runs under one name would otherwise silently become one."""
    text = DEFAULT.read_text()
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("p0-s0:"))
    message = error_of(write(tmp_path, text.replace(line, f"{line}\n{line}", 1)))
    assert "duplicate key 'p0-s0'" in message
    assert "duplicate key 'a'" in error_of(write(tmp_path, "{a: 1, a: 2}\n"))


def test_absurd_nesting_is_an_error_not_a_recursion_error(tmp_path: Path) -> None:
    assert "nest" in error_of(write(tmp_path, "scale: " + "[" * 5000 + "]" * 5000 + "\n"))
    assert "nested 61 levels deep" in error_of(write(tmp_path, "scale: " + "[" * 60 + "]" * 60))
    block = "".join(f"{' ' * i}k{i}:\n" for i in range(400)) + " " * 400 + "k: 1\n"
    assert "nested" in error_of(write(tmp_path, block))


def test_an_integer_beyond_pythons_digit_limit_is_an_error(tmp_path: Path) -> None:
    text = DEFAULT.read_text().replace("seed: 0", "seed: " + "9" * 5000, 1)
    assert "digits" in error_of(write(tmp_path, text))


def test_python_tags_are_not_constructed(tmp_path: Path) -> None:
    text = "scale: !!python/object/apply:os.system ['touch pwned']\n"
    assert "constructor" in error_of(write(tmp_path, text))
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("text", ["", "# nothing\n", "null\n", "[1, 2]\n", "just text\n"])
def test_a_file_that_is_not_a_mapping(tmp_path: Path, text: str) -> None:
    assert "top level must be a mapping" in error_of(write(tmp_path, text))


@pytest.mark.parametrize("value", ["yes", "on", "true"])
def test_yaml_booleans_are_not_numbers(tmp_path: Path, value: str) -> None:
    text = DEFAULT.read_text().replace("max_steps: 3000", f"max_steps: {value}", 1)
    assert "studies.random_labels.train.max_steps: a number is expected" in error_of(
        write(tmp_path, text))


def test_an_emptied_study_block_is_an_error_not_a_skipped_study() -> None:
    raw = copy.deepcopy(RAW)
    raw["studies"]["random_labels"] = None
    with pytest.raises(ParamsError, match=r"studies\.random_labels: empty study block"):
        validate_params(raw)


# --------------------------------------------------------------------------------------------
# Through the real entry points: non-zero before any job, nothing changed.
# --------------------------------------------------------------------------------------------

BAD_FILES = {
    "nan_lr": lambda t: t.replace("lr: 0.05", "lr: .nan", 1),
    "path_like_run": lambda t: t.replace("p0-s0:", "../../x:", 1),
    "non_utf8": lambda t: t.replace("genlab report", "genlab \udcff report", 1),
    "alias": lambda t: t + "extra: &a [1]\nmore: *a\n",
}
NAMED = {"nan_lr": "studies.random_labels.train.lr", "path_like_run": "studies.random_labels.runs",
         "non_utf8": "not UTF-8", "alias": "aliases"}


def _bad_text(kind: str) -> bytes:
    text = BAD_FILES[kind](DEFAULT.read_text())
    assert text != DEFAULT.read_text()
    return text.encode("utf-8", "surrogateescape")


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_check_params_exits_2_naming_the_key(tmp_path: Path, kind: str) -> None:
    path = write(tmp_path, _bad_text(kind))
    proc = run(["genlab", "check-params", str(path), "--stamp", str(tmp_path / "stamp")],
               tmp_path, tool_env(tmp_path), check=False, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert NAMED[kind] in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "stamp").exists()


def _workspace(dest: Path) -> Path:
    """The files Snakemake reads at parse time, plus stand-ins for results a bad run must not
    touch."""
    dest.mkdir()
    for name in ("Snakefile", "dvc.yaml", "params.yaml"):
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(ROOT / "workflow", dest / "workflow")
    (dest / "data" / "random_labels").mkdir(parents=True)
    (dest / "data" / "random_labels" / "summary.json").write_text("{}\n")
    (dest / "reports").mkdir()
    (dest / "reports" / "index.html").write_text("<p>old</p>\n")
    (dest / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    return dest


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("kind", ["nan_lr", "path_like_run"])
def test_snakemake_fails_before_any_job_and_changes_nothing(tmp_path: Path, kind: str) -> None:
    root = _workspace(tmp_path / "ws")
    (root / "params.yaml").write_bytes(_bad_text(kind))
    before = _digest(root)
    proc = run(["snakemake", "--cores", "1"], root, tool_env(tmp_path), check=False, timeout=300)
    assert proc.returncode != 0
    assert NAMED[kind] in proc.stdout + proc.stderr
    after = _digest(root)
    # Snakemake keeps a log of each invocation under .snakemake/log; that is all it may add.
    assert {k: v for k, v in after.items() if not k.startswith(".snakemake/log/")} == before
