"""Hosted actors' server (``fray.backend.host_in_process``): calls from another process and
from this one, the handle's secret, calls across a dropped connection, cancellation, and
what shutting down leaves (nothing pending, no thread, no socket), and no socket kept
to actors that ended."""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from fray import ActorConfig, HostedActor, current_actor, current_client
from fray.backend import HostedActorHandle, _hosted_handle
from fray.backend import _wire as wire
from fray.backend._hosting import ActorServer, host_in_process
from fray.errors import ActorDiedError, ActorError, ActorUnavailableError, JobTimeoutError

WAIT = 30.0


class Gate:
    """A hosted actor whose ``block`` waits for ``release``."""

    def __init__(self) -> None:
        self.count = 0
        self.entered = threading.Event()
        self.released = threading.Event()
        self.pair = threading.Barrier(2)

    def incr(self, by: int = 1) -> int:
        self.count += by
        return self.count

    def value(self) -> int:
        return self.count

    def who(self) -> tuple[str, int]:
        ctx = current_actor()
        return ctx.group_name, ctx.index

    def unpicklable(self) -> object:
        return threading.Lock()

    def block(self) -> str:
        self.entered.set()
        assert self.released.wait(WAIT)
        return "released"

    def meet(self) -> int:
        """Returns once a second call has come in too."""
        return self.pair.wait(WAIT)

    def client(self) -> object:
        return current_client()

    def end(self) -> str:
        ctx = current_actor()
        assert ctx.shutdown_event is not None
        ctx.shutdown_event.set()
        return "ending"


def _host(name: str, max_concurrency: int = 1, **kwargs: Any) -> HostedActor:
    config = ActorConfig(max_concurrency=max_concurrency)
    kwargs.setdefault("client", None)
    return host_in_process(
        kwargs.pop("client"),
        Gate,
        (),
        {},
        name=name,
        actor_config=config,
        host="127.0.0.1",
        **kwargs,
    )


@pytest.fixture
def hosted() -> Iterator[HostedActor]:
    actor = _host("gate")
    yield actor
    actor.shutdown()


def _server(hosted: HostedActor) -> ActorServer:
    return wire.LOCAL_SERVERS[hosted.handle.address]


@pytest.fixture
def server(hosted: HostedActor, monkeypatch: pytest.MonkeyPatch) -> ActorServer:
    """The hosted actor's server; calls from this process now go over TCP too (as from any
    other process), not straight to the instance."""
    found = _server(hosted)
    monkeypatch.delitem(wire.LOCAL_SERVERS, hosted.handle.address)
    return found


def _gate(server: ActorServer) -> Gate:
    return server.instance


