"""How the claims came out: literature claims and controls counted apart.

The report's header and ``genlab claims`` (the last lines of ``make reproduce``) print these
counts, so a control that holds by construction is never counted as a reproduction.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

STATUSES = {
    "literature": ("reproduced", "not_reproduced", "inconclusive", "not_run"),
    "control": ("passed", "failed", "inconclusive", "not_run"),
}
LABEL = {"reproduced": "reproduced", "not_reproduced": "not reproduced",
         "inconclusive": "inconclusive", "not_run": "not run", "passed": "passed",
         "failed": "failed"}
KIND_TITLE = {"literature": "literature claims", "control": "controls"}
EVERY_STUDY = "genlab preset cpu --out params.yaml"
"""The command that switches every study on (the cpu preset), named wherever a study is off."""


def number_text(value: object) -> str:
    """A number as the report and the results page print it: floats to 4 significant digits,
    None as a dash, mappings and lists item by item."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {number_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(number_text(v) for v in value) + "]"
    return "—" if value is None else str(value)


def kind_of(claim: Mapping[str, Any]) -> str:
    """A claim's kind; summaries written before kinds existed hold literature claims only."""
    return claim.get("kind", "literature")


def tally(claims: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """kind -> status -> count, every status of each kind listed (zeros too)."""
    counts = {kind: dict.fromkeys(statuses, 0) for kind, statuses in STATUSES.items()}
    for claim in claims:
        kind, status = kind_of(claim), claim["status"]
        if status not in counts.get(kind, {}):
            raise ValueError(f"claim {claim.get('study')}/{claim.get('key')}: status {status!r} "
                             f"is not one of a {kind} claim's {STATUSES.get(kind)}")
        counts[kind][status] += 1
    return counts


def lines(claims: list[Mapping[str, Any]], switched_off: Iterable[str] = ()) -> list[str]:
    """One line per kind with its counts, then the literature claims that did not reproduce,
    then the studies switched off in params.yaml (their claims were not run at all)."""
    out = []
    for kind, counts in tally(claims).items():
        total = sum(counts.values())
        parts = ", ".join(f"{n} {LABEL[status]}" for status, n in counts.items() if n)
        out.append(f"{KIND_TITLE[kind]} ({total}): {parts or 'none'}")
    for status in ("not_reproduced", "inconclusive"):
        named = [f"{c['study']}/{c['key']}" + (f" ({c['condition']})" if c.get("condition")
                                                else "")
                 for c in claims if kind_of(c) == "literature" and c["status"] == status]
        if named:
            out.append(f"  {LABEL[status]}: {', '.join(named)}")
    if off := list(switched_off):
        out.append(f"studies switched off in params.yaml, their claims not run ({len(off)}): "
                   f"{', '.join(off)}; `{EVERY_STUDY}` runs every study")
    return out


def document_lines(document: Mapping[str, Any]) -> list[str]:
    """:func:`lines` for a claims.json document (``{"provenance": ..., "claims": [...]}``)."""
    return lines(document["claims"], document.get("provenance", {}).get("switched_off", ()))


def run(args: argparse.Namespace) -> int:
    """``genlab claims``: print the counts of reports/claims.json."""
    from genlab.io import read_json

    for line in document_lines(read_json(Path(args.claims))):
        print(line)
    return 0
