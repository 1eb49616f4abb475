"""``genlab check-params``: validate a params file; as the DVC gate (``--stamp``, ``--layout``),
also check that dvc.yaml was generated for the studies and analyses it switches on, before any
other stage runs."""

from __future__ import annotations

import argparse

from genlab.config import ParamsError, load_params
from genlab.io import write_text
from genlab.stages.stage_logging import configure_logging
from genlab.workflow.generate import layout_digest


def run(args: argparse.Namespace) -> int:
    params = load_params(args.file)
    if args.stage is not None:  # as a pipeline stage: the CLI's closing lines in its log
        configure_logging(params)
    studies = params.declared_studies()
    runs = sum(len(s.runs) for s in studies.values())
    off = f"; switched off: {', '.join(params.switched_off)}" if params.switched_off else ""
    print(f"{args.file}: valid (scale {params.scale}; {len(studies)} studies, {runs} runs{off})")
    if args.layout is not None and args.layout != layout_digest(params):
        # the gate of `dvc repro`: DVC runs the stages dvc.yaml lists, and a study or analysis
        # switched on or off since it was written must stop it here, with the fix
        raise ParamsError(f"dvc.yaml was generated for other studies, analyses or seeds than "
                          f"{args.file} declares: run `genlab dag --write`, then rerun")
    if args.stamp:
        # Constant content: a valid edit must not look like a change to the stages behind it.
        write_text(args.stamp, "params.yaml is valid\n")
    return 0
