"""What a fork-server child runs in tests/workflow/test_forkserver.py instead of genlab's CLI.

``main(argv)`` follows ``argv[0]``: ``report`` prints, as JSON, what the child sees of its process;
``exit N`` returns N; ``raise`` raises; ``sysexit TEXT`` calls ``sys.exit(TEXT)``; ``sleep PATH``
writes its pid to PATH and sleeps until killed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time


def main(argv: list[str]) -> int | None:
    command, *rest = argv
    if command == "report":
        import torch
        from threadpoolctl import threadpool_info

        from genlab import timing

        pools = threadpool_info()

        print(json.dumps({
            "pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "cwd": os.getcwd(),
            "argv": sys.argv, "env": os.environ.get("FORKSERVER_TEST"),
            "sigint_ignored": signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
            "random": random.random(), "torch_seed": torch.initial_seed(),
            "timing_process": timing._state["process"],
            "threads": {api: sorted({p["num_threads"] for p in pools if p["user_api"] == api})
                        for api in ("blas", "openmp")},
        }))
        print("to stderr", file=sys.stderr)
        return 0
    if command == "exit":
        return int(rest[0])
    if command == "raise":
        raise ValueError("raised in the child")
    if command == "sysexit":
        sys.exit(rest[0])
    if command == "sleep":
        with open(rest[0], "w") as out:
            out.write(str(os.getpid()))
        time.sleep(600)
        return 0
    raise SystemExit(f"unknown command {command}")
