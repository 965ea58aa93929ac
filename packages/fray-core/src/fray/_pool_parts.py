"""The pieces of an actor pool that stand on their own: its states, its status snapshot, the
future of one item, the checks of its options, and ``broadcast`` (one call to every member of
a group, at most 64 threads however many members)."""

from __future__ import annotations

import collections
import dataclasses
import enum
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any

from fray._model import whole
from fray._types import JobStatus
from fray.backend._wire import CallFuture
from fray.errors import ActorDiedError, ActorUnavailableError, InvalidRequestError, JobTimeoutError

__all__ = [
    "BROADCAST_THREADS",
    "MemberResult",
    "MemberState",
    "PoolFuture",
    "PoolOptions",
    "PoolState",
    "PoolStatus",
    "as_finished",
    "broadcast",
    "check_method",
    "check_pool_name",
    "check_seconds",
    "check_sizes",
    "in_order",
]

BROADCAST_THREADS = 64  # the most threads one broadcast uses, whatever the group's size
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class MemberState(enum.Enum):
    """Where one member of a pool stands, as the pool sees it."""

    STARTING = "starting"  #: its ``__init__`` has not finished yet
    READY = "ready"  #: it takes items
    RESTARTING = "restarting"  #: it died or could not be reached; the backend may bring it back
    DEAD = "dead"  #: it ended for good (failed, or ended itself)
    STOPPED = "stopped"  #: the pool stopped it (idle past ``idle_timeout``, or shut down)


class PoolState(enum.Enum):
    """Where the pool itself stands."""

    RUNNING = "running"  #: takes new items
    DRAINING = "draining"  #: ``shutdown`` was called; the items it holds still finish
    STOPPED = "stopped"  #: every item has ended and the pool's own members are stopped


@dataclasses.dataclass(frozen=True)
class PoolStatus:
    """A snapshot of a pool, from ``ActorPool.status()``.

    Attributes:
        state: The pool's own state.
        members_ready: Members taking items now.
        members_starting: Members whose ``__init__`` has not finished.
        members_restarting: Members that died or could not be reached and may come back.
        members_dead: Members that ended for good (the pool's own stopped ones not counted).
        queued: Items waiting for a member (re-dispatched ones included).
        in_flight: Calls running on members now.
        done: Items that returned a value.
        failed: Items that ended with an error (theirs, or the pool's).
        redispatched: Times an item was sent again to another member after its member died,
            could not be reached or (``idempotent``) took too long.
        members: Each member's name and state, oldest first.
    """

    state: PoolState
    members_ready: int
    members_starting: int
    members_restarting: int
    members_dead: int
    queued: int
    in_flight: int
    done: int
    failed: int
    redispatched: int
    members: tuple[tuple[str, MemberState], ...] = ()


@dataclasses.dataclass(frozen=True)
class MemberResult:
    """One member's answer to a broadcast.

    Attributes:
        member: The member's name (``{group}-{index}``).
        index: Its index in the group.
        value: What the method returned (``None`` where it failed).
        error: What it raised, or why it was not called (``ActorDiedError``: the member has
            ended; ``ActorUnavailableError``: it is not ready; ``JobTimeoutError``: no answer
            within the timeout); ``None`` on success.
    """

    member: str
    index: int
    value: Any = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        """Whether the member answered with a value."""
        return self.error is None

    def result(self) -> Any:
        """The value, or raises the member's error."""
        if self.error is not None:
            raise self.error
        return self.value


class PoolFuture(CallFuture):
    """The future of one pool item: a ``concurrent.futures.Future`` (``add_done_callback``,
    ``as_completed`` and ``wait`` work) whose ``result(timeout)`` raises ``JobTimeoutError``
    when the time runs out. ``cancel()`` succeeds while the item has not been sent yet."""


def _check_int(field: str, value: Any, low: int) -> int:
    if not whole(value, low):
        raise InvalidRequestError.for_field(field, value, f"must be an integer >= {low}")
    return value


