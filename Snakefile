# genlab's Snakemake entry point. Thin on purpose: the stages live in dvc.yaml (one definition for
# both engines) and workflow/rules/from_dvc.smk turns them into rules.
#   snakemake --cores all                  run everything that is out of date
#   snakemake --profile workflow/profiles/slurm   the same on a SLURM cluster

from genlab.config import load_params
from genlab.sync import record_in_dvc

# Validates params.yaml at parse time: an invalid file stops here, before any job runs.
PARAMS = load_params("params.yaml")


include: "workflow/rules/from_dvc.smk"


rule all:
    default_target: True
    input:
        [out for job in DVC_JOBS for out in job.outs],


# On success, record the results in DVC (hashes in dvc.lock, files in its cache), so `dvc status`
# is clean and `dvc push` shares them. Once, here: DVC must never run inside parallel jobs.
onsuccess:
    record_in_dvc(workflow.basedir)
