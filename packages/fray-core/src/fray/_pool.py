"""Actor pools: items sent to the members of actor groups, one or a few at a time each.

The pool is built only on the actor seam (a group's members, their handles and states, and
``handle.method.remote()`` futures), so it is the same on every backend.

How it works:

* **Dispatch** is driven by the calls' own completions: an item goes to a member with a free
  slot the moment it is submitted, and a finished call hands its member the next item from the
  callback that reported it. One thread at a time dispatches (whoever finds work), so a
  backend that runs a call inside ``.remote()`` (the fake) never recurses.
* **One control thread** per pool looks at the members' states (a few times a second while
  anything is starting or restarting, twice a second otherwise), re-admits members, grows and
  shrinks the pool, times calls out and fails pending items when no member is left.
* **Growing.** The actor seam creates groups of a fixed size and stops a group as a whole, so a
  pool made by ``create_actor_pool`` owns one group of one actor per member (``{name}-{k}``,
  its actor ``{name}-{k}-0``): adding a member creates a group, removing an idle one stops its
  group. A pool over an existing group (``group.pool()``) uses that group's members, neither
  grows nor shrinks, and leaves the group running at its shutdown.
* **Failures.** A call that ends with ``ActorDiedError`` or ``ActorUnavailableError`` marks its
  member RESTARTING and sends the item back to the front of the queue (up to
  ``max_item_retries`` times). The member is ready again once its group shows it restarted, or
  after a pause that doubles each time (1 s, up to 30 s) while the group still calls it
  running; a group that shows it ended makes it DEAD. Any other exception is the user's and
  ends the item. A result is delivered once: the first attempt of an item to end decides it.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fray._model import whole
from fray._pool_members import Member, Members
from fray._pool_parts import (
    MemberResult,
    MemberState,
    PoolFuture,
    PoolOptions,
    PoolState,
    PoolStatus,
    as_finished,
    broadcast,
    check_method,
    check_pool_name,
    check_seconds,
    check_sizes,
    in_order,
)
from fray._types import ActorConfig, ResourceConfig
from fray.errors import (
    ActorDiedError,
    ActorUnavailableError,
    FrayError,
    InvalidRequestError,
    JobTimeoutError,
)

__all__ = ["ActorPool", "create_actor_pool", "pool_over_group"]

logger = logging.getLogger("fray.pool")

_FAST_TICK_S = 0.02  # while members start or restart, or items wait: they are taken in soon
_SLOW_TICK_S = 0.5


class _Item:
    """One submitted call and its attempts."""

    __slots__ = ("args", "attempts", "error", "future", "kwargs", "method", "started")

    def __init__(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.future = PoolFuture()
        self.method = method
        self.args = args
        self.kwargs = kwargs
        self.attempts = 0
        self.started = 0.0
        self.error: BaseException | None = None  # the last infrastructure error


def _is_infra(error: BaseException) -> bool:
    return isinstance(error, ActorDiedError | ActorUnavailableError)


class ActorPool:
    """Items sent to a pool of actors: ``submit``, ``map``, ``broadcast``, ``status`` and
    ``shutdown``. Made by ``client.create_actor_pool(...)`` or ``group.pool()``; see the
    guide ``docs/actor-pools.md``. A context manager: leaving it drains and shuts it down.
    """

    def __init__(
        self,
        name: str,
        options: PoolOptions,
        groups: list[Any],
        *,
        grow: Callable[[int], Any] | None = None,
        sizes: tuple[int, int] = (0, 0),
    ) -> None:
        self.name = name
        self._options = options
        self._grow = grow  # creates group number k (a pool of its own groups), or None
        self._low, self._high = sizes if grow is not None else (0, sum(len(g) for g in groups))
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._members = Members(groups, options.max_in_flight_per_member)
        self._queue: collections.deque[_Item] = collections.deque()
        self._running: dict[_Item, int] = {}  # item -> its calls running now
        self._state = PoolState.RUNNING
        self._pumping = False
        self._counts = collections.Counter[str]()
        self._groups_made = len(groups)
        self._empty_since: float | None = None
        self._drain_deadline: float | None = None
        self._look_failed = False
        self._tick()
        self._thread = threading.Thread(target=self._control, name=f"fray-pool-{name}", daemon=True)
        self._thread.start()

    # -- the public API ------------------------------------------------------------------------

    def submit(self, method: str, /, *args: Any, **kwargs: Any) -> PoolFuture:
        """Sends ``method(*args, **kwargs)`` to a member; returns its future at once.

        Raises:
            InvalidRequestError: ``method`` is not a method name.
            FrayError: The pool is shut down.
        """
        item = _Item(check_method(method), args, kwargs)
        with self._lock:
            if self._state is not PoolState.RUNNING:
                raise FrayError(f"actor pool {self.name} is {self._state.value}: no new items")
            self._queue.append(item)
            if not self._members.free:
                self._cond.notify()  # the control thread grows the pool while items wait
        self._pump()
        return item.future

    def map(
        self,
        method: str,
        items: Iterable[Any],
        *,
        ordered: bool = True,
        max_in_flight: int | None = None,
    ) -> Iterator[Any]:
        """Calls ``method(item)`` for each item, at most ``max_in_flight`` submitted and not
        yet returned at a time (default: twice ``max_workers`` times the per-member limit).

        Yields results in input order, or as they finish with ``ordered=False``; an item's
        error is raised from the iterator where its result would be, and closing the
        iterator cancels the items not yet sent.

        Raises:
            InvalidRequestError: A bad ``method``, ``ordered`` or ``max_in_flight``.
        """
        check_method(method)
        if not isinstance(ordered, bool):
            raise InvalidRequestError.for_field("ordered", ordered, "must be a bool")
        limit = max_in_flight
        if limit is None:
            limit = 2 * max(self._high, 1) * self._options.max_in_flight_per_member
        if not whole(limit, 1):
            raise InvalidRequestError.for_field(
                "max_in_flight", max_in_flight, "must be an integer >= 1 or None"
            )
        run = in_order if ordered else as_finished
        return run(functools.partial(self.submit, method), iter(items), limit)

    def broadcast(
        self, method: str, /, *args: Any, timeout: float | None = None, **kwargs: Any
    ) -> list[MemberResult]:
        """Calls ``method`` once on every member of the pool not stopped, in parallel (at
        most 64 threads); one :class:`MemberResult` per member, oldest first."""
        with self._lock:
            actors = [m.actor for m in self._members.all if m.state is not MemberState.STOPPED]
        return broadcast(actors, method, args, kwargs, timeout)

    def status(self) -> PoolStatus:
        """Members by state, items queued, in flight, done, failed and re-dispatched."""
        with self._lock:
            states = self._members.counts()
            return PoolStatus(
                state=self._state,
                members_ready=states[MemberState.READY],
                members_starting=states[MemberState.STARTING],
                members_restarting=states[MemberState.RESTARTING],
                members_dead=states[MemberState.DEAD],
                queued=len(self._queue),
                in_flight=sum(self._running.values()),
                done=self._counts["done"],
                failed=self._counts["failed"],
                redispatched=self._counts["redispatched"],
                members=tuple((m.actor.name, m.state) for m in self._members.all),
            )

    def shutdown(
        self, wait: bool = True, *, cancel_futures: bool = False, timeout: float | None = None
    ) -> None:
        """Takes no new items, lets the pending ones end, then stops the pool's own members
        (a pool over an existing group leaves that group running).

        Args:
            wait: Return once the pool is STOPPED (otherwise it drains in the background and
                ``status().state`` tells when it is done).
            cancel_futures: Cancel the items not yet sent to a member (their futures raise
                ``CancelledError``); calls already running still end.
            timeout: Seconds to let pending items end; then they fail and the members are
                stopped anyway (``None``: as long as they take).

        Raises:
            InvalidRequestError: ``timeout`` is not a number of seconds > 0 or None.
        """
        check_seconds("timeout", timeout, optional=True)
        dropped: list[_Item] = []
        with self._cond:
            if self._state is PoolState.RUNNING:
                self._state = PoolState.DRAINING
                if timeout is not None:
                    self._drain_deadline = time.monotonic() + timeout
                if cancel_futures:
                    dropped = list(self._queue)
                    self._queue.clear()
                self._cond.notify_all()
        for item in dropped:
            if not item.future.cancel():  # sent before, now waiting to be sent again
                self._settle(item, None, FrayError(f"actor pool {self.name} was shut down"))
        if wait and threading.current_thread() is not self._thread:
            self._thread.join()

    def __enter__(self) -> ActorPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        s = self.status()
        return f"ActorPool({self.name!r}, {s.state.value}, ready={s.members_ready})"

    # -- dispatch ------------------------------------------------------------------------------

    def _pump(self) -> None:
        """Sends queued items to free members until either runs out; one thread sends at a
        time (a thread that finds another sending leaves its work to it)."""
        with self._lock:
            if self._pumping:
                return
            self._pumping = True
        while True:
            with self._lock:
                work = self._next_send()
                if work is None:
                    self._pumping = False
                    return
            item, member = work
            try:
                call = getattr(member.actor.handle, item.method).remote(*item.args, **item.kwargs)
            except Exception as exc:  # the call could not start
                self._finished(item, member, None, exc)
            else:
                call.add_done_callback(functools.partial(self._finished, item, member))

    def _next_send(self) -> tuple[_Item, Member] | None:
        if self._state is PoolState.STOPPED:
            return None
        while self._queue:
            member = self._members.take()
            if member is None:
                return None
            item = self._queue.popleft()
            if item.attempts == 0 and not item.future.set_running_or_notify_cancel():
                self._members.give_back(member)  # the item was cancelled
                continue
            item.attempts += 1
            item.started = time.monotonic()
            self._running[item] = self._running.get(item, 0) + 1
            return item, member
        return None

    def _finished(
        self, item: _Item, member: Member, call: Any, error: BaseException | None = None
    ) -> None:
        """One call of ``item`` on ``member`` ended (``call``: its future; or ``error``)."""
        value = None
        if call is not None:
            try:
                value = call.result()
            except BaseException as exc:
                error = exc
        down = error is not None and _is_infra(error)
        again = down or (
            self._options.idempotent and isinstance(error, JobTimeoutError)
        )  # the item may run again elsewhere
        with self._lock:
            self._members.call_ended(member, down, error)
            left = self._running.pop(item, 1) - 1
            if left:
                self._running[item] = left  # another call of it runs: it decides
            resent = again and not left and self._resend(item)
            if not resent and again and not left and self._state is not PoolState.STOPPED:
                error = self._given_up(item, error)
            elif self._state is PoolState.STOPPED and again:
                error = FrayError(f"actor pool {self.name} was shut down while the item ran")
            if down:
                self._cond.notify()
        if not resent and not (again and left):
            self._settle(item, value, error)
        self._pump()

    def _resend(self, item: _Item) -> bool:
        """Under the lock: puts ``item`` back at the front of the queue if it may run again."""
        if item.future.done() or self._state is PoolState.STOPPED:
            return False
        if item.attempts > self._options.max_item_retries:
            return False
        self._queue.appendleft(item)
        self._counts["redispatched"] += 1
        return True

    def _given_up(self, item: _Item, error: BaseException | None) -> BaseException:
        failure = ActorDiedError(
            f"actor pool {self.name}: {item.method!r} failed on {item.attempts} attempt(s) "
            f"(max_item_retries={self._options.max_item_retries}): its member died, could not "
            f"be reached or timed out each time; last: {type(error).__name__}: {error}"
        )
        failure.__cause__ = error
        return failure

    def _settle(self, item: _Item, value: Any, error: BaseException | None) -> None:
        """Delivers the item's outcome, once: whatever comes after is dropped."""
        with self._lock:
            if item.future.done():
                return
            self._counts["failed" if error is not None else "done"] += 1
            self._cond.notify_all()
        try:
            if error is None:
                item.future.set_result(value)
            else:
                item.future.set_exception(error)
        except Exception:  # InvalidStateError: cancelled or settled in between
            pass

    # -- the control thread --------------------------------------------------------------------

    def _control(self) -> None:
        while True:
            with self._cond:
                counts = self._members.counts()
                live = sum(counts[s] for s in (MemberState.READY, MemberState.STARTING))
                busy = (
                    counts[MemberState.STARTING] + counts[MemberState.RESTARTING] > 0
                    or (bool(self._queue) and self._grow is not None and live < self._high)
                    or self._state is not PoolState.RUNNING
                    or (self._options.call_timeout is not None and bool(self._running))
                )
                self._cond.wait(_FAST_TICK_S if busy else _SLOW_TICK_S)
            try:
                if self._tick():
                    return
            except Exception:  # a backend's status look failed: try again next time
                log = logger.debug if self._look_failed else logger.exception
                self._look_failed = True  # said once; a client shut down keeps failing
                log("actor pool %s: looking at its members failed", self.name)

    def _tick(self) -> bool:
        """Looks at the members once and acts on what it sees; True once STOPPED."""
        seen = self._members.look()
        now = time.monotonic()
        fail: list[tuple[_Item, BaseException]] = []
        with self._cond:
            self._members.apply(seen, now)
            fail += self._expired(now)
            fail += self._stranded(now)
            owned = self._grow is not None
            stop = (
                self._members.to_stop(now, self._options.idle_timeout, self._low) if owned else []
            )
            add = 0
            if owned and self._state is not PoolState.STOPPED:
                add = self._members.to_add(len(self._queue), self._low, self._high)
            first = self._groups_made
            self._groups_made += add
            done = self._state is PoolState.DRAINING and (
                not (self._queue or self._running)
                or (self._drain_deadline is not None and now >= self._drain_deadline)
            )
            if done:
                self._state = PoolState.STOPPED
                shut = FrayError(f"actor pool {self.name} was shut down before the item ended")
                fail += [(item, shut) for item in [*self._queue, *self._running]]
                self._queue.clear()
                stop = [m for m in self._members.all if m.state is not MemberState.STOPPED]
                for member in stop:
                    if member.state is not MemberState.DEAD:  # the dead stay counted so
                        member.state = MemberState.STOPPED
                self._cond.notify_all()
        for item, error in fail:
            self._settle(item, None, error)
        for member in stop if owned else ():
            member.group.shutdown()
        for k in range(first, first + add):
            self._add_member(k)
        if not done:
            self._pump()
        return done

    def _add_member(self, k: int) -> None:
        assert self._grow is not None
        try:
            group = self._grow(k)
        except Exception as exc:
            logger.warning("actor pool %s: adding a member failed: %s", self.name, exc)
            with self._lock:
                self._members.start_failures += 1
                self._members.last_error = exc
            return
        with self._lock:
            if self._state is PoolState.STOPPED:
                group.shutdown()
                return
            self._members.add_group(group)

    def _expired(self, now: float) -> list[tuple[_Item, BaseException]]:
        """Under the lock: items that ran past ``call_timeout``: sent again (``idempotent``)
        or failed."""
        limit = self._options.call_timeout
        if limit is None:
            return []
        out: list[tuple[_Item, BaseException]] = []
        for item in [i for i in self._running if now - i.started >= limit]:
            item.started = math.inf  # dealt with, until it is sent again
            error = JobTimeoutError(
                f"actor pool {self.name}: {item.method!r} ran longer than call_timeout={limit:g}s"
            )
            if not (self._options.idempotent and self._resend(item)):
                out.append(
                    (item, self._given_up(item, error) if self._options.idempotent else error)
                )
        return out

    def _stranded(self, now: float) -> list[tuple[_Item, BaseException]]:
        """Under the lock: when no member has been ready, starting or restarting for
        ``no_members_timeout`` (and none can be added), the queued items, failed."""
        can_add = self._grow is not None and self._members.can_grow()
        if self._members.live() or can_add:
            self._empty_since = None
            return []
        if self._empty_since is None:
            self._empty_since = now
        waited = now - self._empty_since
        if waited < self._options.no_members_timeout or not self._queue:
            return []
        dead = self._members.counts()[MemberState.DEAD]
        last = self._members.last_error
        message = (
            f"actor pool {self.name}: no member ready, starting or restarting for "
            f"{waited:.1f}s (no_members_timeout={self._options.no_members_timeout:g}s; "
            f"{dead} dead"
            + (", and adding members stopped after 3 failed to start" if self._grow else "")
            + ")"
            + (f"; last error: {type(last).__name__}: {last}" if last is not None else "")
        )
        out: list[tuple[_Item, BaseException]] = []
        while self._queue:
            error = ActorDiedError(message)
            error.__cause__ = last
            out.append((self._queue.popleft(), error))
        return out


