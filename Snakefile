# genlab's Snakemake entry point. Thin on purpose: the stages live in dvc.yaml (one definition for
# both engines) and workflow/rules/from_dvc.smk turns them into rules.
#   snakemake --cores all                  run everything that is out of date
#   snakemake --profile workflow/profiles/slurm   the same on a SLURM cluster

import sys
from pathlib import Path

from genlab.config import load_params
from genlab.workflow.adapter import local_gpu_slots, stages_use_cuda
from genlab.workflow.sync import reconcile, record_in_dvc
from genlab.workflow.generate import write as write_dvc_yaml
from genlab.workflow import forkserver

# Validates params.yaml at parse time: an invalid file stops here, before any job runs.
PARAMS = load_params("params.yaml")

# dvc.yaml is generated from the registries and params.yaml's studies and analyses; a study
# switched on or off, or an analysis, changes its stages. Rewritten here when stale (by the main
# process only: the jobs of a cluster run parse this file again), so both engines read the same.
if workflow.is_main_process and write_dvc_yaml(workflow.basedir, PARAMS):
    print("genlab: dvc.yaml regenerated for params.yaml's studies and analyses", file=sys.stderr)

# GPUs. The torch stages ask for resource gpu=1 when they will run on CUDA (ON_CUDA; see
# genlab.workflow.adapter.stage_resources). Run locally (no --jobs/executor), at most one of them per visible
# device runs at a time, each on its own device (genlab.device.resolve_device); `--resources
# gpu=N` on the command line overrides the cap. On a cluster the scheduler hands out the GPUs,
# and the Snakemake that runs each job there (not the main process) must not count them again:
# a CPU job on a CPU node would find no GPU to count.
ON_CUDA = stages_use_cuda(PARAMS.runtime.device)
if (ON_CUDA and workflow.is_main_process and workflow.resource_settings.nodes is None
        and "gpu" not in workflow.global_resources):
    workflow.register_resource("gpu", local_gpu_slots())


include: "workflow/rules/from_dvc.smk"

# Freshness is each stage's fingerprint (genlab.workflow.fingerprint): the stamp its command
# wrote beside its outputs against the inputs now, whichever engine ran it. reconcile() sets the
# mtimes Snakemake judges by to say the same (each rule's .genlab/stale/<rule> input).
# Snakemake's own records (params, input lists), which a run by DVC never updates, must not
# count: the profiles set mtime as the only rerun trigger (profiles/default, Snakemake's
# workflow profile, is read on every run; workflow/profiles/slurm says it again).
if workflow.is_main_process:
    reconcile(workflow.basedir, DVC_JOBS)


rule all:
    default_target: True
    input:
        [out for job in DVC_JOBS for out in job.outs],


# The jobs of a local run start in a fork of one process that has torch and genlab imported
# (genlab.workflow.forkserver): ~0.15 s of start-up instead of ~1.7 s, outputs byte-identical.
# Jobs on a cluster, and all jobs with GENLAB_FORKSERVER=0 set, start their own interpreter.
onstart:
    if workflow.local_exec and not workflow.touch:
        forkserver.start(Path(workflow.basedir) / ".genlab/forkserver.log")


# After the run, record in DVC (hashes in dvc.lock, files in its cache) the stages that are
# current, so `dvc status` agrees and `dvc push` shares them; after a failed run too, for the
# stages that finished. Once, here: DVC must never run inside parallel jobs.
onsuccess:
    forkserver.stop_all()
    record_in_dvc(workflow.basedir)

onerror:
    forkserver.stop_all()
    record_in_dvc(workflow.basedir)
