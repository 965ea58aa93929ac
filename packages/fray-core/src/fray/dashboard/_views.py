"""What the dashboard shows of actor groups and TPU gangs: small frozen views a source builds
(jobs are shown from :class:`fray.JobInfo` itself)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Any

from fray._types import JobStatus

__all__ = [
    "GangAttemptView",
    "GangView",
    "GroupView",
    "HostState",
    "HostView",
    "MemberState",
    "MemberView",
    "SliceView",
    "group_view",
]


class MemberState(enum.Enum):
    """Where an actor of a group is: ready for calls, not yet, being restarted, dead, or
    stopped on purpose."""

    READY = "ready"
    PENDING = "pending"
    RESTARTING = "restarting"
    DEAD = "dead"
    STOPPED = "stopped"


_MEMBER_STATES = {
    JobStatus.PENDING: MemberState.PENDING,
    JobStatus.RUNNING: MemberState.READY,
    JobStatus.SUCCEEDED: MemberState.STOPPED,
    JobStatus.FAILED: MemberState.DEAD,
    JobStatus.STOPPED: MemberState.STOPPED,
}


@dataclasses.dataclass(frozen=True, slots=True)
class MemberView:
    """One actor of a group.

    Attributes:
        restarts: How often the backend restarted it (``None``: the backend does not say).
        error: Why it died, if it did.
    """

    name: str
    state: MemberState
    restarts: int | None = None
    error: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class GroupView:
    """An actor group and its members; ``job_id`` is the job hosting it, where there is one."""

    name: str
    members: Sequence[MemberView]
    job_id: str | None = None


def group_view(group: Any, job_id: str | None = None) -> GroupView:
    """The view of a live actor group of any backend (a ``fray.backend.BaseActorGroup``):
    its members' states; restarts are not kept by Fray's groups (shown as unknown)."""
    group.statuses()  # brings polled member states up to date
    members = [
        MemberView(
            member.name,
            _MEMBER_STATES[member.status],
            error=None
            if member.error is None
            else f"{type(member.error).__name__}: {member.error}",
        )
        for member in group.members
    ]
    return GroupView(group.name, tuple(members), job_id)


class HostState(enum.Enum):
    """How one host (VM) of a TPU slice stands in the gang's latest attempt."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PREEMPTED = "preempted"
    STOPPED = "stopped"


@dataclasses.dataclass(frozen=True, slots=True)
class HostView:
    """One host of a slice: its worker index (``TPU_WORKER_ID``), state, and when and why it
    failed."""

    worker: int
    state: HostState
    failed_at: float | None = None
    error: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class SliceView:
    """One slice of a gang (``MEGASCALE_SLICE_ID`` = ``index``) and its hosts."""

    index: int
    name: str
    hosts: Sequence[HostView]

    @property
    def first_failure(self) -> float | None:
        """When the first of its hosts failed, if one did."""
        return min((h.failed_at for h in self.hosts if h.failed_at is not None), default=None)


@dataclasses.dataclass(frozen=True, slots=True)
class GangAttemptView:
    """One attempt of a gang: how it ended and the ``MEGASCALE_*`` values it ran with."""

    attempt: int
    outcome: str
    megascale: Mapping[str, str]


@dataclasses.dataclass(frozen=True, slots=True)
class GangView:
    """A multi-host TPU job: its slices and hosts (latest attempt) and every attempt."""

    job_id: str
    tpu_type: str
    slices: Sequence[SliceView]
    attempts: Sequence[GangAttemptView] = ()

    @property
    def first_failed_slice(self) -> SliceView | None:
        """The slice one of whose hosts failed first, if any did."""
        failed = [s for s in self.slices if s.first_failure is not None]
        return min(failed, key=lambda s: s.first_failure or 0.0, default=None)
