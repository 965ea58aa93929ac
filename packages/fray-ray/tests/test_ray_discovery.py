"""Actor-group discovery on Ray costs no lookup per member: a group keeps the handles it
created, so ``wait_ready`` and ``discover_new`` ask Ray's GCS for no actor by name, however
many members there are (Ray's own ``.remote()`` checks each new actor's name once, at
creation; issue 44: resolving 2,000 members one by one took half an hour)."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from fray import ResourceConfig
from fray_ray import RayClient

ray = pytest.importorskip("ray")

MEMBERS = 10


class Member:
    """A member with nothing to do: only its discovery is measured."""

    def ping(self) -> int:
        return 1


@pytest.fixture
def client(ray_cluster: str) -> Iterator[RayClient]:
    client = RayClient(namespace=f"disc-{secrets.token_hex(4)}", echo_logs=False)
    yield client
    client.shutdown()


def test_a_discovery_poll_looks_up_no_member(
    client: RayClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: dict[str, int] = {"get_actor": 0, "wait": 0}

    def counted(name: str) -> Any:
        real = getattr(ray, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(ray, "get_actor", counted("get_actor"))
    monkeypatch.setattr(ray, "wait", counted("wait"))
    group = client.create_actor_group(
        Member, name="members", count=MEMBERS, resources=ResourceConfig(cpu=0, ram="0")
    )
    calls["get_actor"] = 0  # Ray's own .remote() looks up each new actor's name once
    first = group.wait_ready(count=1, timeout=300)
    everyone = group.wait_ready(timeout=300)
    assert len(first) == 1 and len(everyone) == MEMBERS
    assert group.discover_new() == []  # every member was returned already
    calls["wait"] = 0
    group.wait_ready(count=1, timeout=60)  # one poll of a ready group
    assert calls["get_actor"] == 0, calls  # no lookup since creation
    assert 1 <= calls["wait"] <= 2, calls  # bulk looks over every member, not one per member
    assert sum(handle.ping() for handle in everyone) == MEMBERS
    group.shutdown()
