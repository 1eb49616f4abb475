"""``python -m genlab``, as dvc.yaml's commands run it.

Ctrl-C reaches a stage's process while it may still be importing torch: one line then too.
"""

import sys

try:
    from genlab.cli import main

    code = main()
except KeyboardInterrupt:
    print("genlab: interrupted", file=sys.stderr)
    code = 130
raise SystemExit(code)
