"""Actors at the predecessor's ``fray.actor`` path: the protocols, ``ActorContext`` and
``current_actor``, plus the pair Zephyr's tests use to fake an actor context."""

from __future__ import annotations

from fray._actor import ActorContext, HostedActor, current_actor
from fray._bound import bind_actor, bound
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


# For tests that run actor code outside an actor: ``token = _set_current_actor(context)``
# makes ``current_actor()`` return ``context`` here, ``_reset_current_actor(token)`` undoes it.
_set_current_actor = bind_actor
_reset_current_actor = bound.reset
