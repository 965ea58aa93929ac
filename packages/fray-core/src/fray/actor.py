"""Actors at the predecessor's ``fray.actor`` path: the protocols, ``ActorContext`` and
``current_actor``, plus the pair Zephyr's tests use to fake an actor context."""

from __future__ import annotations

import contextvars

from fray._actor import ActorContext, HostedActor, current_actor
from fray._bound import Bound, bind_actor, bound
from fray._protocols import ActorFuture, ActorGroup, ActorHandle, ActorMethod
from fray.errors import ActorUnavailableError

__all__ = [
    "ActorContext",
    "ActorFuture",
    "ActorGroup",
    "ActorHandle",
    "ActorMethod",
    "ActorUnavailableError",
    "HostedActor",
    "current_actor",
]


def _set_current_actor(  # pyright: ignore[reportUnusedFunction]
    context: ActorContext,
) -> contextvars.Token[Bound]:
    """Makes ``current_actor()`` return ``context`` here; undo with
    :func:`_reset_current_actor` (for tests that run actor code outside an actor)."""
    return bind_actor(context)


def _reset_current_actor(  # pyright: ignore[reportUnusedFunction]
    token: contextvars.Token[Bound],
) -> None:
    """Undoes :func:`_set_current_actor`."""
    bound.reset(token)
