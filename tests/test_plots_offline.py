"""`dvc plots show` / `dvc plots diff` pages work offline: .dvc/config's ``plots.html_template`` is
workflow/plots/offline.html, which inlines the vendored vega, vega-lite and vega-embed
(workflow/plots/README.md) where DVC's default page loads them from a CDN. A throwaway DVC repo with
that setting and two plots gets pages from plain `dvc plots show|diff` that fetch nothing and draw
their charts in headless Chromium (the report browser test's helpers: every host name resolves to
nothing, and Chromium's network log shows what the page requested)."""

from __future__ import annotations

import hashlib
import json
import re
import runpy
import shutil
import sys
from pathlib import Path

import pytest
from configobj import ConfigObj

from tests_support import ROOT, run, tool_env

# the report browser test's Chromium helpers (pytest puts tests/report on sys.path itself, as it
# does for every test folder without __init__.py, when it collects that folder)
sys.path.insert(0, str(ROOT / "tests" / "report"))
from test_report_browser import CHROMIUM, chromium, page_requests  # noqa: E402

PLOTS = ROOT / "workflow" / "plots"
TEMPLATE = PLOTS / "offline.html"
BUILD = runpy.run_path(str(PLOTS / "build_template.py"), run_name="build_template")
BSD3 = ("Redistribution and use in source and binary forms",
        "3. Neither the name of the copyright holder")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no `chromium` on PATH (.ci/run "
                                    "installs Debian's package): the browser test needs it")


def configured_template(root: Path) -> str:
    """The ``plots.html_template`` value of root's .dvc/config, as written there."""
    return ConfigObj(str(root / ".dvc" / "config"))["plots"]["html_template"]


def test_dvc_config_names_the_committed_offline_template() -> None:
    # DVC (commands/plots.py) joins a relative html_template to the .dvc folder
    assert (ROOT / ".dvc" / configured_template(ROOT)).resolve() == TEMPLATE
    page = TEMPLATE.read_text(encoding="utf-8")
    assert page.count("{plot_divs}") == 1  # dvc_render refuses a template without it
    assert "{scripts}" not in page  # where dvc_render would put its CDN <script src> tags
    assert re.findall(r"<script\b[^>]*\bsrc\s*=", page, re.IGNORECASE) == []
    assert TEMPLATE.stat().st_size < 2_000_000
    assert BUILD["main"](["--check"]) == 0, "offline.html is not what build_template.py writes"


def test_vendored_bundles_are_the_versions_the_readme_states() -> None:
    readme = (PLOTS / "README.md").read_text(encoding="utf-8")
    rows = {m["package"]: m for m in re.finditer(
        r"^\| `(?P<package>[a-z-]+)` \| (?P<version>\d+\.\d+\.\d+) \| `(?P<file>[^`]+)` \|"
        r".*\| `(?P<sha256>[0-9a-f]{64})` \|$", readme, re.MULTILINE)}
    assert list(rows) == list(BUILD["BUNDLES"])  # the packages, in load order
    for package, version in BUILD["BUNDLES"].items():
        row, bundle = rows[package], BUILD["bundle"](package)
        assert (row["version"], PLOTS / row["file"]) == (version, bundle)
        assert hashlib.sha256(bundle.read_bytes()).hexdigest() == row["sha256"], package
        assert f'"{version}"' in bundle.read_text(encoding="utf-8")  # e.g. vega's version="5.33.1"
        assert f"`{package}-{version}.tgz`: `sha512-" in readme  # the tarball's integrity
        notice = BUILD["licence"](package).read_text(encoding="utf-8")
        assert all(clause in notice for clause in BSD3), package
        assert f"/*! {package} {version} (npm), " in TEMPLATE.read_text(encoding="utf-8")


def chart_colours(page: str) -> tuple[int, set[tuple[int, int, int]]]:
    """How many charts the page embeds, and the colours of their revisions (from the specs
    dvc_render wrote into it)."""
    specs = [json.loads(s) for s in re.findall(r"var spec = (\{.*\});\n", page)]
    colours = set()
    for spec in specs:
        scale = spec["encoding"]["color"]["scale"]
        used = scale["range"][:len(scale["domain"])]
        colours |= {tuple(bytes.fromhex(c.lstrip("#"))) for c in used}
    return len(specs), colours


