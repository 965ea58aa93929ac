"""Hosted actors, the serving side: an instance living in this process, served over TCP
to callers elsewhere that hold its handle's secret.

``client.host_actor(...)`` on a cluster backend calls :func:`host_in_process`: a
:class:`HostedInstance` (the instance, its calls run in arrival order by up to
``max_concurrency`` threads) behind an :class:`ActorServer`. The handle
(``fray.backend.HostedActorHandle``) pickles as (name, address, secret); whoever unpickles
it can call the actor, and nobody else can: each connection must answer a challenge with an
HMAC of the secret before the server reads a single pickled byte from it.

A call is one request and one reply on a pooled connection. ``method.submit(...)`` is a
long-running operation instead: started, then polled, so it survives a dropped connection;
the server keeps a finished operation until its caller has read it (or for an hour).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import pickle
import secrets
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, InvalidStateError, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any

from fray._actor import ActorContext, HostedActor, ShutdownEvent
from fray._types import ActorConfig
from fray.backend._binding import binding
from fray.backend._hosted_handle import HostedActorHandle
from fray.backend._record import portable_error
from fray.backend._wire import (
    LOCAL_SERVERS,
    LOCAL_SERVERS_LOCK,
    NONCE_BYTES,
    CallFuture,
    digest,
    recv_exact,
    recv_frame,
    send,
)
from fray.errors import ActorDiedError, ActorError

__all__ = ["ActorServer", "HostedInstance", "host_in_process"]

logger = logging.getLogger(__name__)

_HANDSHAKE_TIMEOUT = 10.0
_FINISHED_OP_TTL = 3600.0  # an unclaimed finished operation is kept this long
_FORGOTTEN_CHECK = 0.5  # a poll rechecks this often that its operation is still known


# -- the instance ----------------------------------------------------------------------------


class HostedInstance:
    """An actor instance in this process: its calls run in arrival order, at most
    ``max_concurrency`` at a time, with ``current_client()`` and ``current_actor()`` bound.

    Its context's ``shutdown_event`` (and ``fail``) ends it: ``on_end`` runs once.
    """

    def __init__(
        self,
        client: Any,
        name: str,
        handle: Any,
        config: ActorConfig,
        on_end: Callable[[], None],
    ) -> None:
        self.client = client
        self.name = name
        self.instance: Any = None
        self.context = ActorContext(handle, 0, name, ShutdownEvent(on_end, name))
        self._executor = ThreadPoolExecutor(
            max_workers=config.max_concurrency, thread_name_prefix=f"fray-hosted-{name}"
        )
        self._closed = False

    def construct(self, cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Runs ``cls(*args, **kwargs)`` here, in the calling thread."""
        with binding(self.client, self.context):
            self.instance = cls(*args, **kwargs)

    def invoke(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Future[Any]:
        """Queues one call; its future holds the value or the method's exception."""
        if self._closed:
            raise self.gone_error()
        if method.startswith("_") and method != "__call__":
            raise ActorError(f"{method!r} is private: hosted actors serve public methods only")
        try:
            inner = self._executor.submit(self._run, method, args, kwargs)
        except RuntimeError:  # the executor shut down in between
            raise self.gone_error() from None
        outer = CallFuture()

        def settle(done: Future[Any]) -> None:
            try:
                if done.cancelled():
                    outer.set_exception(self.gone_error())
                elif (exc := done.exception()) is not None:
                    outer.set_exception(exc)
                else:
                    outer.set_result(done.result())
            except InvalidStateError:
                pass  # the caller cancelled it first

        inner.add_done_callback(settle)
        outer.add_done_callback(lambda f: f.cancelled() and inner.cancel())
        return outer

    def _run(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        with binding(self.client, self.context):
            return getattr(self.instance, method)(*args, **kwargs)

    def gone_error(self) -> ActorDiedError:
        return ActorDiedError(f"hosted actor {self.name} has been shut down; it takes no calls")

    def close(self) -> None:
        """Takes no more calls; queued ones fail, running ones finish in their threads."""
        self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)


# -- the server ------------------------------------------------------------------------------


class ActorServer:
    """Serves one :class:`HostedInstance` on ``(host, port)`` to callers holding ``token``.

    Requests (after the handshake), one reply each::

        ("call", method, args, kwargs)   -> ("ok", value) | ("error", exception)
        ("start", op_id, method, args, kwargs) -> ("started", op_id)  (once per op_id)
        ("poll", op_id, wait_seconds)    -> ("ok", value) | ("error", exc) | ("pending",)
                                            | ("unknown",)
        ("forget", op_id) / ("cancel", op_id) -> ("done",)
    """

    def __init__(self, target: HostedInstance, host: str, token: str) -> None:
        self._target = target
        self._token = token
        self.target = target
        self.token = token
        self._sock = socket.create_server((host, 0), backlog=128)
        self.address: tuple[str, int] = (host, self._sock.getsockname()[1])
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._ops: dict[str, Future[Any]] = {}
        self._finished_at: dict[str, float] = {}
        self._seen: dict[str, float] = {}  # every operation id started, for a while
        self._closed = False
        self.accepted = 0  # connections accepted so far
        with LOCAL_SERVERS_LOCK:
            LOCAL_SERVERS[self.address] = self
        self._thread = threading.Thread(
            target=self._accept_loop, name=f"fray-hosted-{target.name}-accept", daemon=True
        )
        self._thread.start()

    def _accept_loop(self) -> None:
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
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.accepted += 1
            threading.Thread(
                target=self._serve, args=(conn,), name="fray-hosted-conn", daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if not self._handshake(conn):
                return
            while True:
                data = recv_frame(conn)
                try:
                    request = pickle.loads(data)
                except Exception as exc:  # e.g. an argument's class is not importable here
                    reply = ("error", self._error("could not read the call", exc))
                else:
                    try:
                        reply = self._answer(request)
                    except Exception as exc:
                        reply = ("error", self._error("could not serve the call", exc))
                try:
                    send(conn, reply)
                except OSError:
                    raise
                except Exception as exc:  # the value does not pickle
                    send(conn, ("error", self._error("could not send the reply", exc)))
        except (OSError, EOFError):
            pass  # the caller went away, or the server is closing
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def _error(self, what: str, exc: BaseException) -> ActorError:
        return ActorError(f"hosted actor {self._target.name} {what}: {type(exc).__name__}: {exc}")

    def _handshake(self, conn: socket.socket) -> bool:
        conn.settimeout(_HANDSHAKE_TIMEOUT)
        nonce = secrets.token_bytes(NONCE_BYTES)
        conn.sendall(nonce)
        answer = recv_exact(conn, hashlib.sha256().digest_size)
        if not hmac.compare_digest(answer, digest(self._token, nonce)):
            conn.sendall(b"\x00")
            logger.warning("hosted actor %s refused a caller without its secret", self._target.name)
            return False
        conn.sendall(b"\x01")
        conn.settimeout(None)
        return True

    def _answer(self, request: tuple[Any, ...]) -> tuple[Any, ...]:
        kind = request[0]
        if kind == "call":
            try:
                future = self._target.invoke(request[1], request[2], request[3])
                return ("ok", future.result())
            except CancelledError:
                return ("error", self._target.gone_error())
            except BaseException as exc:
                return ("error", portable_error(exc))
        if kind == "start":
            op_id = request[1]
            with self._lock:  # registered before anyone can look for it
                if op_id in self._seen:
                    return ("started", op_id)  # a start resent after a dropped connection
                try:
                    future = self._target.invoke(request[2], request[3], request[4])
                except BaseException as exc:
                    return ("error", portable_error(exc))
                self._expire_finished()
                self._ops[op_id] = future
                self._seen[op_id] = time.monotonic()
            future.add_done_callback(lambda _f: self._mark_finished(op_id))
            return ("started", op_id)
        if kind == "poll":
            deadline = time.monotonic() + request[2]
            while True:
                with self._lock:
                    future = self._ops.get(request[1])
                if future is None:
                    return ("unknown",)
                left = deadline - time.monotonic()
                wait_futures([future], timeout=max(0.0, min(left, _FORGOTTEN_CHECK)))
                if future.done() or left <= _FORGOTTEN_CHECK:
                    break
            if not future.done():
                return ("pending",)
            try:
                return ("ok", future.result())
            except CancelledError:
                return ("error", self._target.gone_error())
            except BaseException as exc:
                return ("error", portable_error(exc))
        if kind in ("forget", "cancel"):
            with self._lock:
                future = self._ops.pop(request[1], None)
                self._finished_at.pop(request[1], None)
            if future is not None and kind == "cancel":
                future.cancel()  # a call not started yet never runs; a running one finishes
            return ("done",)
        return ("error", ActorError(f"unknown request {kind!r}"))

    def _mark_finished(self, op_id: str) -> None:
        with self._lock:
            if op_id in self._ops:
                self._finished_at[op_id] = time.monotonic()

    def _expire_finished(self) -> None:
        cutoff = time.monotonic() - _FINISHED_OP_TTL
        for op_id in [o for o, t in self._finished_at.items() if t < cutoff]:
            self._ops.pop(op_id, None)
            del self._finished_at[op_id]
        for op_id in [o for o, t in self._seen.items() if t < cutoff and o not in self._ops]:
            del self._seen[op_id]

    def operations(self) -> int:
        """Operations (``submit`` calls) the server still holds."""
        with self._lock:
            return len(self._ops)

    def forget_operations(self) -> None:
        """Forgets every operation, as a restarted server would (their callers get
        ``ActorUnavailableError``); running calls finish unseen."""
        with self._lock:
            self._ops.clear()
            self._finished_at.clear()
            self._seen.clear()

    def drop_connections(self) -> None:
        """Closes every open connection (callers of ``submit`` reconnect and poll again;
        a plain call in flight fails). For tests and for shedding stuck callers."""
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Stops listening, closes every connection and forgets every operation."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            ops = list(self._ops.values())
            self._ops.clear()
        with LOCAL_SERVERS_LOCK:
            LOCAL_SERVERS.pop(self.address, None)
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self.drop_connections()
        for future in ops:
            future.cancel()


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
    """Constructs ``actor_class`` here and serves it on ``host`` (an address the other
    nodes of the cluster reach this one by; loopback on a one-machine cluster).

    ``announce(handle)``, when given, runs once the instance is built (a backend registers
    the actor where its cluster looks names up); the callable it returns runs once when the
    actor stops serving (``shutdown()``, or its ``shutdown_event``), before the server closes.

    Raises:
        ActorError: ``__init__`` raised (chained as ``__cause__``).
    """
    token = secrets.token_urlsafe(32)
    box: list[ActorServer] = []
    withdraw: list[Callable[[], None]] = []

    def stop() -> None:
        target.close()
        with contextlib.suppress(IndexError):  # the first of concurrent stops takes it
            withdraw.pop()()
        if box:
            box[0].close()

    # The handle needs the server's port, the instance its handle: build the server first,
    # with the handle's address filled in once the port is known.
    handle = HostedActorHandle(name, ("", 0), token)
    target = HostedInstance(client, name, handle, actor_config or ActorConfig(), stop)
    server = ActorServer(target, host, token)
    box.append(server)
    handle._address = server.address  # pyright: ignore[reportPrivateUsage]
    try:
        target.construct(actor_class, args, kwargs)
    except BaseException as exc:
        stop()
        raise hosted_init_failed(name, actor_class, exc) from exc
    if announce is not None:
        try:
            withdraw.append(announce(handle))
        except BaseException:
            stop()
            raise
    return HostedActor(handle, stop)


def hosted_init_failed(
    name: str, actor_class: type[Any], error: BaseException | None
) -> ActorError:
    """The error ``host_actor`` raises when the instance's ``__init__`` raised ``error``
    (raise it ``from error``), the same on every backend."""
    return ActorError(
        f"hosted actor {name}: {actor_class.__name__}.__init__ raised "
        f"{type(error).__name__}: {error}"
    )