def check_seconds(field: str, value: Any, *, optional: bool = False) -> float | None:
    """``value`` as seconds, checked: a number > 0 (or ``None`` where ``optional``).

    Raises:
        InvalidRequestError: Naming ``field``, its value and what is allowed.
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        allowed = "a number of seconds > 0" + (" or None" if optional else "")
        raise InvalidRequestError.for_field(field, value, f"must be {allowed}")
    return float(value)


def check_method(method: Any) -> str:
    """The method name of ``submit``/``map``/``broadcast``, checked.

    Raises:
        InvalidRequestError: It is not a non-empty string.
    """
    if not isinstance(method, str) or not method:
        raise InvalidRequestError.for_field(
            "method", method, "must be the name of a method of the actor class, as a string"
        )
    return method


def check_pool_name(name: Any) -> str:
    """A pool's name: its members are named ``{name}-{k}-0``.

    Raises:
        InvalidRequestError: Not 1-100 letters, digits, '-', '_' and '.'.
    """
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidRequestError.for_field(
            "name", name, "pool names are 1-100 letters, digits, '-', '_' and '.'"
        )
    return name


@dataclasses.dataclass(frozen=True)
class PoolOptions:
    """How a pool treats its items; every field is checked when it is built.

    Attributes:
        max_item_retries: Times an item is sent again after its member died or could not be
            reached; past it the item fails (a poison item cannot take every member down).
        idempotent: Whether an item that took longer than ``call_timeout`` (or that the
            backend timed out) may run again on another member; otherwise it fails.
        call_timeout: Seconds an item may run on a member (``None``: no limit).
        max_in_flight_per_member: Items sent to one member at a time.
        no_members_timeout: Seconds with no member ready, starting or restarting (and none
            that can be added) after which every pending item fails.
        idle_timeout: Seconds a member of a growing pool may sit idle before the pool stops
            it (never below ``min_workers``).
    """

    max_item_retries: int = 3
    idempotent: bool = False
    call_timeout: float | None = None
    max_in_flight_per_member: int = 1
    no_members_timeout: float = 60.0
    idle_timeout: float = 60.0

    def __post_init__(self) -> None:
        _check_int("max_item_retries", self.max_item_retries, 0)
        if not isinstance(self.idempotent, bool):
            raise InvalidRequestError.for_field("idempotent", self.idempotent, "must be a bool")
        check_seconds("call_timeout", self.call_timeout, optional=True)
        _check_int("max_in_flight_per_member", self.max_in_flight_per_member, 1)
        check_seconds("no_members_timeout", self.no_members_timeout)
        check_seconds("idle_timeout", self.idle_timeout)


def check_sizes(min_workers: Any, max_workers: Any) -> tuple[int, int]:
    """``min_workers`` and ``max_workers`` of ``create_actor_pool`` (``max_workers`` ``None``:
    the same as ``min_workers``, at least 1).

    Raises:
        InvalidRequestError: Naming the field and what is allowed.
    """
    low = _check_int("min_workers", min_workers, 0)
    if max_workers is None:
        return low, max(low, 1)
    high = _check_int("max_workers", max_workers, 1)
    if high < low:
        raise InvalidRequestError.for_field(
            "max_workers", max_workers, f"must be >= min_workers ({low})"
        )
    return low, high


class _Broadcast:
    """One broadcast: up to :data:`BROADCAST_THREADS` threads take the members in turn and
    call each once, blocking (an idle in-process actor runs the call in the caller's thread,
    so no thread per member is started anywhere)."""

    def __init__(self, call: Callable[[Any], Any], handles: list[tuple[int, Any]]) -> None:
        self._call = call
        self._handles = handles
        self._next = 0
        self._left = len(handles)
        self._answers: dict[int, tuple[Any, BaseException | None]] = {}
        self._lock = threading.Lock()
        self._all_in = threading.Event()
        self._closed = False

    def _take(self) -> tuple[int, Any] | None:
        with self._lock:
            if self._closed or self._next >= len(self._handles):
                return None
            self._next += 1
            return self._handles[self._next - 1]

    def _work(self) -> None:
        while (task := self._take()) is not None:
            position, handle = task
            try:
                answer: tuple[Any, BaseException | None] = (self._call(handle), None)
            except Exception as exc:
                answer = (None, exc)
            with self._lock:
                self._answers[position] = answer
                self._left -= 1
                if self._left == 0:
                    self._all_in.set()

    def run(self, timeout: float | None) -> dict[int, tuple[Any, BaseException | None]]:
        """Calls every handle; returns the answers that came within ``timeout``."""
        if self._handles:
            for i in range(min(BROADCAST_THREADS, len(self._handles))):
                threading.Thread(target=self._work, name=f"fray-broadcast-{i}", daemon=True).start()
            self._all_in.wait(timeout)
        with self._lock:
            self._closed = True  # threads still in a call take no other member
            return dict(self._answers)


def broadcast(
    members: Sequence[Any],
    method: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    timeout: float | None,
) -> list[MemberResult]:
    """Calls ``method(*args, **kwargs)`` on every RUNNING member of ``members`` (a group's
    ``ActorMember``s) and returns one :class:`MemberResult` per member, in order; a member
    that is not running is not called and gets an error saying why."""
    check_method(method)
    limit = check_seconds("timeout", timeout, optional=True)
    live = [(i, m.handle) for i, m in enumerate(members) if m.status is JobStatus.RUNNING]
    started = time.monotonic()
    answers = _Broadcast(lambda h: getattr(h, method)(*args, **kwargs), live).run(limit)
    results: list[MemberResult] = []
    for position, member in enumerate(members):
        value, error = answers.get(position, (None, None))
        if member.status is JobStatus.PENDING and position not in answers:
            error = ActorUnavailableError(f"actor {member.name} is not ready (still starting)")
        elif member.status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
            if position not in answers:
                error = ActorDiedError(f"actor {member.name} is {member.status.value}")
        elif position not in answers:
            waited = time.monotonic() - started
            error = JobTimeoutError(f"actor {member.name} did not answer within {waited:.1f}s")
        results.append(MemberResult(member.name, member.index, value, error))
    return results


def in_order(
    submit: Callable[[Any], PoolFuture], items: Iterator[Any], limit: int
) -> Iterator[Any]:
    """``map``'s results in input order, at most ``limit`` items submitted and not yet
    yielded; closing it cancels those not yet sent."""
    pending: collections.deque[PoolFuture] = collections.deque()
    try:
        for value in items:
            pending.append(submit(value))
            if len(pending) >= limit:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()


def as_finished(
    submit: Callable[[Any], PoolFuture], items: Iterator[Any], limit: int
) -> Iterator[Any]:
    """``map``'s results as they finish, at most ``limit`` items submitted and not yet
    yielded; closing it cancels those not yet sent."""
    finished: queue.SimpleQueue[Future[Any]] = queue.SimpleQueue()
    pending: set[Future[Any]] = set()

    def take() -> Any:
        future = finished.get()
        pending.discard(future)
        return future.result()

    try:
        for value in items:
            future = submit(value)
            pending.add(future)
            future.add_done_callback(finished.put)
            if len(pending) >= limit:
                yield take()
        while pending:
            yield take()
    finally:
        for future in pending:
            future.cancel()
