"""The engines' side of genlab: dvc.yaml generated from the registries (``generate``), each
stage's exact code dependencies (``code_deps``), the Snakemake adapter that builds rules from
DVC's parse of dvc.yaml (``adapter``), the record-keeping between the two engines (``sync``) and
the hash check of DVC's cache (``cache_check``)."""