def pool_over_group(group: Any, **options: Any) -> ActorPool:
    """``group.pool(**options)``: a pool over an existing group's members (the options are
    :class:`~fray._pool_parts.PoolOptions`' fields, but ``idle_timeout``)."""
    known = [f.name for f in dataclasses.fields(PoolOptions) if f.name != "idle_timeout"]
    for key, value in options.items():
        if key not in known:
            raise InvalidRequestError.for_field(
                key, value, f"group.pool() takes only {', '.join(known)}"
            )
    return ActorPool(group.name, PoolOptions(**options), [group])


def create_actor_pool(
    client: Any,
    cls: type[Any],
    *args: Any,
    name: str,
    min_workers: int = 1,
    max_workers: int | None = None,
    resources: ResourceConfig | None = None,
    actor_config: ActorConfig | None = None,
    idle_timeout: float = 60.0,
    max_item_retries: int = 3,
    no_members_timeout: float = 60.0,
    max_in_flight_per_member: int = 1,
    idempotent: bool = False,
    call_timeout: float | None = None,
    **kwargs: Any,
) -> ActorPool:
    """``client.create_actor_pool``: a pool that starts ``min_workers`` actors
    ``cls(*args, **kwargs)`` and grows to ``max_workers`` (default: ``min_workers``, at
    least 1) while items wait; see ``docs/actor-pools.md``. Returns at once; items wait for
    the first member.

    Raises:
        InvalidRequestError: A bad argument, naming the field and what is allowed.
    """
    check_pool_name(name)
    sizes = check_sizes(min_workers, max_workers)
    options = PoolOptions(
        max_item_retries=max_item_retries,
        idempotent=idempotent,
        call_timeout=call_timeout,
        max_in_flight_per_member=max_in_flight_per_member,
        no_members_timeout=no_members_timeout,
        idle_timeout=idle_timeout,
    )
    if not isinstance(cls, type):
        raise InvalidRequestError.for_field("actor_class", cls, "must be a class")

    def grow(k: int) -> Any:
        return client.create_actor_group(
            cls,
            *args,
            name=f"{name}-{k}",
            count=1,
            resources=resources,
            actor_config=actor_config,
            **kwargs,
        )

    # Made here, in the caller's thread: a backend that refuses the request raises at once
    # (with min_workers=0, the first member added fails to start instead).
    groups = [grow(k) for k in range(sizes[0])]
    return ActorPool(name, options, groups, grow=grow, sizes=sizes)
