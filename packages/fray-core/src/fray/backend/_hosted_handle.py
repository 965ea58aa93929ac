"""Hosted actors, the calling side: the handle, its methods, pooled authenticated
connections, and long-running operations (``method.submit``) that survive a dropped
connection (the caller reconnects and polls again); ``result(timeout)`` cancels the operation
on the server when the timeout passes."""

from __future__ import annotations

import contextlib
import pickle
import secrets
import socket
import threading
import time
from concurrent.futures import Future, InvalidStateError
from typing import Any

from fray.backend._wire import (
    LOCAL_SERVERS,
    NONCE_BYTES,
    CallFuture,
    digest,
    recv_exact,
    recv_frame,
    send,
)
from fray.errors import ActorError, ActorUnavailableError, JobTimeoutError

__all__ = ["HostedActorHandle", "HostedActorMethod"]

_CONNECT_TIMEOUT = 10.0
_HANDSHAKE_TIMEOUT = 10.0
_POLL_WAIT = 10.0  # seconds one poll waits on the server for the operation to finish
_RECONNECT_WINDOW = 120.0  # how long submit() keeps trying to reach a server it lost


_POOL: dict[tuple[tuple[str, int], str], list[socket.socket]] = {}
_POOL_LOCK = threading.Lock()


class _Refused(ActorError):
    pass


def _connect(name: str, address: tuple[str, int], token: str) -> socket.socket:
    try:
        sock = socket.create_connection(address, timeout=_CONNECT_TIMEOUT)
    except OSError as exc:
        raise ActorUnavailableError(
            f"hosted actor {name} at {address[0]}:{address[1]} is not serving "
            f"({exc.strerror or exc}): it was shut down, or the process hosting it ended"
        ) from None
    try:
        sock.settimeout(_HANDSHAKE_TIMEOUT)
        nonce = recv_exact(sock, NONCE_BYTES)
        sock.sendall(digest(token, nonce))
        verdict = recv_exact(sock, 1)
    except OSError as exc:
        sock.close()
        raise ActorUnavailableError(
            f"hosted actor {name} at {address[0]}:{address[1]} dropped the connection "
            f"during the handshake ({exc})"
        ) from None
    if verdict != b"\x01":
        sock.close()
        raise _Refused(
            f"hosted actor {name} at {address[0]}:{address[1]} refused the call: the caller "
            "does not hold the handle's secret"
        )
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class _Lost(Exception):
    """The connection broke after the request may have reached the server."""


def _exchange(handle: HostedActorHandle, request: tuple[Any, ...]) -> tuple[Any, ...]:
    """One request and its reply on a pooled (or new) connection.

    Raises:
        ActorUnavailableError: The server cannot be reached.
        _Lost: The connection broke mid-exchange.
    """
    key = (handle._address, handle._token)  # pyright: ignore[reportPrivateUsage]
    with _POOL_LOCK:
        idle = _POOL.get(key)
        sock = idle.pop() if idle else None
    if sock is None:
        sock = _connect(handle.name, *key)
    try:
        send(sock, request)
        data = recv_frame(sock)
    except (OSError, EOFError) as exc:
        sock.close()
        raise _Lost(str(exc)) from None
    except Exception:  # the request does not pickle: nothing was sent
        _give_back(key, sock)
        raise
    _give_back(key, sock)
    try:
        return pickle.loads(data)
    except Exception as exc:  # e.g. the value's class is not importable here
        raise ActorError(
            f"hosted actor {handle.name}: could not read its reply: {type(exc).__name__}: {exc}"
        ) from exc


def _give_back(key: tuple[tuple[str, int], str], sock: socket.socket) -> None:
    with _POOL_LOCK:
        _POOL.setdefault(key, []).append(sock)


def _outcome(reply: tuple[Any, ...]) -> Any:
    if reply[0] == "ok":
        return reply[1]
    if reply[0] == "error":
        raise reply[1]
    raise ActorError(f"unexpected reply {reply[0]!r} from a hosted actor")


def _local_target(handle: HostedActorHandle) -> Any:
    """The instance behind ``handle`` when its server lives in this process."""
    server = LOCAL_SERVERS.get(handle._address)  # pyright: ignore[reportPrivateUsage]
    if server is None or server.token != handle._token:  # pyright: ignore[reportPrivateUsage]
        return None
    return server.target


