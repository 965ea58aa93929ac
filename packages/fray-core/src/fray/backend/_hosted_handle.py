"""Hosted actors, the calling side: the handle, its methods and pooled authenticated
connections (those whose server closed them are closed before each new one is made).
Every call is an operation the server runs under an id the caller chose; when
the connection drops, the caller reconnects and asks for it again. ``submit``'s
``result(timeout)`` cancels the operation on the server when the timeout passes."""

from __future__ import annotations

import contextlib
import dataclasses
import pickle
import secrets
import socket
import threading
import time
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import wait as wait_futures
from typing import Any

from fray.backend._wire import LOCAL_SERVERS, CallFuture, alive, authenticate, recv, send
from fray.errors import ActorError, ActorUnavailableError, JobTimeoutError

_POLL_WAIT = 10.0  # seconds one request waits on the server for the outcome
_RECONNECT_WINDOW = 120.0  # seconds a call keeps trying to reach a server it lost
_POOL: dict[tuple[tuple[str, int], str], list[socket.socket]] = {}  # by (address, secret)
_POOL_LOCK = threading.Lock()


class _Lost(Exception):
    """The network failed: ``args`` are the error and whether the request was sent."""


class _NotPicklable(ActorError, TypeError):
    """A call's arguments do not pickle (a ``TypeError`` too, as pickle's own error is)."""


def _connect(handle: HostedActorHandle) -> socket.socket:
    where = f"hosted actor {handle.name} at {handle.address[0]}:{handle.address[1]}"
    try:
        sock = socket.create_connection(handle.address, timeout=10.0)
    except ConnectionRefusedError:
        raise ActorUnavailableError(
            f"{where} is not serving: it was shut down, or the process hosting it ended"
        ) from None
    except OSError as exc:
        raise _Lost(exc, False) from None
    try:
        if authenticate(sock, handle._token, server=False):
            return sock
    except OSError as exc:
        sock.close()
        raise _Lost(exc, False) from None
    sock.close()
    raise ActorError(f"{where} refused the call: the caller does not hold the handle's secret")


def _exchange(handle: HostedActorHandle, request: tuple[Any, ...]) -> tuple[Any, Any]:
    """One request and its reply: from the server itself when it is in this process."""
    server = LOCAL_SERVERS.get(handle.address)
    if server is not None and server.token == handle._token:
        return server.answer(None, *request)
    key = (handle.address, handle._token)
    with _POOL_LOCK:
        idle = _POOL.get(key, [])
        # No live idle connection: before connecting, close every server's idle ones that
        # the server closed (its actor ended), so a driver that calls many actors holds
        # sockets only to those still serving; a call that finds one pays nothing more.
        if not (idle and alive(idle[-1])):
            for other, conns in list(_POOL.items()):
                conns[:] = [conn for conn in conns if alive(conn) or conn.close()]
                if not conns:
                    del _POOL[other]
        sock = idle.pop() if idle else None
    sock = sock or _connect(handle)
    try:
        send(sock, request)
        data = recv(sock)
    except Exception as exc:
        sock.close()
        if isinstance(exc, OSError):
            raise _Lost(exc, True) from None
        raise _NotPicklable(f"hosted actor {handle.name}: cannot pickle the call: {exc}") from exc
    with _POOL_LOCK:
        _POOL.setdefault(key, []).append(sock)
    try:
        return pickle.loads(data)
    except Exception as exc:  # e.g. the value's class is not importable here
        raise ActorError(f"hosted actor {handle.name}: could not read its reply: {exc!r}") from exc


class _Call(CallFuture):
    """One call: started on the server, then asked for until it has an outcome,
    reconnecting (for up to two minutes) when the connection drops."""

    def __init__(self, of: HostedActorMethod, args: Any, kwargs: Any, cancels: bool) -> None:
        super().__init__()
        self._handle, self._method, self._cancels = of._handle, of._method, cancels
        self._call, self._op_id = (of._method, args, kwargs), secrets.token_hex(12)

    def start(self) -> _Call:
        """Follows the call to its outcome in a thread of its own."""
        threading.Thread(target=self.drive, name=f"fray-call-{self._method}", daemon=True).start()
        return self

    def drive(self) -> _Call:
        """Follows the call to its outcome, in this thread."""
        try:
            self.set_result(self._follow())
        except BaseException as exc:
            with contextlib.suppress(InvalidStateError):  # cancelled
                self.set_exception(exc)
        return self

    def _follow(self) -> Any:
        call, lost_since = self._call, None
        while not self.done():  # done before it has an outcome: abandoned
            try:
                state, value = _exchange(self._handle, (self._op_id, call, _POLL_WAIT))
            except _Lost as exc:
                lost_since = lost_since or time.monotonic()
                if time.monotonic() - lost_since > _RECONNECT_WINDOW:
                    error = f"lost hosted actor {self._handle.name} for two minutes: {exc.args[0]}"
                    raise ActorUnavailableError(error) from None
                call = None if exc.args[1] else call  # it may have started: only ask for it now
                wait_futures([self], min(1.0, 0.05 + time.monotonic() - lost_since))
                continue
            call, lost_since = None, None
            if state == "ok":
                return value
            if state == "error":
                raise value

    def result(self, timeout: float | None = None) -> Any:
        try:
            return super().result(timeout)
        except JobTimeoutError:
            if self._cancels and not self.done():
                with contextlib.suppress(InvalidStateError):
                    self.set_exception(ActorError(f"the call to {self._handle.name} was cancelled"))
                with contextlib.suppress(_Lost, ActorError):
                    _exchange(self._handle, (self._op_id, "cancel", 0))
            raise


@dataclasses.dataclass(frozen=True)
class HostedActorMethod:
    """``handle.method`` of a hosted actor: call it, ``.remote()`` it, or ``.submit()`` it
    for a long-running call whose timeout cancels it."""

    _handle: HostedActorHandle
    _method: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls and waits."""
        return _Call(self, args, kwargs, False).drive().result()

    def remote(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """Starts the call; returns a future."""
        return _Call(self, args, kwargs, False).start()

    def submit(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """Starts a long-running call; its ``result(timeout)`` cancels it on the server
        when ``timeout`` passes, and raises ``ActorUnavailableError`` when the server no
        longer knows it or stayed unreachable too long."""
        return _Call(self, args, kwargs, True).start()


@dataclasses.dataclass(frozen=True)
class HostedActorHandle:
    """Handle to a hosted actor: picklable (``name``, the ``address`` its server listens
    on, and its secret), callable from any process that reaches the address."""

    name: str
    address: tuple[str, int]
    _token: str = dataclasses.field(repr=False, compare=False)

    def __getattr__(self, method: str) -> HostedActorMethod:
        if method.startswith("_"):
            raise AttributeError(method)
        return HostedActorMethod(self, method)

    @property
    def __call__(self) -> HostedActorMethod:  # pyright: ignore[reportIncompatibleMethodOverride]
        """The actor's own ``__call__``."""
        return HostedActorMethod(self, "__call__")
