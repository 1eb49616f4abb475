#!/usr/bin/env bash
# Checks a GPU machine in one short run (at most 8 minutes: --budget-s 480), offline, with
# nothing to install beyond a CUDA build of torch, genlab (pip install -e .), Snakemake and DVC:
#   1. facts         torch, CUDA, GPU, driver (nvidia-smi), CPUs, date, git commit
#   2. ci_workflow   the `ci` preset's whole pipeline (snakemake) on a copy of the project (the
#                    files git lists: tracked, and untracked but not ignored) with
#                    runtime.device: cuda; wall time, jobs, and that every trained run's
#                    model.json says it trained on CUDA; claims reproduced
#   3. ensemble      benchmarks/train_ensemble.py --quick on the GPU (its --json figures)
#   4. sharpness     benchmarks/sharpness.py --quick on the GPU (its --json figures)
#   5. default_wall  the default preset's pipeline (params.yaml) on the GPU, with what is left
#                    of the budget (running out is recorded, not a failure)
# The numbers go to one JSON file, reports/gpu_check.json (--out PATH to change), rewritten
# after each step; a summary is printed at the end. Exit 0: all ok; 1: a step failed or timed
# out; 2: a prerequisite is missing (said within seconds: CUDA, genlab, snakemake, dvc, git).
# Arguments go to benchmarks/gpu_check.py (--help): e.g. --steps facts ensemble, --device cpu
# (only to test this script), --out "$OUT/gpu_check.json". PYTHON picks the interpreter
# (default: .venv/bin/python if present, else python3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
exec "$PYTHON" benchmarks/gpu_check.py "$@"
