"""Hosted actors, the serving side: an :class:`ActorServer` (built by
:func:`host_in_process`) serves an instance living in this process over TCP to callers that
hold its handle's secret: each connection must answer a challenge with an HMAC of the secret
before the server reads a single pickled byte from it. Every call is an operation, started
under an id its caller chose and then asked for, so a caller whose connection drops
reconnects and asks again.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import secrets
import socket
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any

from fray._actor import ActorContext, HostedActor, ShutdownEvent
from fray._types import ActorConfig
from fray.backend._binding import binding
from fray.backend._hosted_handle import HostedActorHandle
from fray.backend._outcome import portable_error
from fray.backend._wire import LOCAL_SERVERS, alive, authenticate, recv, send
from fray.errors import ActorDiedError, ActorError, ActorUnavailableError

logger = logging.getLogger(__name__)

_SWEEP_EVERY = 1800.0  # seconds; an outcome nobody collects is forgotten 30 to 60 min after


class ActorServer:
    """An actor instance in this process, served on ``host`` (any free port) to callers
    holding its handle's secret, a thread per connection; its calls run in arrival order, at
    most ``max_concurrency`` at a time, with ``current_client()`` and ``current_actor()``
    bound. Its context's ``shutdown_event`` (and ``fail``) closes it gracefully.

    A request is ``(op_id, call, wait)``: ``call`` ``(method, args, kwargs)`` starts operation
    ``op_id`` unless the server holds it, ``None`` asks for it, ``"cancel"`` forgets it (a call
    not started yet never runs). The reply, within ``wait`` seconds: ``("ok", value)`` or
    ``("error", exc)`` (the server then forgets it; an operation it does not hold is an
    ``ActorUnavailableError``), or ``("pending", None)``.
    """

    def __init__(self, client: Any, name: str, config: ActorConfig, host: str) -> None:
        self.client, self.name = client, name
        self.instance: Any = None
        self.token = secrets.token_urlsafe(32)
        self._sock = socket.create_server((host, 0), backlog=128)
        self.handle = HostedActorHandle(name, (host, self._sock.getsockname()[1]), self.token)
        self.context = ActorContext(
            self.handle, 0, name, ShutdownEvent(lambda: self.close(True), name)
        )
        self.withdraw: Callable[[], None] = lambda: None  # runs first when it stops serving
        self.operations: dict[str, Future[Any]] = {}
        self._next_sweep, self._stale = time.monotonic() + _SWEEP_EVERY, set[str]()
        self._executor = ThreadPoolExecutor(config.max_concurrency, f"fray-hosted-{name}")
        self._lock = threading.Lock()
        self._closed = False
        self._conns = weakref.WeakSet[socket.socket]()  # open ones: each leaves with its thread
        LOCAL_SERVERS[self.handle.address] = self
        threading.Thread(target=self._accept, name=f"fray-hosted-{name}", daemon=True).start()

    def _run(self, future: Future[Any], method: str, args: Any, kwargs: Any) -> None:
        with self._lock:  # a call cancelled, or ended by close(), before it started never runs
            if self._closed or not future.set_running_or_notify_cancel():
                return
        try:
            if method.startswith("_") and method != "__call__":
                raise ActorError(f"{method!r} is private: hosted actors serve public methods only")
            with binding(self.client, self.context):
                value = getattr(self.instance, method)(*args, **kwargs)
            future.set_result(value)
        except BaseException as exc:
            with contextlib.suppress(InvalidStateError):  # close() ended it first
                future.set_exception(exc)

    def _gone(self) -> ActorDiedError:
        return ActorDiedError(f"hosted actor {self.name} has been shut down; it takes no calls")

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # the caller went away, or the server closes
            if not authenticate(conn, self.token, server=True):
                logger.warning("hosted actor %s refused a caller without its secret", self.name)
                return
            while True:
                data = recv(conn)
                try:
                    reply = self.answer(conn, *pickle.loads(data))
                except Exception as exc:  # e.g. an argument's class is not importable here
                    reply = ("error", self._error("could not read the call", exc))
                try:
                    send(conn, reply)
                except OSError:
                    raise
                except Exception as exc:  # the value does not pickle
                    send(conn, ("error", self._error("could not send the reply", exc)))

    def answer(self, conn: socket.socket | None, op_id: str, call: Any, wait: float) -> Any:
        """The reply to one request (``conn``: where it came from; ``None``: this process)."""
        with self._lock:
            if call == "cancel":  # a call not started yet never runs
                self.operations.pop(op_id, Future()).cancel()
                return ("ok", None)
            future = self.operations.get(op_id)
            if future is None and call is not None:
                if time.monotonic() > self._next_sweep:  # forget outcomes nobody came for
                    self._next_sweep = time.monotonic() + _SWEEP_EVERY
                    for stale in self._stale & self.operations.keys():
                        del self.operations[stale]
                    self._stale = {op for op, f in self.operations.items() if f.done()}
                future = self.operations[op_id] = Future()
                if self._closed:
                    future.set_exception(self._gone())
                else:
                    self._executor.submit(self._run, future, *call)
        if future is None:
            error = f"hosted actor {self.name} no longer knows operation {op_id}: it restarted"
            return ("error", ActorUnavailableError(f"{error}, or the outcome was lost"))
        wait_futures([future], wait)
        if not future.done():
            return ("pending", None)
        if conn is None or alive(conn):  # else it stays for its caller, who may come back
            with self._lock:
                self.operations.pop(op_id, None)
        if future.cancelled():
            return ("error", ActorError(f"the call to {self.name} was cancelled"))
        exc = future.exception()
        return ("ok", future.result()) if exc is None else ("error", portable_error(exc))

    def _error(self, what: str, exc: BaseException) -> ActorError:
        return ActorError(f"hosted actor {self.name} {what}: {type(exc).__name__}: {exc}")

    def drop_connections(self, how: int = socket.SHUT_RDWR) -> None:
        """Breaks every open connection, as a network fault would (callers reconnect)."""
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(how)

    def close(self, graceful: bool = False) -> None:
        """Takes no more calls and ends every unfinished one with ``ActorDiedError``; a
        running call finishes first if ``graceful`` (the actor's own ``shutdown_event``), else
        goes on unseen. Then stops listening and closes each connection after its reply."""
        with self._lock:
            self._closed, withdraw, self.withdraw = True, self.withdraw, lambda: None
        withdraw()
        LOCAL_SERVERS.pop(self.handle.address, None)
        self._executor.shutdown(wait=graceful, cancel_futures=True)
        with self._lock:
            unfinished = list(self.operations.values())
        for future in unfinished:
            with contextlib.suppress(InvalidStateError):  # cancelled, or just finished
                future.set_exception(self._gone())
        self.drop_connections(socket.SHUT_RD)  # a thread waiting on a call still replies
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()


def host_in_process(
    client: Any,
    actor_class: type[Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    name: str,
    actor_config: ActorConfig | None,
    host: str,
    announce: Callable[[HostedActorHandle], Callable[[], None]] | None = None,
) -> HostedActor:
    """Constructs ``actor_class`` here and serves it on ``host`` (the address other nodes
    reach this one by). ``announce(handle)`` runs once the instance is built (a backend
    registers the actor where its cluster looks names up); what it returns runs when the
    actor stops serving, before the server closes. ``__init__`` raising is an ``ActorError``.
    """

    server = ActorServer(client, name, actor_config or ActorConfig(), host)
    try:
        with binding(client, server.context):
            server.instance = actor_class(*args, **kwargs)
    except BaseException as exc:
        server.close()
        raise hosted_init_failed(name, actor_class, exc) from exc
    try:
        if announce is not None:
            server.withdraw = announce(server.handle)
    except BaseException:
        server.close()
        raise
    return HostedActor(server.handle, server.close)


def hosted_init_failed(
    name: str, actor_class: type[Any], error: BaseException | None
) -> ActorError:
    """The error ``host_actor`` raises when the instance's ``__init__`` raised ``error``
    (raise it ``from error``), the same on every backend."""
    what = f"{actor_class.__name__}.__init__ raised {type(error).__name__}: {error}"
    return ActorError(f"hosted actor {name}: {what}")
