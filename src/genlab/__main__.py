"""``python -m genlab``, as dvc.yaml's commands run it.

Under Snakemake on this machine the command runs in a child of the workflow's fork server, which
has torch and genlab imported already (:mod:`genlab.forkclient`); otherwise, or when the server
declines, here. Ctrl-C reaches a stage's process while it may still be importing torch: one line
then too.
"""

import sys

from genlab.forkclient import run_in_server

code = run_in_server(sys.argv)
if code is None:
    try:
        from genlab.cli import main

        code = main()
    except KeyboardInterrupt:
        print("genlab: interrupted", file=sys.stderr)
        code = 130
raise SystemExit(code)
