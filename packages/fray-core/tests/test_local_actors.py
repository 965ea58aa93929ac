"""LocalClient actors: sync and remote calls, serialisation, concurrency, groups, pickling."""

from __future__ import annotations

import contextvars
import pickle
import queue
import threading
from typing import Any

import cloudpickle
import pytest

import fray
from fray import (
    ActorConfig,
    ActorDiedError,
    ActorError,
    Entrypoint,
    InvalidRequestError,
    JobRequest,
    JobStatus,
    JobTimeoutError,
    LocalClient,
    current_actor,
    current_client,
)


class Counter:
    def __init__(self, start: int = 0, *, step: int = 1) -> None:
        self.value = start
        self.step = step
        self.me = current_actor()

    def incr(self, by: int | None = None) -> int:
        # Read-modify-write with a yield point in between: races show up without serialisation.
        current = self.value
        threading.Event().wait(0.0005)
        self.value = current + (self.step if by is None else by)
        return self.value

    def get(self) -> int:
        return self.value

    def fail(self) -> None:
        raise KeyError("no such shard")

    def whoami(self) -> tuple[str, int, str]:
        ctx = current_actor()
        return ctx.handle.name, ctx.index, ctx.group_name


class Gate:
    """Calls block until the test sets ``release``; counts how many run at once."""

    def __init__(self, release: threading.Event, arrivals: queue.Queue[int] | None = None) -> None:
        self.release = release
        self.arrivals = arrivals
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0

    def enter(self) -> int:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        if self.arrivals is not None:
            self.arrivals.put(1)
        self.release.wait(10)
        with self.lock:
            self.running -= 1
        return self.peak


class Broken:
    def __init__(self) -> None:
        raise OSError("cannot load the model")


def test_sync_and_remote_calls(client: LocalClient) -> None:
    counter = client.create_actor(Counter, 10, step=5, name="counter")
    assert counter.incr() == 15
    future = counter.incr.remote(by=1)
    assert future.result(timeout=10) == 16
    assert future.done()
    assert counter.get() == 16
    assert counter.name == "counter-0"


