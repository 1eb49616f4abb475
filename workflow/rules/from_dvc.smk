# One Snakemake rule per DVC stage of dvc.yaml (see genlab.workflow.adapter).
# Directives in the house order: input, output, params, log, threads, resources, conda, shell.

from genlab.workflow.adapter import dvc_jobs, is_folder_output, snakemake_inputs, stage_resources
from genlab.workflow.sync import trigger_path

DVC_JOBS = dvc_jobs(workflow.basedir)

for _job in DVC_JOBS:

    rule:
        name:
            _job.rule_name
        input:
            snakemake_inputs(_job, DVC_JOBS, workflow.basedir),
            # newer than the outputs when the stage is stale (genlab.workflow.sync.reconcile)
            stale_marker=trigger_path(_job),
        output:
            [directory(o) if is_folder_output(o) else o for o in _job.outs],
        params:
            # the command travels as a param: a loop variable read inside `shell:` would be
            # evaluated late, when every rule would see the last stage
            dvc_cmd=_job.cmd,
        log:
            _job.log,
        threads: _job.meta.get("threads", 1)
        resources:
            **stage_resources(_job, ON_CUDA),
        conda:
            "../envs/genlab.yaml"
        shell:
            "{params.dvc_cmd} > {log} 2>&1"
