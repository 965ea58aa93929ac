"""What the placement tests share (``test_ray_placement``, ``test_ray_actor_placement``): their
cluster, a head node (1 CPU, ``head_node`` resource) and a worker node with 3 CPUs in region
``REGION``, no dashboard; resources no node of it could ever take; and a job holding a node's
CPUs (also for ``test_ray_integration``'s cluster)."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fray import GpuConfig, JobHandle, JobRequest

REGION = "test-east1"

#: ``(resources, says)``: ``ResourceConfig`` fields no node could ever take, and what the
#: pending reason says about the cluster.
UNPLACEABLE = pytest.mark.parametrize(
    ("resources", "says"),
    [
        ({"cpu": 64}, "the most any of its 2 node(s) has: CPU=3"),
        ({"ram": "4096g"}, "memory="),
        ({"device": GpuConfig(variant="H100")}, "no node offers GPU, accelerator_type:H100"),
        ({"regions": ["nowhere"]}, "no node has the label ray.io/availability-region=in(nowhere)"),
    ],
)


def placement_cluster() -> Iterator[object]:
    """Starts the cluster and connects this process; yields it, shuts it down after."""
    from fray_testing.ray_cluster import LocalRayCluster

    # Workers import the test modules: pytest put their folder on sys.path, which nodes get.
    with LocalRayCluster(head_cpus=1, head_resources={"head_node": 1}, system_config={}) as c:
        c.add_node(num_cpus=3, labels={"ray.io/availability-region": REGION})
        c.connect()
        yield c


def first_reason(read: Callable[[], str | None], within: float = 60) -> str:
    """A pending reason (``read()``: a job's or an actor's), once it has one; Fray reads
    it from the cluster at most once a second."""
    deadline = time.monotonic() + within
    while (reason := read()) is None and time.monotonic() < deadline:
        time.sleep(0.2)  # polls the reason
    assert reason is not None, f"no pending reason within {within}s"
    return reason


def hold_cpus(client: Any, request: JobRequest, cpus: float) -> JobHandle:
    """Submits ``request`` (a long job asking for ``cpus``) and returns its handle once it
    holds them: once no node shows ``cpus`` CPUs free."""
    handle = client.submit(request)
    deadline = time.monotonic() + 60
    while any(node.get("CPU", 0) >= cpus for node in _available_per_node()):
        assert time.monotonic() < deadline, f"{request.name} never took {cpus} CPUs"
        assert not handle.status().is_finished, handle.info()
        time.sleep(0.1)  # polls the cluster's state
    return handle


def _available_per_node() -> list[dict[str, float]]:
    from fray_ray._adapter import free_per_node

    free = free_per_node()
    assert free is not None, "this Ray does not say what its nodes have free"
    return list(free.values())
