"""What the placement tests share (``test_ray_placement``, ``test_ray_actor_placement``): their
cluster, a head node (1 CPU, ``head_node`` resource) and a worker node with 3 CPUs in region
``REGION``, no dashboard, no autoscaler; and resources no node of it could ever take."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from fray import GpuConfig

REGION = "test-east1"

#: ``(resources, says)``: ``ResourceConfig`` fields no node could ever take, and what the
#: refusal says about the cluster.
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