def pixels_of(shot: Path, colour: tuple[int, int, int]) -> int:
    from PIL import Image

    with Image.open(shot) as image:
        return sum(n for n, px in image.convert("RGB").getcolors(1 << 20)
                   if max(abs(a - b) for a, b in zip(px, colour, strict=True)) <= 8)


def assert_renders_offline(page: Path, tmp_path: Path, revisions: int) -> None:
    html = page.read_text(encoding="utf-8")
    assert "cdn.jsdelivr.net" not in html
    assert re.findall(r"<script\b[^>]*\bsrc\s*=", html, re.IGNORECASE) == []  # all inline
    charts, colours = chart_colours(html)
    assert (charts, len(colours)) == (2, revisions)

    net_log = tmp_path / f"{page.parent.name}-net.json"
    dom = chromium(page, tmp_path / f"{page.parent.name}-dom", "--dump-dom",
                   f"--log-net-log={net_log}")
    # vega-embed wrapped each div and vega drew each chart (its default renderer: a canvas)
    assert len(re.findall(r'<div id="[^"]+" class="vega-embed[^"]*"', dom.stdout)) == charts
    assert len(re.findall(r'<canvas [^>]*class="marks"', dom.stdout)) == charts
    assert page_requests(net_log) == set()
    # vega logs warnings for DVC's hover layer (empty until the mouse moves): no other line, no
    # error, no blocked load
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert [line for line in console if '"WARN ' not in line] == [], console

    shot = tmp_path / f"{page.parent.name}.png"
    chromium(page, tmp_path / f"{page.parent.name}-shot", f"--screenshot={shot}",
             "--window-size=800,1000", "--hide-scrollbars")
    for colour in colours:  # each revision's line is drawn, not only its legend entries
        assert pixels_of(shot, colour) > 200, (colour, pixels_of(shot, colour))


@needs_chromium
def test_plots_show_and_diff_pages_render_offline(tmp_path: Path) -> None:
    env = tool_env(home=tmp_path / "home")
    env["DVC_NO_ANALYTICS"] = "1"
    repo = tmp_path / "repo"
    setting = configured_template(ROOT)
    template = (repo / ".dvc" / setting).resolve()  # where this repo's setting finds it
    template.parent.mkdir(parents=True)
    shutil.copyfile(TEMPLATE, template)
    run(["git", "init", "-q", "-b", "main"], repo, env)
    run(["dvc", "init", "-q"], repo, env)
    run(["dvc", "config", "plots.html_template", setting], repo, env)
    # DVC's default (linear) template, and the scatter one the project's plots use
    (repo / "loss.csv").write_text("step,loss\n0,1.0\n1,0.5\n2,0.25\n3,0.125\n")
    (repo / "acc.csv").write_text("step,acc\n0,0.25\n1,0.5\n2,0.75\n3,1.0\n")
    (repo / "dvc.yaml").write_text(
        "plots:\n  - loss.csv:\n      x: step\n      y: loss\n"
        "  - acc.csv:\n      x: step\n      y: acc\n      template: scatter\n"
        "      title: Accuracy per step (λ = 0.1)\n", encoding="utf-8")
    run(["git", "add", "-A"], repo, env)
    run(["git", "commit", "-q", "-m", "a plot"], repo, env)
    (repo / "loss.csv").write_text("step,loss\n0,2.0\n1,1.5\n2,1.25\n3,1.125\n")
    (repo / "acc.csv").write_text("step,acc\n0,0.5\n1,0.75\n2,0.875\n3,1.0\n")

    run(["dvc", "plots", "show", "--out", "show"], repo, env)
    assert_renders_offline(repo / "show" / "index.html", tmp_path, revisions=1)
    run(["dvc", "plots", "diff", "--out", "diff"], repo, env)  # workspace against HEAD
    assert_renders_offline(repo / "diff" / "index.html", tmp_path, revisions=2)
