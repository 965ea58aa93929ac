"""Placement of actor groups on a real local Ray: an actor waiting for a node says why, in
``member.pending_reason`` and in the error of a ``wait_ready`` that timed out, also when no
node could ever host it (Ray does not say whether a cluster can grow, so it waits).

The cluster: a head node (1 CPU, ``head_node`` resource) and a worker node with 3 CPUs in
region ``test-east1``; no dashboard. An actor that asks for 3 CPUs fits only
the worker and holds them while it lives, so a second one waits for the first.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fray import JobStatus, ResourceConfig
from fray.errors import JobTimeoutError
from fray_ray import RayClient
from fray_ray_placement_support import UNPLACEABLE, first_reason, placement_cluster

ray = pytest.importorskip("ray")

WORKER = ResourceConfig(cpu=3, ram="64m")  # the whole worker node


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    yield from placement_cluster()


class Holder:
    def ping(self) -> str:
        return "pong"


class Starting:
    """Says it was placed (``flag``), then stays in ``__init__`` until ``gate`` exists."""

    def __init__(self, flag: str, gate: str) -> None:
        Path(flag).touch()
        while not os.path.exists(gate):
            time.sleep(0.05)  # the actor's own wait for the test to let it finish

    def ping(self) -> str:
        return "pong"


@UNPLACEABLE
def test_a_group_no_node_could_ever_host_waits_saying_why(
    client: RayClient, resources: dict[str, Any], says: str
) -> None:
    group = client.create_actor_group(
        Holder, name="too-big", count=2, resources=ResourceConfig(**{"ram": "64m", **resources})
    )
    try:
        reason = first_reason(lambda: group.members[0].pending_reason)
        assert reason.startswith("waiting for a node: asks for ")
        assert says in reason
        with pytest.raises(JobTimeoutError, match="too-big-0, too-big-1: waiting for a node"):
            group.wait_ready(timeout=1)
    finally:
        group.shutdown()
    with pytest.raises(ValueError):  # nothing is left
        ray.get_actor("too-big-0", namespace=client.namespace)


def test_a_waiting_actor_says_why_then_starts_once_the_node_is_free(client: RayClient) -> None:
    blocker = client.create_actor_group(Holder, name="blocker", count=1, resources=WORKER)
    blocker.wait_ready(timeout=120)
    waiter = client.create_actor_group(Holder, name="waiter", count=1, resources=WORKER)
    try:
        (member,) = waiter.members
        reason = first_reason(lambda: member.pending_reason)
        assert reason.startswith("waiting for a node: asks for CPU=3, memory=0.0625 GiB; ")
        assert "the 1 node(s) that could take it are busy (free: CPU=0" in reason
        with pytest.raises(JobTimeoutError) as caught:
            waiter.wait_ready(timeout=1)
        assert str(caught.value).startswith(
            "only 0/1 actors of waiter ready after 1s; waiter-0: waiting for a node: asks for CPU=3"
        )
        assert "busy (free: CPU=0" in str(caught.value)
        assert blocker.members[0].pending_reason is None  # running
        blocker.shutdown()
        (handle,) = waiter.wait_ready(timeout=120)
        assert handle.ping() == "pong"
        assert member.pending_reason is None
    finally:
        blocker.shutdown()
        waiter.shutdown()


def test_an_actor_placed_but_still_starting_is_not_said_to_wait(
    client: RayClient, tmp_path: Path
) -> None:
    flag, gate = tmp_path / "placed", tmp_path / "gate"
    group = client.create_actor_group(
        Starting, str(flag), str(gate), name="starting", count=1, resources=WORKER
    )
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert time.monotonic() < deadline, "the actor was never placed"
            time.sleep(0.1)  # polls for the actor's __init__ to have begun
        (member,) = group.members
        # Its host said it was placed: it has no reason, though its __init__ still runs.
        deadline = time.monotonic() + 30
        while member.pending_reason is not None:
            assert time.monotonic() < deadline, member.pending_reason
            time.sleep(0.2)  # polls the member
        assert group.statuses() == [JobStatus.PENDING]
        gate.touch()
        (handle,) = group.wait_ready(timeout=120)
        assert handle.ping() == "pong"
    finally:
        gate.touch()
        group.shutdown()


def test_a_group_that_starts_at_once_never_asks_why(
    client: RayClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fray_ray._actors

    def asked(*args: Any) -> Any:
        raise AssertionError(f"the cluster was asked why actors wait: {args}")

    monkeypatch.setattr(fray_ray._actors, "cluster_says", asked)
    group = client.create_actor_group(
        Holder, name="quick", count=2, resources=ResourceConfig(cpu=0.5, ram="64m")
    )
    try:
        assert [h.ping() for h in group.wait_ready(timeout=120)] == ["pong", "pong"]
        assert all(m.pending_reason is None for m in group.members)
    finally:
        group.shutdown()
