"""Backend-independent actor helpers: ``current_actor()``, ``ActorContext`` and
``HostedActor``."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from fray._bound import bound


@dataclasses.dataclass(frozen=True)
class ActorContext:
    """Who the running actor is, and how it ends itself; see :func:`current_actor`.

    Attributes:
        handle: A handle to this actor itself (picklable; give it to others).
        index: Its index in the group ``group_name`` (a hosted actor: 0, of its own name).
        shutdown_event: Set it to end this actor cleanly: it takes no more calls and its
            status becomes SUCCEEDED, with no restart.
    """

    handle: Any
    index: int
    group_name: str
    shutdown_event: threading.Event | None = None
    _errors: list[BaseException] = dataclasses.field(
        default_factory=list[BaseException], repr=False
    )

    def fail(self, exc: BaseException) -> None:
        """Ends this actor as FAILED with ``exc``: in a group, the group's retry policy
        (``ActorConfig.max_restarts``) restarts it if restarts are left; a hosted actor
        stops serving. Returns at once; the actor ends soon after."""
        self._errors.append(exc)
        if self.shutdown_event is not None:
            self.shutdown_event.set()

    @property
    def failure(self) -> BaseException | None:
        """The first error given to :meth:`fail`, if any."""
        return self._errors[0] if self._errors else None


class ShutdownEvent(threading.Event):
    """An actor's ``shutdown_event``: setting it calls ``on_set`` once, in a thread of its
    own (so the setter never waits on the actor's ending), or in the setter's thread with
    ``inline`` (a backend whose calls are synchronous anyway)."""

    def __init__(self, on_set: Callable[[], None], name: str, *, inline: bool = False) -> None:
        super().__init__()
        self._on_set = on_set
        self._name = name
        self._inline = inline
        self._once = threading.Lock()
        self._fired = False

    def set(self) -> None:
        super().set()
        with self._once:
            if self._fired:
                return
            self._fired = True
        if self._inline:
            self._on_set()
            return
        threading.Thread(
            target=self._on_set, name=f"fray-actor-end-{self._name}", daemon=True
        ).start()


def restart_allowed(restarts: int, max_restarts: int | None) -> bool:
    """Whether an actor that has restarted ``restarts`` times may restart again after
    ``fail()`` (``max_restarts`` ``None`` is -1, forever, as for a preemptible Ray actor)."""
    limit = -1 if max_restarts is None else max_restarts
    return limit == -1 or restarts < limit


class HostedActor:
    """An actor served from the process that called ``client.host_actor(...)``; its
    ``handle`` is a normal actor handle, callable from jobs and actors anywhere."""

    def __init__(self, handle: Any, stop: Callable[[], None] | None = None) -> None:
        self.handle = handle
        self._stop: Callable[[], None] | None = stop or (lambda: None)
        self._lock = threading.Lock()

    def shutdown(self) -> None:
        """Stops serving; later calls through any copy of the handle raise ``ActorError``.
        Calling it again does nothing."""
        with self._lock:
            stop, self._stop = self._stop, None
        if stop is not None:
            stop()

    def __enter__(self) -> HostedActor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        state = "serving" if self._stop is not None else "shut down"
        return f"HostedActor({self.handle!r}, {state})"


def current_actor() -> ActorContext:
    """The actor whose ``__init__`` or method is running in this thread.

    Raises:
        RuntimeError: Called outside an actor.
    """
    ctx = bound.get()[1]
    if ctx is None:
        raise RuntimeError("current_actor() was called outside an actor's __init__ or method")
    return ctx