def test_a_handle_pickled_into_another_process_calls_the_actor(hosted: HostedActor) -> None:
    code = (
        "import pickle, sys\n"
        "h = pickle.loads(sys.stdin.buffer.read())\n"
        "print(h.incr(2), h.incr.remote(3).result(timeout=30), *h.who())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=pickle.dumps(hosted.handle),
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.decode().split() == ["2", "5", "gate", "0"]
    assert hosted.handle.value() == 5


def test_a_caller_without_the_secret_is_refused(hosted: HostedActor, server: ActorServer) -> None:
    impostor = HostedActorHandle("gate", hosted.handle.address, "not-the-secret")
    with pytest.raises(ActorError, match="refused the call.*secret"):
        impostor.incr(100)
    assert hosted.handle.value() == 0  # the impostor's call never ran


def test_the_handle_does_not_show_its_secret(hosted: HostedActor) -> None:
    token = _server(hosted).token
    assert token not in repr(hosted.handle)


def test_submit_survives_a_dropped_connection(hosted: HostedActor, server: ActorServer) -> None:
    gate = _gate(server)
    operation = hosted.handle.block.submit()
    assert gate.entered.wait(WAIT)
    server.drop_connections()  # the caller's wait breaks mid-call
    gate.released.set()
    assert operation.result(timeout=WAIT) == "released"  # it reconnected to get the outcome


def test_a_plain_call_survives_a_dropped_connection_too(
    hosted: HostedActor, server: ActorServer
) -> None:
    gate = _gate(server)
    future = hosted.handle.block.remote()
    assert gate.entered.wait(WAIT)
    server.drop_connections()
    gate.released.set()
    assert future.result(timeout=WAIT) == "released"
    assert hosted.handle.value() == 0  # it ran once


def test_result_timeout_cancels_the_operation_on_the_server(
    hosted: HostedActor, server: ActorServer
) -> None:
    gate = _gate(server)
    blocker = hosted.handle.block.submit()
    assert gate.entered.wait(WAIT)
    queued = hosted.handle.incr.submit(10)  # waits behind block (max_concurrency=1)
    with pytest.raises(JobTimeoutError):
        queued.result(timeout=0.2)
    with pytest.raises(ActorError, match="cancelled"):
        queued.result(timeout=0)  # it stays cancelled
    gate.released.set()
    assert blocker.result(timeout=WAIT) == "released"
    assert hosted.handle.value() == 0  # the cancelled call never ran
    assert not server.operations


def test_an_operation_the_server_lost_raises_actor_unavailable(
    hosted: HostedActor, server: ActorServer
) -> None:
    gate = _gate(server)
    operation = hosted.handle.block.submit()
    assert gate.entered.wait(WAIT)
    server.operations.clear()  # as a restarted server would, which drops connections too
    server.drop_connections()
    with pytest.raises(ActorUnavailableError, match="no longer knows operation"):
        operation.result(timeout=WAIT)
    gate.released.set()


def test_calls_after_shutdown_raise_actor_error(hosted: HostedActor) -> None:
    handle = pickle.loads(pickle.dumps(hosted.handle))
    hosted.shutdown()
    with pytest.raises(ActorError, match="not serving"):
        handle.incr(1)


def test_a_reply_that_does_not_pickle_is_an_actor_error(
    hosted: HostedActor, server: ActorServer
) -> None:
    with pytest.raises(ActorError, match="could not send the reply"):
        hosted.handle.unpicklable()
    assert hosted.handle.incr(1) == 1  # the connection is still good


def test_arguments_that_do_not_pickle_are_refused_before_sending(
    hosted: HostedActor, server: ActorServer
) -> None:
    with pytest.raises(TypeError):
        hosted.handle.incr(threading.Lock())
    assert hosted.handle.value() == 0


def test_calls_from_this_process_reach_the_instance_itself(hosted: HostedActor) -> None:
    assert isinstance(hosted.handle.unpicklable(), type(threading.Lock()))  # nothing pickled
    assert hosted.handle.incr.remote(2).result(timeout=WAIT) == 2
    assert hosted.handle.incr.submit(3).result(timeout=WAIT) == 5


def test_methods_run_with_the_client_and_the_actor_bound() -> None:
    client = object()
    with _host("bound", client=client) as actor:
        assert actor.handle.client() is client
        assert tuple(actor.handle.who()) == ("bound", 0)


def test_max_concurrency_calls_run_side_by_side() -> None:
    with _host("pair", max_concurrency=2) as actor:
        first, second = actor.handle.meet.remote(), actor.handle.meet.remote()
        assert {first.result(timeout=WAIT), second.result(timeout=WAIT)} == {0, 1}


def test_a_constructor_that_raises_is_an_actor_error() -> None:
    class Broken:
        def __init__(self) -> None:
            raise ValueError("no")

    with pytest.raises(ActorError, match=r"Broken.__init__ raised ValueError: no") as caught:
        host_in_process(None, Broken, (), {}, name="broken", actor_config=None, host="127.0.0.1")
    assert isinstance(caught.value.__cause__, ValueError)


def test_the_shutdown_event_stops_serving_and_withdraws_the_actor() -> None:
    announced: list[HostedActorHandle] = []
    withdrawn = threading.Event()

    def announce(handle: HostedActorHandle) -> Any:
        announced.append(handle)
        return withdrawn.set

    with _host("ender", announce=announce) as actor:
        assert announced == [actor.handle]
        assert actor.handle.end() == "ending"
        assert withdrawn.wait(WAIT)
        with pytest.raises(ActorError):
            actor.handle.incr(1)


@pytest.mark.parametrize("over_tcp", [False, True], ids=["in-process", "over-tcp"])
def test_shutdown_ends_every_pending_call(over_tcp: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    actor = _host("pending")
    gate = _server(actor).instance
    if over_tcp:
        monkeypatch.delitem(wire.LOCAL_SERVERS, actor.handle.address)
    running = actor.handle.block.remote()
    assert gate.entered.wait(WAIT)
    queued = actor.handle.incr.submit(1)
    monkeypatch.undo()
    actor.shutdown()
    with pytest.raises(ActorDiedError, match="has been shut down"):
        running.result(timeout=WAIT)
    with pytest.raises(ActorError):  # died, or unavailable if it came after the shutdown
        queued.result(timeout=WAIT)
    gate.released.set()
    assert gate.count == 0  # the queued call never ran


def test_shutdown_leaves_no_thread_or_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    process = psutil.Process()
    threads, fds = set(threading.enumerate()), process.num_fds()
    monkeypatch.setattr(_hosted_handle, "_POOL", {})  # not other tests' idle connections
    actor = _host("tidy", max_concurrency=2)
    handle = actor.handle
    with monkeypatch.context() as tcp:  # over TCP, as from elsewhere
        tcp.delitem(wire.LOCAL_SERVERS, actor.handle.address)
        first, second = handle.meet.remote(), handle.meet.submit()  # two connections at once
        assert {first.result(timeout=WAIT), second.result(timeout=WAIT)} == {0, 1}
        assert handle.incr(1) == 1
    actor.shutdown()
    for thread in set(threading.enumerate()) - threads:
        thread.join(WAIT)
        assert not thread.is_alive(), thread.name
    with pytest.raises(ActorUnavailableError, match="not serving"):
        handle.incr(1)  # this process's idle connections to it are found closed, and closed
    assert process.num_fds() == fds


_CHILD = """
import pickle, sys
from fray.backend._hosting import host_in_process

class Counter:
    def incr(self):
        return 1

hosted = host_in_process(None, Counter, (), {}, name="c", actor_config=None, host="127.0.0.1")
print(pickle.dumps(hosted.handle).hex(), flush=True)
sys.stdin.read()  # until the test closes it
hosted.shutdown()
"""


def test_a_caller_keeps_no_socket_per_actor_that_ended() -> None:
    """A driver that calls many actors of other processes which then end (an autoscaling
    pool's) holds a bounded number of sockets: its idle connections to them are closed."""
    process = psutil.Process()
    fds = process.num_fds()
    run = [sys.executable, "-c", _CHILD]
    children = [
        subprocess.Popen(run, stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(8)
    ]
    for child in children:
        with child:
            assert child.stdin is not None and child.stdout is not None
            handle = pickle.loads(bytes.fromhex(child.stdout.readline().decode()))
            assert handle.incr() == 1
            child.stdin.close()
            assert child.wait(WAIT) == 0
    assert process.num_fds() <= fds + 1  # the last actor's, closed before the next connection
