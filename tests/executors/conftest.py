"""One real Ray cluster for the executor tests (skipped where Ray is not installed)."""

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    pytest.importorskip("ray")
    from ray_cluster import RayCluster

    cluster = RayCluster(cpus=2)
    try:
        yield cluster
    finally:
        cluster.stop()
