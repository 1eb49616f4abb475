"""Which settings each stage reads: one statement for its sidecars and for dvc.yaml's params.

Cheap on purpose (no torch, no study code): the dvc.yaml generator, and so the gate, import it.
"""

from __future__ import annotations

from typing import Any


def stage_settings(config: Any, stage: str, run: str | None = None,
                   seed: int | None = None) -> dict[str, Any]:
    """Exactly the settings a stage reads: what its sidecar records (so an artifact's provenance
    is the same whether it was made in a fresh run or kept from an earlier one) and the params
    dvc.yaml tracks for it (:mod:`genlab.workflow.generate` derives its lists from these keys)."""
    from genlab.analyses.registry import ANALYSES

    if stage == "synthesize":  # the data block and one seed's draws (genlab.data.draws)
        from genlab.data.draws import data_draws

        return {"data": config.data.model_dump(mode="json"), "draws": data_draws(config, seed)}
    if stage in ANALYSES:  # the recipe and runs (a run's loss and step size), and its own block
        recipe = config.model_dump(mode="json", exclude={"description", "data", "model",
                                                         "analyses", "claims"})
        block = getattr(config.analyses, stage).model_dump(mode="json")
        return {**recipe, f"analyses.{stage}": block}
    # a study's claim rules (``claims``) are read by its aggregate alone: a threshold edit
    # re-judges the claims and retrains nothing
    if stage == "train":  # not what only the report reads (a study's REPORT_ONLY fields)
        report_only = set(getattr(config, "REPORT_ONLY", ()))
        settings = config.model_dump(mode="json", exclude={"runs", "description", "analyses",
                                                           "claims", *report_only})
        if run is None:  # a group stage: the whole sweep
            return {**settings, "runs": config.model_dump(mode="json")["runs"]}
        return {**settings, "run": config.runs[run].model_dump(mode="json")}
    return config.model_dump(mode="json")


def run_blocks(config: Any) -> tuple[str, ...]:
    """The params.yaml blocks a study's runs come from: ``runs``, and ``grid`` where the study
    can write its runs as a grid (measures_grid); a stage that reads the runs tracks both."""
    return tuple(name for name in ("grid", "runs") if name in type(config).model_fields)
