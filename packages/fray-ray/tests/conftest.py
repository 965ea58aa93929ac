"""A real local Ray per test module: a private cluster (own temp root, dashboard on for the
Jobs API, a ``head_node`` resource) connected to this process, and nothing left behind
(``LocalRayCluster`` kills and reports leftovers)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """Starts Ray for the module, connects this process; yields the GCS address."""
    from fray_testing.ray_cluster import LocalRayCluster

    tests_dir = os.path.dirname(__file__)
    pythonpath = os.environ.get("PYTHONPATH", "")
    if tests_dir not in pythonpath.split(os.pathsep):  # workers import test modules
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (tests_dir, pythonpath) if p)
    # Ray's default failure detection: nothing here kills nodes, and a loaded machine must
    # not have its only node declared dead.
    cluster = LocalRayCluster(8, {"head_node": 1}, dashboard=True, system_config={})
    with cluster:
        cluster.connect()
        yield cluster.address


@pytest.fixture
def client(cluster: Any) -> Iterator[Any]:
    """A ``RayClient`` in a namespace of its own on the module's ``cluster`` (a module that
    starts a cluster of its own shape names it ``cluster``), shut down after the test."""
    from fray_ray import RayClient

    client = RayClient(namespace=f"t-{secrets.token_hex(4)}", echo_logs=False)
    yield client
    client.shutdown()
