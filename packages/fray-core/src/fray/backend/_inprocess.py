"""An actor whose instance lives in this process (the local and fake backends, hosted
actors): its context, and its own ending through ``shutdown_event`` and ``fail``."""

from __future__ import annotations

import logging
from typing import Any

from fray._actor import ActorContext, ShutdownEvent, restart_allowed
from fray._types import ActorConfig, JobStatus
from fray.backend._group import ActorMember
from fray.errors import ActorDiedError

__all__ = ["InProcessMember"]

logger = logging.getLogger("fray.actors")


class InProcessMember(ActorMember):
    """One in-process actor of a group. Setting its context's ``shutdown_event`` ends it:
    SUCCEEDED, or after ``fail(exc)`` a restart (a fresh ``__init__``, through the hook
    :meth:`restart`) while ``max_restarts`` allows, else FAILED; a hosted actor is never
    restarted. The backend writes :meth:`restart` and :meth:`finish`.

    Attributes:
        group_name: Its group's name.
        config: Its ``ActorConfig``.
        hosted: Whether it was made by ``host_actor``.
        restarts: Restarts so far.
        instance: The user's instance (``None`` until ``__init__`` has run).
        init: ``(class, args, kwargs)`` once ``__init__`` has been called, for restarts.
        context: What ``current_actor()`` answers inside it.
    """

    #: Whether the ending runs in the thread that set the event (backends whose calls are
    #: synchronous) rather than in a thread of its own.
    inline_end = False

    def __init__(
        self,
        index: int,
        name: str,
        handle: Any,
        group: str,
        config: ActorConfig,
        *,
        hosted: bool = False,
    ) -> None:
        super().__init__(index, name, handle)
        self.group_name = group
        self.config = config
        self.hosted = hosted
        self.restarts = 0
        self.instance: Any = None
        self.init: tuple[type[Any], tuple[Any, ...], dict[str, Any]] | None = None
        self.context = self.new_context()

    def new_context(self) -> ActorContext:
        """A fresh context whose ``shutdown_event`` ends this actor."""
        event = ShutdownEvent(self.ended, self.name, inline=self.inline_end)
        return ActorContext(self.handle, self.index, self.group_name, event)

    def ended(self) -> None:
        """The actor set its ``shutdown_event`` (itself, or through ``fail``)."""
        failure = self.context.failure
        if (
            failure is not None
            and not self.hosted
            and self.init is not None
            and restart_allowed(self.restarts, self.config.max_restarts)
        ):
            self.restarts += 1
            logger.warning(
                "actor %s failed (%s: %s); restarting it (restart %d)",
                self.name,
                type(failure).__name__,
                failure,
                self.restarts,
            )
            self.context = self.new_context()
            self.restart(*self.init)
            return
        if failure is None:
            self.finish(JobStatus.SUCCEEDED, None)
            return
        error = ActorDiedError(f"actor {self.name} failed: {type(failure).__name__}: {failure}")
        error.__cause__ = failure
        self.finish(JobStatus.FAILED, error)

    # -- hooks -------------------------------------------------------------------------------

    def restart(self, cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Replaces the instance with a fresh ``cls(*args, **kwargs)`` (PENDING meanwhile)."""
        raise NotImplementedError

    def finish(self, status: JobStatus, error: BaseException | None) -> None:
        """Ends the actor with ``status``: it takes no more calls."""
        raise NotImplementedError
