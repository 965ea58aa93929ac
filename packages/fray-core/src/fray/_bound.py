"""The one context variable behind ``current_client()`` and ``current_actor()``.

It holds a ``(client, actor context)`` pair, ``(None, None)`` where nothing is bound. One
variable for both lets a backend bind an actor call (the actor's client and its context)
with a single ``set`` and ``reset``: setting a context variable is the costliest step of a
local actor call, and a second variable doubled it. Binding one half keeps the other half
of the binding around it, so nesting reads as with two variables; tokens are undone in the
reverse order they were taken, as every ``with`` block does.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fray._actor import ActorContext

__all__ = ["Bound", "bind_actor", "bind_client", "bound"]

Bound = tuple[Any, "ActorContext | None"]
"""``(client, actor context)``: what ``current_client()`` (when set) and ``current_actor()``
answer."""

bound: contextvars.ContextVar[Bound] = contextvars.ContextVar("fray_bound", default=(None, None))


def bind_client(client: Any) -> contextvars.Token[Bound]:
    """Binds ``client``, keeping the actor bound around it; returns the token."""
    return bound.set((client, bound.get()[1]))


def bind_actor(context: ActorContext | None) -> contextvars.Token[Bound]:
    """Binds ``context``, keeping the client bound around it; returns the token."""
    return bound.set((bound.get()[0], context))
