"""The in-process Iris cluster every fray-iris test runs against.

One real Iris cluster (``fray_testing.iris_cluster.LocalIrisCluster``: controller,
autoscaler, fake GCP "VMs" as worker threads, tasks as child processes) is started per test
session from ``iris_cluster.yaml``: a CPU group, fake TPU groups (single-VM v5litepod-4, 4-VM
v5litepod-16, 2-VM v4-16) and a fake H100 group. It runs on either marin-iris line
(0.2.20 on Python 3.11, 0.2.227 on 3.12+); its freshness check is widened and its controller
reconciles every 0.1 s, in this cluster only (see that module); teardown checks that no
process started by the tests is left.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fray_testing.iris_cluster import LocalIrisCluster

CLUSTER_CONFIG = Path(__file__).with_name("iris_cluster.yaml")


@pytest.fixture(scope="session")
def iris_cluster() -> Iterator[LocalIrisCluster]:
    """Starts the cluster once per session; stops it and checks nothing is left behind."""
    with LocalIrisCluster(CLUSTER_CONFIG) as cluster:
        yield cluster


@pytest.fixture
def iris_client(iris_cluster: LocalIrisCluster) -> Iterator[object]:
    """A fresh fray IrisClient on the session cluster, shut down after the test."""
    from fray_iris import IrisClient

    client = IrisClient(iris_cluster.url, results_url=iris_cluster.results_url)
    yield client
    client.shutdown()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Iris's process runtime drops the pipes of finished tasks without closing them; the
    resulting ResourceWarnings surface (via garbage collection) in whichever test runs next.
    Only this package's tests, which run that cluster, ignore them."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(
                pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
            )
            item.add_marker(pytest.mark.filterwarnings("ignore::ResourceWarning"))


def pytest_configure(config: pytest.Config) -> None:
    del config
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
