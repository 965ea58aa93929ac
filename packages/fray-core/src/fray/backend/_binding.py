"""Binding the current client and actor for code a backend runs (a job, an actor call).

Inside a job or an actor, ``fray.current_client()`` must answer the client that runs it and
``fray.current_actor()`` the actor itself. These are context variables: a backend binds them
around user code, as a ``with`` block or, on hot paths, as a token pair.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

from fray import _actor, _client
from fray._actor import ActorContext

__all__ = [
    "backend_factories",
    "bind_actor",
    "bind_client",
    "binding",
    "current_actor_context",
    "explain_current_client",
    "forget_default_client",
    "isolated_shared_clients",
    "unbind_actor",
    "unbind_client",
]


# The four below are the context variables' own ``set`` and ``reset``, not functions that
# call them: an actor call binds and unbinds both on every call, and a Python frame around
# each would cost more than the variables themselves.

bind_client: Callable[[Any], contextvars.Token[Any]] = _client._explicit.set
"""``bind_client(client)`` makes ``client`` the current client in this context and returns a
token; undo with :func:`unbind_client`."""

unbind_client: Callable[[contextvars.Token[Any]], None] = _client._explicit.reset
"""``unbind_client(token)`` undoes :func:`bind_client`."""

bind_actor: Callable[[ActorContext | None], contextvars.Token[ActorContext | None]]
bind_actor = _actor._current.set
"""``bind_actor(context)`` makes ``context`` what ``current_actor()`` answers in this context
and returns a token; undo with :func:`unbind_actor`."""

unbind_actor: Callable[[contextvars.Token[ActorContext | None]], None] = _actor._current.reset
"""``unbind_actor(token)`` undoes :func:`bind_actor`."""


def current_actor_context() -> ActorContext | None:
    """The actor bound here, or ``None`` (``current_actor()`` without the error)."""
    return _actor._current.get()


@contextlib.contextmanager
def binding(client: Any = None, actor: ActorContext | None = None) -> Iterator[None]:
    """Binds ``client`` (if given) and ``actor`` (if given) for the ``with`` block."""
    client_token = _client._explicit.set(client) if client is not None else None
    actor_token = _actor._current.set(actor) if actor is not None else None
    try:
        yield
    finally:
        if actor_token is not None:
            _actor._current.reset(actor_token)
        if client_token is not None:
            _client._explicit.reset(client_token)


def explain_current_client() -> tuple[Any, str]:
    """``current_client()`` and why it was chosen (for diagnostics: ``fray doctor``)."""
    return _client.explain_current_client()


def forget_default_client(client: Any) -> None:
    """Drops ``client`` from the per-process clients ``current_client()`` shares (call it
    from ``shutdown()``, so the next ``current_client()`` builds a fresh one)."""
    _client.forget_default(client)


def backend_factories() -> dict[str, Any]:
    """The live table of backends registered with ``fray.register_backend`` (scheme →
    factory), for tools that swap a backend out for a while (``fray_testing``)."""
    return _client._REGISTERED


@contextlib.contextmanager
def isolated_shared_clients() -> Iterator[None]:
    """Inside the block, ``current_client()`` shares none of the clients it built before
    (they come back after it); clients built inside are dropped at its end."""
    saved = _client._defaults
    _client._defaults = {}
    try:
        yield
    finally:
        _client._defaults = saved
