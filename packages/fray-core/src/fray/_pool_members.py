"""An actor pool's members as the pool sees them: their states, free slots, re-admission after
a failure, and how many to add or stop. Every method but :meth:`Members.look` is called with
the pool's lock held; ``look`` asks the groups (which may mean a call to the cluster)."""

from __future__ import annotations

import collections
import math
import time
from typing import Any

from fray._pool_parts import MemberState
from fray._types import JobStatus

__all__ = ["Member", "Members"]

_READMIT_MAX_S = 30.0
_START_FAILURES = 3  # members in a row that ended before ever being ready: growing stops
_GONE = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED)
_LIVE = (MemberState.READY, MemberState.STARTING, MemberState.RESTARTING)


class Member:
    """One actor of the pool: its group, the group's member (name, handle, status) and
    what the pool knows of it."""

    __slots__ = (
        "actor",
        "backoff",
        "down_since",
        "ever_ready",
        "group",
        "idle_since",
        "in_flight",
        "seen_down",
        "state",
    )

    def __init__(self, group: Any, actor: Any) -> None:
        self.group = group
        self.actor = actor
        self.state = MemberState.STARTING
        self.in_flight = 0
        self.idle_since = time.monotonic()
        self.down_since = 0.0
        self.backoff = 0.0  # how long a RESTARTING member the group calls running waits
        self.ever_ready = False
        self.seen_down = False  # its group showed it not running since it went down


class Members:
    """The members, the free slots (a member appears once per call it may still take;
    stale entries are skipped when taken) and the start-failure count."""

    def __init__(self, groups: list[Any], cap: int) -> None:
        self.cap = cap
        self.all: list[Member] = []
        self.free: collections.deque[Member] = collections.deque()
        self.start_failures = 0
        self.last_error: BaseException | None = None
        self._watched: list[Any] = []
        for group in groups:
            self.add_group(group)

    def add_group(self, group: Any) -> None:
        """Takes in a group's members, STARTING."""
        self._watched.append(group)
        self.all.extend(Member(group, actor) for actor in group.members)

    def counts(self) -> collections.Counter[MemberState]:
        """Members by state."""
        return collections.Counter(m.state for m in self.all)

    def live(self) -> int:
        """Members ready, starting or restarting."""
        return sum(1 for m in self.all if m.state in _LIVE)

    def take(self) -> Member | None:
        """A ready member with a free slot, its slot taken; ``None`` if there is none."""
        free = self.free
        while free:
            member = free.popleft()
            if member.state is MemberState.READY and member.in_flight < self.cap:
                member.in_flight += 1
                if member.in_flight < self.cap:
                    free.append(member)
                return member
        return None

    def give_back(self, member: Member) -> None:
        """``member`` took a slot that it did not use."""
        member.in_flight -= 1
        self.free.appendleft(member)

    def call_ended(self, member: Member, failed: bool, error: BaseException | None) -> None:
        """A call on ``member`` ended: its slot is free again, or (``failed``: it died or
        could not be reached) it takes no items until it is re-admitted."""
        member.in_flight -= 1
        if failed:
            self.last_error = error
            if member.state is MemberState.READY:
                member.state = MemberState.RESTARTING
                member.down_since = time.monotonic()
                member.backoff = min(max(member.backoff * 2, 1.0), _READMIT_MAX_S)
                member.seen_down = False
        elif member.state is MemberState.READY:
            member.backoff = 0.0
            self.free.append(member)
            if member.in_flight == 0:
                member.idle_since = time.monotonic()

    def look(self) -> list[tuple[Member, JobStatus]]:
        """Each watched member's status now, from its group (without the pool's lock)."""
        seen: list[tuple[Member, JobStatus]] = []
        by_actor = {id(m.actor): m for m in self.all}
        for group in list(self._watched):
            for actor, status in zip(group.members, group.statuses(), strict=True):
                member = by_actor.get(id(actor))
                if member is not None:
                    seen.append((member, status))
        return seen

    def apply(self, seen: list[tuple[Member, JobStatus]], now: float) -> None:
        """Moves members on from what their groups showed."""
        for member, status in seen:
            if member.state in (MemberState.DEAD, MemberState.STOPPED):
                continue
            if status in _GONE:
                member.state = MemberState.DEAD
                if member.actor.error is not None:
                    self.last_error = member.actor.error
                if not member.ever_ready:
                    self.start_failures += 1
            elif status is JobStatus.PENDING:
                if member.ever_ready:
                    if member.state is MemberState.READY:
                        member.state = MemberState.RESTARTING
                        member.down_since = now
                    member.seen_down = True
            elif member.state is MemberState.STARTING:
                member.ever_ready = True
                self.start_failures = 0
                self._ready(member, now)
            elif member.state is MemberState.RESTARTING and (
                member.seen_down or now - member.down_since >= member.backoff
            ):
                self._ready(member, now)
        self._watched = [
            g for g in self._watched if any(m.group is g and m.state in _LIVE for m in self.all)
        ]

    def _ready(self, member: Member, now: float) -> None:
        member.state = MemberState.READY
        member.idle_since = now
        self.free.extend([member] * (self.cap - member.in_flight))

    def can_grow(self) -> bool:
        """Whether new members may still be added (fewer than 3 in a row failed to start)."""
        return self.start_failures < _START_FAILURES

    def to_add(self, queued: int, low: int, high: int) -> int:
        """How many members to add: up to ``low``, and while ``queued`` items wait, as many
        as they would fill (not counting those starting), never past ``high``."""
        if not self.can_grow():
            return 0
        live = self.live()
        starting = sum(1 for m in self.all if m.state is MemberState.STARTING)
        want = low - live
        if queued:
            want = max(want, math.ceil(queued / self.cap) - starting)
        return max(0, min(want, high - live))

    def to_stop(self, now: float, idle_timeout: float, low: int) -> list[Member]:
        """Ready members idle for ``idle_timeout``, marked STOPPED (never below ``low``)."""
        live = self.live()
        stopping: list[Member] = []
        for member in self.all:
            if live <= low:
                break
            if (
                member.state is MemberState.READY
                and member.in_flight == 0
                and now - member.idle_since >= idle_timeout
            ):
                member.state = MemberState.STOPPED
                stopping.append(member)
                live -= 1
        return stopping
