"""The mislabel_mnist1d study's report figure: the mislabel-detection study's detection curves
(the same summary table), one panel per dataset and model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from matplotlib.figure import Figure

from genlab.studies.mislabel_detection import figures as detection


def by_task_and_model(run: Mapping[str, Any]) -> str:
    return f"{run.get('task', '?')}, {run['model']}"


def figures(data: Mapping[str, Any], table: pa.Table) -> list[tuple[str, Figure]]:
    return detection.figures(data, table, panel=by_task_and_model)
