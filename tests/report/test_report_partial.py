"""The report renders while a workflow is half done: a declared study without a summary is a listed
gap. Its table of contents links every section; its provenance has each stage's wall time."""

from __future__ import annotations

import json
import re
from pathlib import Path

from report_support import PRESENT, render_workspace

from genlab.config import load_params
from genlab.report.collect import collect, stage_times


def test_a_study_without_summary_is_listed_as_missing(report_workspace: Path) -> None:
    params = load_params(report_workspace / "params.yaml")
    declared = list(params.declared_studies())
    assert len(declared) > 1  # the preset declares others besides the faked one
    dirs = {n: report_workspace / "data" / n for n in declared[1:] if n != PRESENT}  # one not given
    dirs[PRESENT] = report_workspace / "data" / PRESENT
    report = collect(params, dirs)
    assert [s.name for s in report.sections] == [PRESENT]
    assert {m.name for m in report.missing} == set(declared) - {PRESENT}
    reasons = {m.name: m.reason for m in report.missing}
    assert reasons[declared[1]].startswith("summary.json, summary.parquet not in")
    if declared[0] != PRESENT:
        assert reasons[declared[0]] == "no summary folder was given"


def test_partial_report_has_toc_missing_studies_and_wall_times(report_workspace: Path) -> None:
    html = render_workspace(report_workspace).read_text()
    declared = list(load_params(report_workspace / "params.yaml").declared_studies())
    toc = html[html.index('<nav class="toc"'):html.index("</nav>")]
    for anchor in ["claims", *declared, "provenance"]:
        assert f'href="#{anchor}"' in toc and f'id="{anchor}"' in html, anchor
    assert toc.count("not run yet") == len(declared) - 1
    assert html.count("<strong>Not run yet</strong>") == len(declared) - 1
    assert f'<td><a href="#{PRESENT}">{PRESENT}</a></td>' in html  # the claims table links it
    assert "<svg" in html and "Train accuracy of the fake run" in html
    # a study's own tables (its figures module's tables()) follow its figures
    assert "<caption>Ours beside the paper's</caption>" in html.replace("&#39;", "'")
    assert "<td>mlp</td><td>68</td><td>66.12</td>" in html
    assert re.search(r"<code>random_labels/train</code></td><td>3\.6</td>", html)
    assert re.search(r"<code>random_labels/synthesize</code></td><td>≈ 1\.2</td>", html)
    claims = json.loads((report_workspace / "reports/claims.json").read_text())["claims"]
    assert [c["study"] for c in claims] == [PRESENT]


def test_nothing_run_yet_still_renders(report_workspace: Path) -> None:
    import shutil

    shutil.rmtree(report_workspace / "data" / PRESENT)
    html = render_workspace(report_workspace).read_text()
    assert html.count("<strong>Not run yet</strong>") == len(
        load_params(report_workspace / "params.yaml").declared_studies())
    assert "Provenance" in html


def test_stage_times_prefer_the_closing_line(report_workspace: Path) -> None:
    times = {t.stage: t for t in stage_times(report_workspace / "logs")}
    assert times["random_labels/train"].seconds == 3.61 and times["random_labels/train"].exact
    assert times["random_labels/synthesize"].seconds == 1.25
    assert not times["random_labels/synthesize"].exact
    assert stage_times(report_workspace / "no-such-folder") == []
