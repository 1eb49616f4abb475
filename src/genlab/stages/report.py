"""``genlab report``: reports/index.html and reports/claims.json from every study's summary."""

from __future__ import annotations

import argparse
from typing import Any

from genlab.io import write_json, write_text
from genlab.paths import LOGS
from genlab.report.collect import collect
from genlab.report.render import render_html
from genlab.report.tally import kind_of
from genlab.stages.common import setup


def claim_metrics(claims: list[dict[str, Any]]) -> dict[str, Any]:
    """Each claim's kind, status, estimate with its interval and n (when judged by one) and
    deciding numbers, by study and key: a flat DVC metric."""
    metrics: dict[str, Any] = {}
    for c in claims:
        effect = {k: c[k] for k in ("estimate", "n") if k in c}
        if c.get("interval"):
            effect |= {"interval_low": c["interval"][0], "interval_high": c["interval"][1]}
        metrics.setdefault(c["study"], {})[c["key"]] = {
            "kind": kind_of(c), "status": c["status"], **effect, **c["numbers"]}
    return metrics


def run(args: argparse.Namespace) -> int:
    params = setup(args)
    # the stage logs sit beside the report folder (logs/ beside reports/, genlab.paths); they are
    # read for wall times only, so they are not a DVC dependency
    logs = args.logs if args.logs is not None else args.out.parent / LOGS
    report = collect(params, {d.name: d for d in args.studies}, logs=logs)
    write_text(args.out / "index.html", render_html(report))
    write_json(args.out / "claims.json", {
        # what `genlab results` states the claims were measured at
        "provenance": {"git_commit": report.provenance["git_commit"],
                       "genlab_version": report.provenance["genlab_version"],
                       "scale": report.scale, "params_sha256": report.params_sha256,
                       "switched_off": list(params.switched_off)},
        "claims": [c for c in report.claims]})
    write_json(args.out / "metrics.json", claim_metrics(report.claims))
    print(f"report written to {args.out / 'index.html'}")
    return 0
