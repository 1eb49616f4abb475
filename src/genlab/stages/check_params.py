"""``genlab check-params``: validate a params file; as the DVC gate (``--stamp``), also check that
dvc.yaml is the one this params file generates, before any other stage runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from genlab.config import ParamsError, load_params
from genlab.io import write_text
from genlab.workflow.generate import render


def run(args: argparse.Namespace) -> int:
    params = load_params(args.file)
    studies = params.declared_studies()
    runs = sum(len(s.runs) for s in studies.values())
    off = f"; switched off: {', '.join(params.switched_off)}" if params.switched_off else ""
    print(f"{args.file}: valid (scale {params.scale}; {len(studies)} studies, {runs} runs{off})")
    if args.stamp:
        # The gate of `dvc repro`: DVC runs the stages dvc.yaml lists, so a study switched on or
        # off (or an analysis) since dvc.yaml was written must stop it here, with the fix.
        dvc_yaml = Path(args.file).parent / "dvc.yaml"
        if dvc_yaml.exists() and dvc_yaml.read_text(encoding="utf-8") != render(
                params, dvc_yaml.parent):
            raise ParamsError(f"{dvc_yaml} does not match {args.file}'s studies and analyses "
                              "(or the code's imports): run `genlab dag --write`, then rerun")
        # Constant content: a valid edit must not look like a change to the stages behind it.
        write_text(args.stamp, "params.yaml is valid\n")
    return 0
