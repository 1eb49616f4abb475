"""Literature claims and controls are counted and shown apart, in the report, in its metrics
and in `genlab claims` (make reproduce's last lines); a claim judged by an interval shows its
estimate, interval, n and rule."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from report_support import CLAIM, PRESENT, render_workspace

from genlab.cli import main
from genlab.config import load_params
from genlab.io import read_json, write_json
from genlab.report.tally import lines, tally

CONTROL = {**CLAIM, "key": "chance", "kind": "control", "claim": "Random labels sit at chance.",
           "status": "passed", "numbers": {"gap": 0.01}}
EFFECT = {**CLAIM, "key": "falls", "kind": "literature", "claim": "Test accuracy falls.",
          "status": "inconclusive", "estimate": 0.12, "interval": [-0.02, 0.26], "n": 3,
          "interval_method": "t", "rule": ">= 0.05", "numbers": {"by_seed": [0.1, 0.2, 0.06]}}


def with_claims(root: Path, claims: list[dict]) -> None:
    path = root / "data" / PRESENT / "summary.json"
    write_json(path, {**read_json(path), "claims": claims})


def test_tally_counts_kinds_apart_and_names_what_did_not_reproduce() -> None:
    old = {k: v for k, v in CLAIM.items() if k != "kind"}  # a summary from before kinds
    counts = tally([old, CONTROL, EFFECT])
    assert counts["literature"] == {"reproduced": 1, "not_reproduced": 0, "inconclusive": 1,
                                    "not_run": 0}
    assert counts["control"] == {"passed": 1, "failed": 0, "inconclusive": 0, "not_run": 0}
    assert lines([old, CONTROL, EFFECT]) == [
        "literature claims (2): 1 reproduced, 1 inconclusive", "controls (1): 1 passed",
        f"  inconclusive: {PRESENT}/falls"]
    assert lines([CONTROL], switched_off=["eos_gd", "repetition"])[-1] == (
        "studies switched off in params.yaml, their claims not run (2): eos_gd, repetition; "
        "`genlab preset cpu --out params.yaml` runs every study")
    with pytest.raises(ValueError, match="status 'reproduced' is not one of a control"):
        tally([{**CONTROL, "status": "reproduced"}])


def test_report_shows_controls_apart_with_intervals(report_workspace: Path, capsys) -> None:
    with_claims(report_workspace, [CLAIM, CONTROL, EFFECT])
    html = render_workspace(report_workspace).read_text()
    header = html[html.index('<p class="muted">scale preset'):html.index("</p>")]
    assert "literature claims: 1 reproduced, 0 not reproduced, 1 inconclusive, 0 not run" in header
    assert "controls: 1 passed, 0 failed, 0 inconclusive, 0 not run" in header
    literature = html[html.index('id="claims-literature"'):html.index('id="claims-control"')]
    controls = html[html.index('id="claims-control"'):]
    controls = controls[:controls.index("</table>")]
    assert "Test accuracy falls." in literature and "Random labels sit at chance." in controls
    assert "Random labels sit at chance." not in literature
    # claim | condition | estimate [interval] | n | rule | verdict, each in its own column
    assert re.search(r"<td><strong>0.12</strong> \[-0.02, 0.26\]<br><span class=\"muted\">t"
                     r"</span></td>\s*<td>3</td>\s*<td>&gt;= 0.05</td>\s*<td class=\"status\">"
                     r"inconclusive</td>", literature)
    metrics = json.loads((report_workspace / "reports/metrics.json").read_text())[PRESENT]
    assert metrics["chance"] == {"kind": "control", "status": "passed", "gap": 0.01}
    assert metrics["falls"]["interval_low"] == -0.02 and metrics["falls"]["n"] == 3
    capsys.readouterr()
    assert main(["claims", str(report_workspace / "reports/claims.json")]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [
        "literature claims (2): 1 reproduced, 1 inconclusive", "controls (1): 1 passed"]


def test_numbers_are_a_small_table_sorted_as_numbers_and_the_citation_shown_once(
        report_workspace: Path) -> None:
    grid = {**CLAIM, "key": "grid", "claim": "Error falls with N.",
            "numbers": {"test_err": {"1000": 0.1, "250": 0.2, "4000": 0.05}, "by": "seed"}}
    with_claims(report_workspace, [CLAIM, grid])
    html = render_workspace(report_workspace).read_text()
    table = html[html.index('id="claims-literature"'):html.index('id="claims-control"')]
    assert table.count(CLAIM["citation"]) == 1  # one study, one citation: on its first row
    cells = table[table.index("Error falls with N."):]
    assert cells.index("<th>250</th>") < cells.index("<th>1000</th>") < cells.index("<th>4000</th>")
    assert '<tr><th>test_err</th><td><table class="numbers">' in cells
    assert "<th>by</th><td>seed</td>" in cells


def test_results_page_is_written_from_claims_json_with_where_it_was_measured(
        report_workspace: Path, tmp_path: Path) -> None:
    """`genlab results` turns reports/claims.json into the README's results page: the commit,
    preset and date, the counts, and one row per claim with its interval, n, rule and verdict
    (controls in a table of their own), so no number in the docs is copied by hand."""
    with_claims(report_workspace, [CLAIM, CONTROL, {**EFFECT, "condition": "spread=1.0"}])
    render_workspace(report_workspace)
    claims = report_workspace / "reports/claims.json"
    document = read_json(claims)
    assert set(document["provenance"]) == {"git_commit", "genlab_version", "scale",
                                           "params_sha256", "switched_off"}
    assert document["provenance"]["switched_off"] == list(
        load_params(report_workspace / "params.yaml").switched_off)
    out = tmp_path / "results.md"
    assert main(["results", str(claims), "--out", str(out)]) == 0
    page = out.read_text()
    assert f"measured at commit `{document['provenance']['git_commit']}`" in page
    assert re.search(r"page written on \d{4}-\d{2}-\d{2}", page)
    assert "literature claims (2): 1 reproduced, 1 inconclusive" in page
    assert f"inconclusive: {PRESENT}/falls (spread=1.0)" in page  # a condition is named
    literature = page[page.index("## Literature claims"):page.index("## Controls")]
    assert ("| Test accuracy falls. | spread=1.0 | **0.12** [-0.02, 0.26] (t) | 3 | >= 0.05 "
            "| inconclusive |") in literature
    assert "Random labels sit at chance." in page[page.index("## Controls"):]
    assert "Random labels sit at chance." not in literature


def test_a_studys_diagnosis_is_shown_in_its_section_and_on_the_results_page(
        report_workspace: Path, tmp_path: Path) -> None:
    """A summary's "diagnosis" paragraphs (issue 38's "why these verdicts") go under the study's
    heading in the report and into claims.json, whence `genlab results` prints them; a study
    without one gets no such block."""
    path = report_workspace / "data" / PRESENT / "summary.json"
    lines_ = ["Cause: the setting; the model fits 37% of its training set.",
              "digits, logistic (10 seeds): fits 95.1% <of> the unflipped points."]
    write_json(path, {**read_json(path), "diagnosis": lines_})
    html = render_workspace(report_workspace).read_text()
    section = html[html.index(f'<h2 id="{PRESENT}">'):]
    section = section[:section.index("<h2 ", 1)]
    assert "<h3>Why these verdicts</h3>" in section
    assert "<p>Cause: the setting; the model fits 37% of its training set.</p>" in section
    assert "fits 95.1% &lt;of&gt; the unflipped" in section  # escaped, like every text
    assert html.count("Why these verdicts") == 1
    document = read_json(report_workspace / "reports/claims.json")
    assert document["diagnoses"] == {PRESENT: lines_}
    out = tmp_path / "results.md"
    assert main(["results", str(report_workspace / "reports/claims.json"), "--out",
                 str(out)]) == 0
    page = out.read_text()
    why = page[page.index("## Why these verdicts"):page.index("## Sources")]
    assert f"### {PRESENT}" in why and lines_[0] in why and lines_[1] in why
