"""Backend-independent actor helpers: ``current_actor()`` and ``ActorContext``."""

from __future__ import annotations

import contextvars
import dataclasses
from typing import Any

__all__ = ["ActorContext", "current_actor"]


@dataclasses.dataclass(frozen=True)
class ActorContext:
    """Who the running actor is; see :func:`current_actor`.

    Attributes:
        handle: A handle to this actor itself (picklable; give it to others).
        index: This actor's index in its group, from 0.
        group_name: The group's name (actors are named ``{group_name}-{index}``).
    """

    handle: Any
    index: int
    group_name: str


_current: contextvars.ContextVar[ActorContext | None] = contextvars.ContextVar(
    "fray_current_actor", default=None
)


def current_actor() -> ActorContext:
    """The actor whose ``__init__`` or method is running in this thread.

    Raises:
        RuntimeError: Called outside an actor.
    """
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError("current_actor() was called outside an actor's __init__ or method")
    return ctx
