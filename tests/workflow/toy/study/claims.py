"""The toy study's one claim: better than chance."""

from __future__ import annotations

from genlab.studies.base import ClaimResult, Summary, stack_histories


def summarize(config, metrics, histories) -> Summary:
    worst = min(m["test_acc"] for m in metrics.values())
    chance = 1 / config.data.n_classes
    claim = ClaimResult(study="toy", key="above_chance", claim="better than chance",
                        status="reproduced" if worst > chance else "not_reproduced",
                        numbers={"worst_test_acc": worst, "chance": chance}, citation="none",
                        criterion="every run's test accuracy above 1/C")
    return Summary(data={"runs": {r: dict(m) for r, m in metrics.items()}}, claims=(claim,),
                   table=stack_histories(histories, metrics))
