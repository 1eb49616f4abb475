"""A toy analysis: the parameters' L2 norm of each trained run, and the norm of each tensor."""

from __future__ import annotations

import pyarrow as pa


def record(model, objective, settings, untrained):
    norms = {name: float(p.detach().abs().pow(settings.power).sum() ** (1 / settings.power))
             for name, p in model.named_parameters()}
    total = sum(v ** settings.power for v in norms.values()) ** (1 / settings.power)
    table = pa.table({"tensor": list(norms), "norm": list(norms.values())})
    return {"status": "done", "norm": total, "n_examples": len(objective.X)}, {"norms": table}


def view(records, folder, settings):
    from genlab.report.analyses import AnalysisView

    rows = [{"run": run, "norm": r.get("norm")} for run, r in records.items()]
    return AnalysisView(title="Parameter norm", intro="", figure=None, caption="",
                        columns=("norm",), rows=rows)
