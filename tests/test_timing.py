"""genlab.timing: a process's creation time, against the wall clock around its spawn."""

from __future__ import annotations

import subprocess
import sys
import time

from genlab import timing

TICK_S = 0.03  # /proc's clock ticks and uptime are 10 ms each; a little slack on top


def test_a_process_is_created_between_its_spawn_and_its_first_line() -> None:
    before = time.time()
    out = subprocess.run([sys.executable, "-c", "import time; t = time.time(); "
                          "from genlab import timing; print(t, timing.process_started())"],
                         capture_output=True, text=True, check=True).stdout
    first_line, created = map(float, out.split())
    assert before - TICK_S <= created <= first_line + TICK_S


def test_started_by_counts_from_the_client_and_falls_back_when_it_is_gone() -> None:
    own = timing.process_started()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)
        timing.started_by(child.pid)
        created = timing.process_started()
        assert own < created <= time.time() - 0.3 + TICK_S
    finally:
        child.kill()
        child.wait()
    try:
        assert abs(timing.process_started() - own) <= TICK_S  # the client is gone: our own start
    finally:
        timing.started_by(None)
