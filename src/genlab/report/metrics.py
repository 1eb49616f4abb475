"""The DVC metrics: small, flat files that ``dvc metrics show`` and ``dvc exp show`` can read.

Each study's aggregate stage writes ``data/<study>/metrics/``, dvc.yaml's one metrics entry per
study: ``_study.json`` with the study's claim counts (literature claims and controls apart) and
one file per claim (``<key>.json``, or ``<key>@<condition>.json`` for a study that checks a claim
under several conditions) with the same few keys for every claim: ``kind``, ``status`` and, for
a claim judged by an interval, ``estimate``, ``interval_low``, ``interval_high`` and ``n``. DVC
prints a row per file and a column per key, so the whole pipeline's table has some fifteen
columns however many claims there are (a file per study keyed by claim had one column per claim
and field: hundreds). Everything else a claim records (its deciding numbers, citation, rule)
stays in the study's ``summary.json`` and ``reports/claims.json``, plain outputs.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from genlab.report.tally import kind_of, tally

STUDY_FILE = "_study.json"
EFFECT_KEYS = ("estimate", "n")


def claim_metric(claim: Mapping[str, Any]) -> dict[str, Any]:
    """A claim's kind and status, with its estimate, 95% interval and n when it has them."""
    metric = {"kind": kind_of(claim), "status": claim["status"]}
    metric |= {k: claim[k] for k in EFFECT_KEYS if claim.get(k) is not None}
    if claim.get("interval"):
        metric |= {"interval_low": claim["interval"][0], "interval_high": claim["interval"][1]}
    return metric


def claim_file(claim: Mapping[str, Any]) -> str:
    """The claim's file name in its study's metrics folder (a condition's odd characters as
    ``_``)."""
    name = claim["key"] + (f"@{claim['condition']}" if claim.get("condition") else "")
    return re.sub(r"[^0-9A-Za-z_.=@+-]", "_", name) + ".json"


def metric_files(claims: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """A study's metrics folder: file name -> content."""
    claims = list(claims)
    files = {STUDY_FILE: tally(claims)}
    for claim in claims:
        name = claim_file(claim)
        if name in files:
            raise ValueError(f"two claims of study {claim.get('study')!r} share metrics file "
                             f"{name}: their keys and conditions must differ")
        files[name] = claim_metric(claim)
    return files


def write_metric_folder(folder: str | Path, files: Mapping[str, Mapping[str, Any]]) -> None:
    """Replace ``folder`` with exactly ``files``, all at once: built beside it, then renamed into
    place, so a killed stage leaves the old folder or the new one, never a mix of both."""
    from genlab.io import current_umask, write_json

    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        for name, content in files.items():
            write_json(staging / name, content)
        os.chmod(staging, 0o777 & ~current_umask())  # mkdtemp makes 0700
        if folder.exists():
            old = folder.with_name(f".{folder.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(folder, old)
            os.replace(staging, folder)
            shutil.rmtree(old)
        else:
            os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def claim_metrics(claims: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """reports/metrics.json (a plain output): each claim's :func:`claim_metric` and deciding
    numbers, by study and key."""
    metrics: dict[str, Any] = {}
    for c in claims:
        metrics.setdefault(c["study"], {})[c["key"]] = {**claim_metric(c), **c["numbers"]}
    return metrics
