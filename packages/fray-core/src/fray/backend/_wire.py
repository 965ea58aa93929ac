"""The wire of hosted actors: length-prefixed pickles on a socket, the secret's challenge,
the futures calls return, and the servers living in this process."""

from __future__ import annotations

import hashlib
import hmac
import pickle
import socket
import struct
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from fray.errors import JobTimeoutError

__all__ = ["LOCAL_SERVERS", "NONCE_BYTES", "CallFuture", "digest", "recv", "recv_exact", "send"]

_HEADER = struct.Struct("!Q")
NONCE_BYTES = 32
_DOMAIN = b"fray-hosted-actor/1"

#: The servers of this process by address (``ActorServer``s, with ``token`` and ``target``).
#: A handle whose server is here calls the instance directly.
LOCAL_SERVERS: dict[tuple[str, int], Any] = {}
LOCAL_SERVERS_LOCK = threading.Lock()


def send(sock: socket.socket, obj: Any) -> None:
    """Writes ``obj`` as one frame: its length, then its pickle."""
    import cloudpickle

    data = cloudpickle.dumps(obj)
    if len(data) < 1 << 16:
        sock.sendall(_HEADER.pack(len(data)) + data)  # one segment for small messages
    else:
        sock.sendall(_HEADER.pack(len(data)))
        sock.sendall(data)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionResetError("the connection was closed")
        got += k
    return bytes(buf)


def recv_frame(sock: socket.socket) -> bytes:
    """Reads one frame's bytes (a pickle)."""
    (size,) = _HEADER.unpack(recv_exact(sock, _HEADER.size))
    return recv_exact(sock, size)


def recv(sock: socket.socket) -> Any:
    """Reads one frame and unpickles it."""
    return pickle.loads(recv_frame(sock))


def digest(token: str, nonce: bytes) -> bytes:
    return hmac.new(token.encode(), _DOMAIN + nonce, hashlib.sha256).digest()


class CallFuture(Future[Any]):
    """The future of a hosted actor call; its timeout is a ``JobTimeoutError``."""

    def result(self, timeout: float | None = None) -> Any:
        try:
            return super().result(timeout)
        except FutureTimeout:
            if self.done():
                raise
            raise JobTimeoutError(f"actor call did not finish within {timeout}s") from None
