"""Handles to actors that live in a process-wide registry (the in-process backends)."""

from __future__ import annotations

from typing import Any

__all__ = ["KeyedHandle"]


class KeyedHandle:
    """A handle that is its registry key (``<client>/<actor name>``): it pickles as the key,
    equals every handle of its class with the same key, and resolves the actor itself on
    first use (``_resolved``, written by the subclass), so a copy made by pickling in the
    same process reaches the same actor.
    """

    __slots__ = ("_key", "_resolved")

    def __init__(self, key: str) -> None:
        self._key = key
        self._resolved: Any = None

    @property
    def name(self) -> str:
        """The actor's name."""
        return self._key.rsplit("/", 1)[-1]

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._key,))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._key == self._key  # pyright: ignore[reportAttributeAccessIssue]

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
