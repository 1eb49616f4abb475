"""The DVC metrics folder: one flat file per claim with the same keys, the study's counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genlab.report.metrics import STUDY_FILE, claim_file, metric_files, write_metric_folder

JUDGED = {"study": "s", "key": "falls", "kind": "literature", "status": "inconclusive",
          "estimate": 0.12, "interval": [-0.02, 0.26], "n": 10, "rule": "bca",
          "numbers": {"gap": [0.1, 0.2]}, "condition": None}
CONTROL = {"study": "s", "key": "chance", "kind": "control", "status": "passed",
           "numbers": {"gap": 0.01}, "condition": None}


def test_each_claim_is_a_file_with_the_same_few_keys() -> None:
    conditioned = {**JUDGED, "condition": "spread=1 / tanh", "status": "reproduced"}
    files = metric_files([JUDGED, CONTROL, conditioned])
    assert files["falls.json"] == {"kind": "literature", "status": "inconclusive",
                                   "estimate": 0.12, "interval_low": -0.02,
                                   "interval_high": 0.26, "n": 10}
    assert files["chance.json"] == {"kind": "control", "status": "passed"}
    assert claim_file(conditioned) == "falls@spread=1___tanh.json" in files
    counts = files[STUDY_FILE]
    assert counts["literature"]["inconclusive"] == 1 and counts["literature"]["reproduced"] == 1
    assert counts["control"]["passed"] == 1


def test_two_claims_in_one_file_is_an_error() -> None:
    with pytest.raises(ValueError, match="share metrics file falls.json"):
        metric_files([JUDGED, {**JUDGED, "status": "reproduced"}])


def test_the_folder_is_replaced_whole(tmp_path: Path) -> None:
    folder = tmp_path / "metrics"
    write_metric_folder(folder, metric_files([JUDGED, CONTROL]))
    assert sorted(p.name for p in folder.iterdir()) == [STUDY_FILE, "chance.json", "falls.json"]
    write_metric_folder(folder, metric_files([JUDGED]))  # a claim dropped: its file goes
    assert sorted(p.name for p in folder.iterdir()) == [STUDY_FILE, "falls.json"]
    assert json.loads((folder / "falls.json").read_text())["n"] == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics"]  # nothing left beside it
    assert oct(folder.stat().st_mode & 0o777) != oct(0o700)
