"""The actor group, written once over its members' states, and the checks every backend's
``create_actor_group`` makes."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from typing import Any

from fray._model import whole
from fray._types import ActorConfig, JobStatus, ResourceConfig
from fray.errors import ActorError, InvalidRequestError, JobTimeoutError

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_GONE = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED)
_ENDED_CLEANLY = (JobStatus.SUCCEEDED, JobStatus.STOPPED)


def validate_actor_args(
    actor_class: Any, name: Any, count: Any, resources: Any, actor_config: Any
) -> None:
    """The checks of ``create_actor``/``create_actor_group``'s arguments.

    Raises:
        InvalidRequestError: Naming the argument, its value and what is allowed.
    """
    if not isinstance(actor_class, type):
        raise InvalidRequestError.for_field("actor_class", actor_class, "must be a class")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidRequestError.for_field(
            "name", name, "actor names are 1-128 letters, digits, '-', '_' and '.'"
        )
    if not whole(count, 1):
        raise InvalidRequestError.for_field("count", count, "must be an integer >= 1")
    if resources is not None and not isinstance(resources, ResourceConfig):
        raise InvalidRequestError.for_field("resources", resources, "must be a ResourceConfig")
    if actor_config is not None and not isinstance(actor_config, ActorConfig):
        raise InvalidRequestError.for_field("actor_config", actor_config, "must be an ActorConfig")


class ActorMember:
    """One actor of a group, as its group sees it: ``index``, ``name`` (``{group}-{index}``),
    ``handle`` and a state. Backends subclass it to hold what they need (a Ray ready-ref, an
    Iris job) and report changes with :meth:`set_status`.

    Attributes:
        status: PENDING until its ``__init__`` has run, then RUNNING; at its end SUCCEEDED
            (it set its ``shutdown_event``), FAILED or STOPPED.
        error: What made it FAILED, if known.
    """

    def __init__(self, index: int, name: str, handle: Any) -> None:
        self.index = index
        self.name = name
        self.handle = handle
        self.status = JobStatus.PENDING
        self.error: BaseException | None = None
        self._group: BaseActorGroup | None = None

    @property
    def pending_reason(self) -> str | None:
        """Why this PENDING actor waits to be placed (what it asks for, what the cluster
        has), read from the backend when asked; ``None`` once it is placed, or where its
        backend cannot tell."""
        group = self._group
        if group is None or self.status is not JobStatus.PENDING:
            return None
        return group._pending_reasons([self]).get(self.index)  # pyright: ignore[reportPrivateUsage]

    def set_status(self, status: JobStatus, error: BaseException | None = None) -> bool:
        """Moves the member on (an ended member stays so); returns whether it
        changed, and wakes whoever waits on its group."""
        group = self._group
        if group is None:
            return self._apply(status, error)
        with group._cond:  # pyright: ignore[reportPrivateUsage]
            changed = self._apply(status, error)
            if changed:
                group._cond.notify_all()  # pyright: ignore[reportPrivateUsage]
        return changed

    def _apply(self, status: JobStatus, error: BaseException | None) -> bool:
        if self.status in _GONE or self.status is status:
            return False
        self.status = status
        if error is not None:
            self.error = error
        return True


class BaseActorGroup:
    """``count`` actors of one class: ``wait_ready``, ``discover_new``, ``statuses``,
    ``is_done`` and ``shutdown``, the same on every backend.

    A backend reports member changes through :meth:`ActorMember.set_status` and writes
    :meth:`_stop`; where states are learnt by asking (Ray, Iris), :meth:`_refresh` too.
    """

    def __init__(self, name: str, members: Sequence[ActorMember]) -> None:
        self.name = name
        self._members = list(members)
        self._cond = threading.Condition(threading.Lock())
        self._yielded: set[int] = set()
        self._stopped = False
        for member in self._members:
            member._group = self  # pyright: ignore[reportPrivateUsage]

    # -- hooks -------------------------------------------------------------------------------

    #: Whether member states are learnt by asking (:meth:`_refresh`) rather than reported
    #: as they change.
    polls = False

    def _refresh(self, timeout: float) -> None:
        """Where :attr:`polls`: learns member changes, waiting up to ``timeout`` for one
        (0: only look)."""

    def _stop(self, members: list[ActorMember]) -> None:
        """Stops these actors for good."""
        raise NotImplementedError

    def _pending_reasons(self, members: list[ActorMember]) -> dict[int, str]:
        """Why these PENDING members wait to be placed, by index, for those the backend
        can tell about (none by default). Read only when asked: by
        :attr:`ActorMember.pending_reason` and when ``wait_ready`` times out."""
        del members
        return {}

    # -- the group ---------------------------------------------------------------------------

    @property
    def members(self) -> list[ActorMember]:
        """The group's actors, by index."""
        return self._members

    def __len__(self) -> int:
        return len(self._members)

    @property
    def ready_count(self) -> int:
        """See ``fray.ActorGroup.ready_count``."""
        self._refresh(0)
        return len(self._running())

    def _running(self) -> list[ActorMember]:
        return [m for m in self._members if m.status is JobStatus.RUNNING]

    def wait_ready(self, count: int | None = None, timeout: float | None = 300.0) -> list[Any]:
        """See ``fray.ActorGroup.wait_ready``; the pending actors' reasons on a timeout are
        :meth:`_pending_reasons`."""
        total = len(self._members)
        want = total if count is None else count
        if not whole(want, 0, total):
            raise InvalidRequestError.for_field(
                "wait_ready.count", count, f"must be an integer from 0 to the group size {total}"
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        step = 0.0
        while True:
            self._refresh(step)
            with self._cond:
                if count is None:
                    want = sum(1 for m in self._members if m.status not in _ENDED_CLEANLY)
                ready = self._running()[:want]
                if len(ready) >= want:
                    self._yielded.update(m.index for m in ready)
                    return [m.handle for m in ready]
                self._raise_if_unreachable(want)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    pending = [m for m in self._members if m.status is JobStatus.PENDING]
                    break
                step = 0.25 if left is None else min(left, 0.25)
                if not self.polls:  # checked and waited under one lock: no change is missed
                    self._cond.wait(step)
        # Out of the lock: the backend may ask its cluster why the pending ones wait.
        raise JobTimeoutError(
            f"only {len(ready)}/{want} actors of {self.name} ready after {timeout}s"
            + _waiting(pending, self._pending_reasons(pending) if pending else {})
        )

    def _raise_if_unreachable(self, want: int) -> None:
        total = len(self._members)
        gone = [m for m in self._members if m.status in _GONE]
        if total - len(gone) >= want:
            return
        first = next((m for m in gone if m.error is not None), None)
        message = (
            f"only {total - len(gone)} of {total} actors of {self.name} can become ready, "
            f"{want} were asked for"
        )
        cause: BaseException | None = None
        if first is not None:
            message += f"; {first.name} failed: {type(first.error).__name__}: {first.error}"
            cause = first.error
            if isinstance(cause, ActorError) and cause.__cause__ is not None:
                cause = cause.__cause__
        raise ActorError(message) from cause

    def discover_new(self, target: int | None = None) -> list[Any]:
        """See ``fray.ActorGroup.discover_new``; with ``target``, up to that many returned in
        all (marin-fray's Iris groups took it)."""
        self._refresh(0)
        with self._cond:
            room = len(self._members) if target is None else max(target - len(self._yielded), 0)
            fresh = [m for m in self._running() if m.index not in self._yielded][:room]
            self._yielded.update(m.index for m in fresh)
        return [m.handle for m in fresh]

    def statuses(self) -> list[JobStatus]:
        """See ``fray.ActorGroup.statuses``."""
        self._refresh(0)
        return [m.status for m in self._members]

    def is_done(self) -> bool:
        """See ``fray.ActorGroup.is_done``."""
        return all(s in _GONE for s in self.statuses())

    def pool(self, **options: Any) -> Any:
        """See ``fray.ActorGroup.pool``."""
        from fray._pool import pool_over_group

        return pool_over_group(self, **options)

    def broadcast(
        self, method: str, /, *args: Any, timeout: float | None = None, **kwargs: Any
    ) -> list[Any]:
        """See ``fray.ActorGroup.broadcast``."""
        from fray._pool_parts import broadcast

        self._refresh(0)
        return broadcast(self._members, method, args, kwargs, timeout)

    def shutdown(self) -> None:
        """See ``fray.ActorGroup.shutdown``."""
        with self._cond:
            if self._stopped:
                return
            self._stopped = True
        self._stop(list(self._members))
        for member in self._members:
            member.set_status(JobStatus.STOPPED)

    def __repr__(self) -> str:
        ready = len(self._running())
        return f"{type(self).__name__}({self.name!r}, ready={ready}/{len(self._members)})"


def _waiting(pending: list[ActorMember], reasons: dict[int, str]) -> str:
    """``; a-1, a-2: <reason>`` per distinct reason (at most 5 names each)."""
    by_reason: dict[str, list[str]] = {}
    for member in pending:
        reason = reasons.get(member.index)
        if reason:
            by_reason.setdefault(reason, []).append(member.name)
    parts: list[str] = []
    for reason, names in by_reason.items():
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        parts.append(f"; {', '.join(names[:5])}{more}: {reason}")
    return "".join(parts)
