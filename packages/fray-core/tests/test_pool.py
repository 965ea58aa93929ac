"""Actor pools on the local backend: what the conformance suite does not reach (timeouts,
start failures, cancelling, the thread bound of broadcast, every option's check)."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import fray
from fray import ActorConfig, LocalClient, MemberState, PoolState
from fray.errors import ActorDiedError, FrayError, InvalidRequestError, JobTimeoutError

TIMEOUT = 30.0


class Gate:
    """A member whose ``wait`` blocks until the test opens the shared gate."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate
        self.calls = 0

    def echo(self, x: Any) -> Any:
        return x

    def wait(self, x: Any) -> Any:
        assert self.gate is not None
        self.gate.wait(TIMEOUT)
        return x

    def fail_on(self, x: int) -> int:
        if x == 3:
            raise KeyError(x)
        return x

    def threads(self) -> int:
        return threading.active_count()


class BadInit:
    def __init__(self) -> None:
        raise RuntimeError("no model file")


def _eventually(predicate: Any) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for the pool"
        time.sleep(0.01)  # polling interval of a bounded wait, not synchronisation


@pytest.fixture
def client() -> Iterator[LocalClient]:
    with LocalClient(echo_logs=False) as client:
        yield client


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("min_workers", {"min_workers": -1}),
        ("max_workers", {"max_workers": 0}),
        ("max_item_retries", {"max_item_retries": 1.5}),
        ("idempotent", {"idempotent": "yes"}),
        ("call_timeout", {"call_timeout": 0}),
        ("max_in_flight_per_member", {"max_in_flight_per_member": 0}),
        ("idle_timeout", {"idle_timeout": -1}),
        ("actor_class", {"cls": "Gate"}),
    ],
)
def test_create_actor_pool_names_the_bad_field(
    client: LocalClient, field: str, kwargs: dict[str, Any]
) -> None:
    cls = kwargs.pop("cls", Gate)
    with pytest.raises(InvalidRequestError) as caught:
        client.create_actor_pool(cls, name="p", **kwargs)
    assert caught.value.field == field
    assert caught.value.allowed


def test_bad_calls_name_the_field(client: LocalClient) -> None:
    group = client.create_actor_group(Gate, name="g", count=1)
    for option in ("idle_timeout", "max_retries"):
        with pytest.raises(InvalidRequestError) as caught:
            group.pool(**{option: 5})
        assert caught.value.field == option
        assert "max_item_retries" in caught.value.allowed
    with group.pool() as pool:
        for call, field in [
            (lambda: pool.submit(3), "method"),
            (lambda: pool.map("echo", [1], max_in_flight=0), "max_in_flight"),
            (lambda: pool.map("echo", [1], ordered=None), "ordered"),
            (lambda: group.broadcast("echo", 1, timeout=-1), "timeout"),
            (lambda: pool.shutdown(timeout=0), "timeout"),
        ]:
            with pytest.raises(InvalidRequestError) as caught:
                call()
            assert caught.value.field == field


def test_map_raises_an_item_error_in_its_place_and_cancels_the_rest(client: LocalClient) -> None:
    with client.create_actor_pool(Gate, name="p", min_workers=2) as pool:
        results = pool.map("fail_on", range(100), max_in_flight=4)
        assert [next(results) for _ in range(3)] == [0, 1, 2]
        with pytest.raises(KeyError):
            next(results)
        results.close()
        status = pool.status()
    assert status.done + status.failed < 100  # items past the window were never sent
    assert status.redispatched == 0


def test_a_call_past_call_timeout_fails_unless_idempotent(client: LocalClient) -> None:
    gate = threading.Event()
    with client.create_actor_pool(Gate, gate, name="p", min_workers=1, call_timeout=0.2) as pool:
        with pytest.raises(JobTimeoutError, match="call_timeout"):
            pool.submit("wait", 1).result(TIMEOUT)
        gate.set()
        assert pool.status().redispatched == 0
    gate.clear()
    pool = client.create_actor_pool(
        Gate, gate, name="q", min_workers=2, call_timeout=0.2, idempotent=True
    )
    future = pool.submit("wait", 7)
    # The first call times out and the item runs again on the other member; whichever ends
    # first is the result, delivered once.
    _eventually(lambda: pool.status().redispatched >= 1 and pool.status().in_flight == 2)
    assert not future.done()
    gate.set()
    assert future.result(TIMEOUT) == 7
    pool.shutdown()
    assert pool.status().done == 1


def test_members_that_cannot_start_fail_pending_items(client: LocalClient) -> None:
    pool = client.create_actor_pool(
        BadInit, name="p", min_workers=1, max_workers=4, no_members_timeout=0.2
    )
    future = pool.submit("anything")
    with pytest.raises(ActorDiedError, match="failed to start") as caught:
        future.result(TIMEOUT)
    assert "no model file" in str(caught.value)
    pool.shutdown()
    assert pool.status().members_dead >= 3


def test_shutdown_cancels_queued_items_and_bounds_running_ones(client: LocalClient) -> None:
    gate = threading.Event()
    pool = client.create_actor_pool(Gate, gate, name="p", min_workers=1)
    running = pool.submit("wait", 0)
    queued = [pool.submit("echo", i) for i in range(3)]
    pool.shutdown(cancel_futures=True, timeout=0.3)
    assert all(f.cancelled() for f in queued)
    with pytest.raises(FrayError, match="shut down"):
        running.result(0)
    gate.set()
    assert pool.status().state is PoolState.STOPPED
    assert [state for _, state in pool.status().members] == [MemberState.STOPPED]
    with pytest.raises(FrayError):
        pool.submit("echo", 1)


def test_broadcast_uses_at_most_64_threads(client: LocalClient) -> None:
    group = client.create_actor_group(Gate, name="wide", count=300)
    group.wait_ready(timeout=TIMEOUT)
    before = threading.active_count()
    results = group.broadcast("threads", timeout=TIMEOUT)
    assert len(results) == 300 and all(r.ok for r in results)
    assert max(r.value for r in results) - before <= 64
    group.shutdown()


def test_a_pool_is_typed_by_the_protocols(client: LocalClient) -> None:
    group = client.create_actor_group(Gate, name="g", count=1, actor_config=ActorConfig())
    assert isinstance(group, fray.ActorGroup)
    with group.pool() as pool:
        assert isinstance(pool, fray.ActorPool)
        assert isinstance(pool.submit("echo", 1), concurrent.futures.Future)
        assert isinstance(pool.status(), fray.PoolStatus)