def test_calls_are_serialised_per_actor(client: LocalClient) -> None:
    counter = client.create_actor(Counter, name="serial")
    futures = [counter.incr.remote() for _ in range(50)]
    assert sorted(f.result(timeout=30) for f in futures) == list(range(1, 51))
    threads = [threading.Thread(target=counter.incr) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.get() == 70


def test_remote_calls_run_in_order(client: LocalClient) -> None:
    counter = client.create_actor(Counter, name="ordered")
    futures = [counter.incr.remote() for _ in range(20)]
    assert [f.result(timeout=30) for f in futures] == list(range(1, 21))
    # A blocking call after queued remote calls sees all of them.
    more = [counter.incr.remote() for _ in range(5)]
    assert counter.get() == 25
    assert all(f.done() for f in more)


def test_max_concurrency_relaxes_serialisation(client: LocalClient) -> None:
    release = threading.Event()
    arrivals: queue.Queue[int] = queue.Queue()
    gate = client.create_actor(
        Gate, release, arrivals, name="gate", actor_config=ActorConfig(max_concurrency=3)
    )
    futures = [gate.enter.remote() for _ in range(3)]
    for _ in range(3):  # all three are inside enter() at once before the gate opens
        arrivals.get(timeout=10)
    release.set()
    assert max(f.result(timeout=10) for f in futures) == 3
    release_single = threading.Event()
    single = client.create_actor(Gate, release_single, name="gate1")
    futures = [single.enter.remote() for _ in range(3)]
    release_single.set()
    assert max(f.result(timeout=10) for f in futures) == 1


def test_method_exceptions_keep_their_type(client: LocalClient) -> None:
    counter = client.create_actor(Counter, name="failing")
    with pytest.raises(KeyError, match="no such shard"):
        counter.fail()
    with pytest.raises(KeyError):
        counter.fail.remote().result(timeout=10)
    assert counter.incr() == 1  # the actor survives its method's exception
    with pytest.raises(AttributeError):
        counter.no_such_method()
    with pytest.raises(AttributeError):
        counter._private  # noqa: B018


def test_future_timeout(client: LocalClient) -> None:
    release = threading.Event()
    gate = client.create_actor(Gate, release, name="slow")
    future = gate.enter.remote()
    with pytest.raises(JobTimeoutError, match="within 0.05s"):
        future.result(timeout=0.05)
    release.set()
    assert future.result(timeout=10) == 1


def test_constructor_failure_is_an_actor_error(client: LocalClient) -> None:
    with pytest.raises(ActorError, match="cannot load the model") as info:
        client.create_actor(Broken, name="broken")
    assert isinstance(info.value.__cause__, OSError)


def test_group_readiness_and_discovery(client: LocalClient) -> None:
    group = client.create_actor_group(Counter, name="workers", count=3)
    first = group.wait_ready(count=2, timeout=10)
    assert len(first) == 2
    everyone = group.wait_ready(timeout=10)
    assert len(everyone) == 3 and group.ready_count == 3
    assert group.statuses() == [JobStatus.RUNNING] * 3
    assert sorted(h.whoami()[0] for h in everyone) == ["workers-0", "workers-1", "workers-2"]
    assert group.discover_new() == []  # all three were handed out already
    for i, handle in enumerate(everyone):
        handle.incr(by=i)
    assert [h.get() for h in everyone] == [0, 1, 2]  # independent state
    with pytest.raises(InvalidRequestError, match="wait_ready.count"):
        group.wait_ready(count=4)
    group.shutdown()
    assert group.statuses() == [JobStatus.STOPPED] * 3 and group.is_done()
    with pytest.raises(ActorDiedError):
        everyone[0].get()


def test_discover_new_yields_each_actor_once(client: LocalClient) -> None:
    group = client.create_actor_group(Counter, name="disc", count=2)
    group.wait_ready(count=0)
    found: list[Any] = []
    while len(found) < 2:
        found += group.discover_new()
        if len(found) < 2:
            group.wait_ready(timeout=10)
    assert len({h.name for h in found}) == 2
    assert group.discover_new() == []


def test_group_with_failing_members(client: LocalClient) -> None:
    group = client.create_actor_group(Broken, name="bad", count=2)
    with pytest.raises(ActorError, match="0 of 2 actors of bad can become ready"):
        group.wait_ready(count=1, timeout=10)
    assert group.statuses() == [JobStatus.FAILED, JobStatus.FAILED]


def test_pending_calls_fail_when_the_actor_stops(client: LocalClient) -> None:
    release = threading.Event()
    arrivals: queue.Queue[int] = queue.Queue()
    group = client.create_actor_group(Gate, release, arrivals, name="stopping", count=1)
    (gate,) = group.wait_ready()
    running = gate.enter.remote()
    queued = gate.enter.remote()
    arrivals.get(timeout=10)  # the first call runs; the second waits its turn
    # shutdown() returns at once and answers both calls: none stays pending. The running
    # call's code goes on to its end; its value is dropped.
    group.shutdown()
    for future in (running, queued):
        with pytest.raises(ActorDiedError):
            future.result(timeout=0)
    release.set()


def test_duplicate_actor_names(client: LocalClient) -> None:
    client.create_actor(Counter, name="unique")
    with pytest.raises(ActorError, match="'unique-0' already exists"):
        client.create_actor(Counter, name="unique")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": "bad name", "count": 1}, "name"),
        ({"name": "ok", "count": 0}, "count"),
        ({"name": "ok", "count": 1, "resources": {"cpu": 1}}, "resources"),
        ({"name": "ok", "count": 1, "actor_config": 3}, "actor_config"),
    ],
)
def test_actor_argument_validation(client: LocalClient, kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        client.create_actor_group(Counter, **kwargs)
    assert info.value.field == field


def test_handles_pickle_and_work_after_unpickling(client: LocalClient) -> None:
    counter = client.create_actor(Counter, name="picklable")
    for dumps in (pickle.dumps, cloudpickle.dumps):
        copy = pickle.loads(dumps(counter))
        assert copy == counter and copy is not counter
        copy.incr()
    assert counter.get() == 2


def use_counter(handle: Any, times: int) -> int:
    for _ in range(times):
        handle.incr()
    return handle.get()


def test_pickled_handle_used_from_a_job(client: LocalClient) -> None:
    counter = client.create_actor(Counter, name="shared")
    payload = cloudpickle.dumps(counter)
    jobs = [
        client.submit(
            JobRequest(
                name=f"user{i}",
                entrypoint=Entrypoint.from_callable(use_counter, (pickle.loads(payload), 5)),
            )
        )
        for i in range(4)
    ]
    results = [j.result(timeout=30) for j in jobs]
    assert counter.get() == 20 and max(results) == 20


def test_handle_in_another_process_explains_itself(client: LocalClient) -> None:
    counter = client.create_actor(Counter, name="elsewhere")
    job = client.submit(
        JobRequest(
            name="proc",
            isolation="process",
            entrypoint=Entrypoint.from_callable(use_counter, (counter, 1)),
        )
    )
    with pytest.raises(Exception, match="not in this process"):
        job.result(timeout=60)


def test_actor_can_submit_jobs_with_the_same_client(client: LocalClient) -> None:
    class Launcher:
        def launch(self) -> int:
            job = current_client().submit(
                JobRequest(name="inner", entrypoint=Entrypoint.from_callable(lambda: 7))
            )
            return job.result(timeout=30)

    launcher = client.create_actor(Launcher, name="launcher")
    assert launcher.launch() == 7
    assert [i.name for i in client.list_jobs()] == ["inner"]


def test_current_actor_outside_an_actor() -> None:
    with pytest.raises(RuntimeError, match="outside an actor"):
        current_actor()


def test_current_actor_inside(client: LocalClient) -> None:
    group = client.create_actor_group(Counter, name="ctx", count=2)
    handles = group.wait_ready(timeout=10)
    assert sorted(h.whoami() for h in handles) == [("ctx-0", 0, "ctx"), ("ctx-1", 1, "ctx")]


class Doubler:
    def __call__(self, x: int) -> int:
        return 2 * x

    def boom(self) -> None:
        raise ValueError("no")


def test_an_actor_is_called_through_its_dunder_call(client: fray.LocalClient) -> None:
    handle = client.create_actor(Doubler, name="doubler")
    assert handle(4) == 8
    assert handle.__call__.remote(5).result(timeout=10) == 10


def test_wait_all_on_actor_futures_returns_results_in_order(client: fray.LocalClient) -> None:
    group = client.create_actor_group(Doubler, name="pool", count=3)
    handles = group.wait_ready(timeout=30)
    futures = [handles[i % 3].__call__.remote(i) for i in range(9)]
    assert fray.wait_all(futures, timeout=30) == [2 * i for i in range(9)]
    failing = [handles[0].boom.remote(), handles[1].__call__.remote(1)]
    with pytest.raises(ValueError, match="no"):
        fray.wait_all(failing, timeout=30)
    outcomes = fray.wait_all(
        [handles[0].boom.remote(), handles[1].__call__.remote(1)],
        timeout=30,
        raise_on_failure=False,
    )
    assert isinstance(outcomes[0], ValueError) and outcomes[1] == 2


class Binder:
    """Reports what ``current_client()`` and ``current_actor()`` answer inside its methods."""

    def seen(self) -> tuple[Any, str]:
        return current_client(), current_actor().group_name

    def seen_with(self, other: Any) -> tuple[Any, str]:
        with fray.set_current_client(other):
            return current_client(), current_actor().group_name

    def seen_in_a_copied_context(self) -> tuple[Any, str]:
        # A thread started with a copy of the method's context (what asyncio.to_thread does).
        context = contextvars.copy_context()
        found: list[tuple[Any, str]] = []
        thread = threading.Thread(target=lambda: found.append(context.run(self.seen)))
        thread.start()
        thread.join()
        return found[0]

    def through(self, inner: Any) -> tuple[tuple[Any, str], tuple[Any, str]]:
        return inner.seen(), self.seen()


def test_a_blocking_call_binds_the_actor_and_its_client_and_restores_the_callers(
    client: LocalClient,
) -> None:
    actor = client.create_actor(Binder, name="binder")
    other = LocalClient()
    try:
        with fray.set_current_client(other):
            assert actor.seen() == (client, "binder")
            assert current_client() is other
        with pytest.raises(RuntimeError, match="outside an actor"):
            current_actor()
    finally:
        other.shutdown()


def test_a_client_set_inside_a_method_wins_and_the_actor_stays(client: LocalClient) -> None:
    actor = client.create_actor(Binder, name="binder")
    other = LocalClient()
    try:
        assert actor.seen_with(other) == (other, "binder")
        assert actor.seen() == (client, "binder")
    finally:
        other.shutdown()


def test_a_context_copied_inside_a_method_carries_the_actor(client: LocalClient) -> None:
    actor = client.create_actor(Binder, name="binder")
    assert actor.seen_in_a_copied_context() == (client, "binder")


def test_an_actor_calling_another_sees_itself_again_after(client: LocalClient) -> None:
    outer = client.create_actor(Binder, name="outer")
    inner = client.create_actor(Binder, name="inner")
    assert outer.through(inner) == ((client, "inner"), (client, "outer"))
