"""Binding the current client and actor for code a backend runs (a job, an actor call).

Inside a job or an actor, ``fray.current_client()`` must answer the client that runs it and
``fray.current_actor()`` the actor itself. Both read one context variable: a backend binds it
around user code, as a ``with`` block or, on hot paths, as a token pair.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

from fray import _bound, _client
from fray._actor import ActorContext
from fray._bound import Bound

__all__ = [
    "backend_factories",
    "bind_actor",
    "bind_actor_call",
    "bind_client",
    "binding",
    "current_actor_context",
    "explain_current_client",
    "forget_default_client",
    "isolated_shared_clients",
    "unbind_actor",
    "unbind_client",
]


# ``current_client()`` and ``current_actor()`` read one context variable, a (client, actor)
# pair (``fray._bound``). The resets below, and ``bind_actor_call``, are the variable's own
# ``reset`` and ``set``, not functions that call them: an actor call binds and unbinds on
# every call, and a Python frame around each would cost more than the variable itself.

bind_client: Callable[[Any], contextvars.Token[Bound]] = _bound.bind_client
"""``bind_client(client)`` makes ``client`` the current client in this context and returns a
token; undo with :func:`unbind_client`."""

unbind_client: Callable[[contextvars.Token[Bound]], None] = _bound.bound.reset
"""``unbind_client(token)`` undoes :func:`bind_client`."""

bind_actor: Callable[[ActorContext | None], contextvars.Token[Bound]] = _bound.bind_actor
"""``bind_actor(context)`` makes ``context`` what ``current_actor()`` answers in this context
and returns a token; undo with :func:`unbind_actor`."""

unbind_actor: Callable[[contextvars.Token[Bound]], None] = _bound.bound.reset
"""``unbind_actor(token)`` undoes :func:`bind_actor` or :func:`bind_actor_call`."""

bind_actor_call: Callable[[Bound], contextvars.Token[Bound]] = _bound.bound.set
"""``bind_actor_call((client, context))`` binds both for one actor call with a single
``set``, the cheapest binding there is (``bind_client`` then ``bind_actor`` takes two); it
returns a token, undone with :func:`unbind_actor`."""


def current_actor_context() -> ActorContext | None:
    """The actor bound here, or ``None`` (``current_actor()`` without the error)."""
    return _bound.bound.get()[1]


@contextlib.contextmanager
def binding(client: Any = None, actor: ActorContext | None = None) -> Iterator[None]:
    """Binds ``client`` (if given) and ``actor`` (if given) for the ``with`` block."""
    current = _bound.bound.get()
    token = _bound.bound.set(
        (current[0] if client is None else client, current[1] if actor is None else actor)
    )
    try:
        yield
    finally:
        _bound.bound.reset(token)


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
