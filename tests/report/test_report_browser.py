"""The report in a real browser (headless Chromium, Debian's ``chromium``; .ci/run installs it):
Chromium's own network log (``--log-net-log``) shows no request made for the page (every name
resolves to nothing besides, so none could leave), the page logs nothing to the console, and a
screenshot of it is a real picture."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from report_support import render_workspace

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no `chromium` on PATH (.ci/run installs "
                                "Debian's package): the browser test needs it")
# the flags docs/../notes/infra.md found to work in a container running as root
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0")


def chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
                          capture_output=True, text=True, timeout=120, check=True)


def page_requests(net_log: Path) -> set[str]:
    """URLs Chromium requested for a file:// page (its network isolation key is the file origin);
    the browser's own background requests (update checks, ...) are not the page's."""
    events = json.loads(net_log.read_text())["events"]
    return {p["url"] for e in events if "url" in (p := e.get("params", {}))
            and str(p.get("network_isolation_key", "")).startswith("file://")}


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_report_opens_offline_without_errors(report_workspace: Path, tmp_path: Path) -> None:
    page = render_workspace(report_workspace)
    html = page.read_text()
    # nothing the page would fetch by itself: links to papers in <a href> are fine
    fetching = re.findall(r"""<(?!a\b)[a-z]+\b[^>]*\b(?:src|href|srcset|data)\s*=\s*["']?"""
                          r"""(?:https?:)?//""", html, re.IGNORECASE)
    assert fetching == [] and not re.search(r"url\(\s*['\"]?(?:https?:)?//", html)
    assert "@import" not in html and "<svg" in html

    net_log = tmp_path / "net.json"
    dom = chromium(page, tmp_path / "profile-dom", "--dump-dom", f"--log-net-log={net_log}")
    assert 'id="provenance"' in dom.stdout and "<svg" in dom.stdout  # it rendered
    assert page_requests(net_log) == set()
    # the page has no script: any console line (an error, a blocked load) is a fault
    assert [line for line in dom.stderr.splitlines() if ":CONSOLE" in line] == []

    shot = tmp_path / "report.png"
    chromium(page, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1280,1600",
             "--hide-scrollbars")
    assert png_size(shot) == (1280, 1600)
    assert shot.stat().st_size > 20_000  # text, tables and a figure, not a blank page
