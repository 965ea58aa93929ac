"""The wire of hosted actors: length-prefixed pickles on a socket, the secret's challenge,
the futures calls return, and the servers living in this process."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import struct
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from fray.errors import JobTimeoutError

_HEADER = struct.Struct("!Q")
_NONCE = 32  # bytes, as many as a digest has

#: The servers of this process by address (``ActorServer``s, with ``token`` and ``answer``).
#: A handle whose server is here asks it directly, with no socket and no pickle.
LOCAL_SERVERS: dict[tuple[str, int], Any] = {}


def send(sock: socket.socket, obj: Any) -> None:
    """Writes ``obj`` as one frame: its length, then its pickle."""
    import cloudpickle

    data = cloudpickle.dumps(obj)
    sock.sendall(_HEADER.pack(len(data)) + data)


def recv(sock: socket.socket, size: int | None = None) -> bytes:
    """Reads ``size`` bytes, or (without it) one frame: the bytes of a pickle."""
    if size is None:
        size = int(_HEADER.unpack(recv(sock, _HEADER.size))[0])
    data = b""
    while len(data) < size:
        if not (chunk := sock.recv(size - len(data), socket.MSG_WAITALL)):
            raise ConnectionResetError("the connection was closed")
        data += chunk
    return data


def alive(sock: socket.socket) -> bool:
    """Whether a connection waiting for its peer is open: nothing to read, not even its end."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def _digest(token: str, side: bytes, nonce: bytes) -> bytes:
    return hmac.new(token.encode(), b"fray-hosted-actor/2" + side + nonce, hashlib.sha256).digest()


def authenticate(sock: socket.socket, token: str, *, server: bool) -> bool:
    """Whether the other end of ``sock`` holds ``token``; each side proves it holds it by
    the HMAC of a nonce the other side chose, before either sends a pickle."""
    sock.settimeout(10.0)  # for the handshake
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    mine = secrets.token_bytes(_NONCE)
    if server:
        sock.sendall(mine)
        answer, theirs = recv(sock, _NONCE), recv(sock, _NONCE)
        ok = hmac.compare_digest(answer, _digest(token, b"c", mine))
        sock.sendall(_digest(token, b"s", theirs) if ok else bytes(_NONCE))
    else:
        theirs = recv(sock, _NONCE)
        sock.sendall(_digest(token, b"c", theirs) + mine)
        ok = hmac.compare_digest(recv(sock, _NONCE), _digest(token, b"s", mine))
    sock.settimeout(None)
    return ok


class CallFuture(Future[Any]):
    """The future of a hosted actor call; its timeout is a ``JobTimeoutError``."""

    def result(self, timeout: float | None = None) -> Any:
        try:
            return super().result(timeout)
        except FutureTimeout:
            if self.done():
                raise
            raise JobTimeoutError(f"actor call did not finish within {timeout}s") from None
