"""A stage's log: the ``genlab`` logger on stderr, at params.yaml's level (Snakemake and DVC
send a stage's stderr to its log file). Apart from :mod:`genlab.stages.common` so that the gate,
``check_params``, can log without importing the data code that module reads datasets with."""

from __future__ import annotations

import logging
import sys

from genlab.config import Params

log = logging.getLogger("genlab")


def configure_logging(params: Params) -> None:
    logging.basicConfig(level=params.runtime.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # genlab's own level too: kronfluence sets the root logger's level to WARNING when it makes
    # its loggers, which silenced influence's and mislabel_detection's logs entirely
    log.setLevel(params.runtime.log_level)


__all__ = ["configure_logging", "log"]
