"""Progress of long loops: plain log lines off a terminal, a tqdm bar on one, never in logs."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from genlab.progress import progress
from genlab.stages.stage_run import _Tee


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_it_logs_plain_lines(monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr("sys.stderr", io.StringIO())
    with caplog.at_level(logging.INFO, logger="genlab"):
        assert list(progress(range(4), "training", unit="step", every_s=0.0)) == [0, 1, 2, 3]
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("training: 1/4 step (25%)")
    assert lines[-1].startswith("training: 4/4 step (100%)")
    assert all("\r" not in line for line in lines)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="genlab"):
        assert list(progress(iter("ab"), "runs")) == ["a", "b"]  # quick: no line at all
    assert caplog.records == []


def test_on_a_terminal_it_draws_a_bar_that_the_stage_log_leaves_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    terminal, log = _Terminal(), io.StringIO()
    monkeypatch.setattr("sys.stderr", _Tee(terminal, log))
    print("a line for both", file=sys.stderr)
    assert list(progress(range(3), "training", unit="step")) == [0, 1, 2]
    assert "\r" in terminal.getvalue() and "training" in terminal.getvalue()
    assert log.getvalue() == "a line for both\n"