class _Operation(CallFuture):
    """A long-running call (``method.submit``): started on the server, then polled."""

    def __init__(self, handle: HostedActorHandle, method: str, args: Any, kwargs: Any) -> None:
        super().__init__()
        self._handle = handle
        self._op_id: str | None = None
        self._abandoned = threading.Event()
        threading.Thread(
            target=self._drive,
            args=(method, args, kwargs),
            name=f"fray-submit-{handle.name}.{method}",
            daemon=True,
        ).start()

    def _drive(self, method: str, args: Any, kwargs: Any) -> None:
        try:
            value = self._follow(method, args, kwargs)
        except BaseException as exc:
            if not self.done():
                self.set_exception(exc)
        else:
            if not self.done():
                self.set_result(value)

    def _follow(self, method: str, args: Any, kwargs: Any) -> Any:
        """Starts the operation (under an id of our own, so a start resent after a dropped
        connection runs it once), then polls it until it has an outcome."""
        handle = self._handle
        self._op_id = op_id = secrets.token_hex(12)
        started = contacted = False
        lost_since: float | None = None
        while not self._abandoned.is_set():
            try:
                if not started:
                    reply = _exchange(handle, ("start", op_id, method, args, kwargs))
                    if reply[0] != "started":
                        return _outcome(reply)
                    started = contacted = True
                    lost_since = None
                    continue
                reply = _exchange(handle, ("poll", op_id, _POLL_WAIT))
            except (_Lost, ActorUnavailableError) as exc:
                if not contacted and isinstance(exc, ActorUnavailableError):
                    raise  # never reached: not serving
                contacted = True
                now = time.monotonic()
                lost_since = lost_since or now
                if now - lost_since > _RECONNECT_WINDOW:
                    raise ActorUnavailableError(
                        f"lost hosted actor {handle.name} for {_RECONNECT_WINDOW:.0f}s while "
                        f"{method} (operation {op_id}) ran: {exc}"
                    ) from None
                self._abandoned.wait(min(1.0, 0.05 * 2 ** min(int(now - lost_since), 5)))
                continue
            lost_since = None
            if reply[0] == "pending":
                continue
            if reply[0] == "unknown":
                raise ActorUnavailableError(
                    f"hosted actor {handle.name} no longer knows operation {op_id} "
                    f"({method}): its server restarted or dropped it; the outcome is lost"
                )
            self._send_quietly(("forget", op_id))
            return _outcome(reply)
        return None

    def _send_quietly(self, request: tuple[Any, ...]) -> None:
        with contextlib.suppress(_Lost, ActorError):
            _exchange(self._handle, request)

    def result(self, timeout: float | None = None) -> Any:
        try:
            return super().result(timeout)
        except JobTimeoutError:
            self.cancel_on_server()
            raise

    def cancel_on_server(self) -> None:
        """Stops following the operation and cancels it on the server; ``result()`` then
        raises ``ActorError``."""
        self._abandoned.set()
        with contextlib.suppress(InvalidStateError):
            self.set_exception(
                ActorError(f"the call to {self._handle.name} was cancelled (its result timed out)")
            )
        if self._op_id is not None:
            self._send_quietly(("cancel", self._op_id))


class HostedActorMethod:
    """``handle.method`` of a hosted actor: call it, ``.remote()`` it, or ``.submit()`` it
    for a long-running call that survives dropped connections."""

    __slots__ = ("_handle", "_method")

    def __init__(self, handle: HostedActorHandle, method: str) -> None:
        self._handle = handle
        self._method = method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls and waits."""
        target = _local_target(self._handle)
        if target is not None:
            return target.invoke(self._method, args, kwargs).result()
        return self._call(args, kwargs)

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            reply = _exchange(self._handle, ("call", self._method, args, kwargs))
        except _Lost as exc:
            raise ActorUnavailableError(
                f"lost the connection to hosted actor {self._handle.name} during "
                f"{self._method}: {exc} (use .submit() for calls that must survive it)"
            ) from None
        return _outcome(reply)

    def remote(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """Starts the call; returns a future."""
        target = _local_target(self._handle)
        if target is not None:
            return target.invoke(self._method, args, kwargs)
        future: CallFuture = CallFuture()

        def run() -> None:
            try:
                future.set_result(self._call(args, kwargs))
            except BaseException as exc:
                future.set_exception(exc)

        threading.Thread(target=run, name=f"fray-call-{self._handle.name}", daemon=True).start()
        return future

    def submit(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """Starts a long-running call: the server runs it, this side polls for it,
        reconnecting if the connection drops. ``result(timeout)`` cancels it on the server
        when ``timeout`` passes.

        Raises (from ``result``):
            ActorUnavailableError: The server no longer knows the operation, or stayed
                unreachable too long.
        """
        return _Operation(self._handle, self._method, args, kwargs)


class HostedActorHandle:
    """Handle to a hosted actor: picklable (name, address, secret), callable from any
    process that reaches the address."""

    __slots__ = ("_address", "_name", "_token")

    def __init__(self, name: str, address: tuple[str, int], token: str) -> None:
        self._name = name
        self._address: tuple[str, int] = (address[0], address[1])
        self._token = token

    @property
    def name(self) -> str:
        """The hosted actor's name."""
        return self._name

    @property
    def address(self) -> tuple[str, int]:
        """Where its server listens."""
        return self._address

    def __getattr__(self, method: str) -> HostedActorMethod:
        if method.startswith("_"):
            raise AttributeError(method)
        return HostedActorMethod(self, method)

    @property
    def __call__(self) -> HostedActorMethod:  # pyright: ignore[reportIncompatibleMethodOverride]
        """The actor's own ``__call__``."""
        return HostedActorMethod(self, "__call__")

    def __reduce__(self) -> tuple[Any, ...]:
        return (HostedActorHandle, (self._name, self._address, self._token))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, HostedActorHandle)
            and other._address == self._address
            and other._name == self._name
        )

    def __hash__(self) -> int:
        return hash((self._name, self._address))

    def __repr__(self) -> str:
        return f"HostedActorHandle({self._name!r}, {self._address[0]}:{self._address[1]})"
