"""The SLURM cluster the tests submit to: started once per session, always torn down."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from slurm_cluster import Cluster, missing_binaries


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Cluster]:
    missing = missing_binaries()
    if "slurmctld" in missing:
        pytest.skip("SLURM is not installed (Debian: apt-get install slurm-wlm munge slurmdbd "
                    "mariadb-server; .ci/run does it)")
    if missing:  # SLURM without the rest is a broken set-up, not a reason to skip
        pytest.fail(f"SLURM is installed but these are missing: {', '.join(missing)}")
    with Cluster(gpus=2) as cluster:  # fake GPUs (device files): enough to allocate them
        yield cluster
