"""``genlab report``: reports/index.html and reports/claims.json from every study's summary."""

from __future__ import annotations

import argparse

from genlab.io import write_json, write_text
from genlab.paths import LOGS
from genlab.report.collect import collect
from genlab.report.metrics import claim_metrics
from genlab.report.render import render_html
from genlab.stages.common import setup


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
        "claims": [c for c in report.claims],
        # each study's "why these verdicts" paragraphs, for the results page too
        "diagnoses": {s.name: list(s.diagnosis) for s in report.sections if s.diagnosis}})
    write_json(args.out / "metrics.json", claim_metrics(report.claims))
    print(f"report written to {args.out / 'index.html'}")
    return 0
