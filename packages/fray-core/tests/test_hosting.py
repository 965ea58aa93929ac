"""Hosted actors' server (``fray.backend.host_in_process``): calls from another process,
the handle's secret, long-running operations across a dropped connection, cancellation."""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from fray import ActorConfig, HostedActor, current_actor
from fray.backend import HostedActorHandle
from fray.backend import _wire as wire
from fray.backend._hosting import ActorServer, host_in_process
from fray.errors import ActorError, ActorUnavailableError, JobTimeoutError

WAIT = 30.0


class Gate:
    """A hosted actor whose ``block`` waits for ``release``."""

    def __init__(self) -> None:
        self.count = 0
        self.entered = threading.Event()
        self.released = threading.Event()

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


@pytest.fixture
def hosted() -> Iterator[HostedActor]:
    actor = host_in_process(
        None,
        Gate,
        (),
        {},
        name="gate",
        actor_config=ActorConfig(max_concurrency=1),
        host="127.0.0.1",
    )
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
