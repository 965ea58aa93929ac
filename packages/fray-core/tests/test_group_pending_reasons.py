"""``BaseActorGroup._pending_reasons``: why PENDING members wait, in ``member.pending_reason``
and in the error of a ``wait_ready`` that timed out; read only on those paths."""

from __future__ import annotations

import pytest

from fray import JobStatus, JobTimeoutError
from fray.backend import ActorMember, BaseActorGroup


class _Group(BaseActorGroup):
    """Members whose states are set by the test; reasons for the indexes given."""

    polls = True

    def __init__(self, size: int, reasons: dict[int, str] | None) -> None:
        super().__init__("g", [ActorMember(i, f"g-{i}", f"handle-{i}") for i in range(size)])
        self.reasons = reasons
        self.asked: list[list[int]] = []

    def _pending_reasons(self, members: list[ActorMember]) -> dict[int, str]:
        self.asked.append([m.index for m in members])
        if self.reasons is None:
            return super()._pending_reasons(members)
        return {m.index: self.reasons[m.index] for m in members if m.index in self.reasons}

    def _stop(self, members: list[ActorMember]) -> None:
        del members


def test_a_timed_out_wait_says_why_each_pending_member_waits() -> None:
    group = _Group(8, {i: "asks for CPU=3; busy" for i in range(1, 8)} | {0: "other"})
    group.members[7].set_status(JobStatus.RUNNING)
    with pytest.raises(JobTimeoutError) as caught:
        group.wait_ready(timeout=0)
    assert str(caught.value) == (
        "only 1/8 actors of g ready after 0s; g-0: other; "
        "g-1, g-2, g-3, g-4, g-5 and 1 more: asks for CPU=3; busy"
    )
    assert group.asked == [list(range(7))]  # once, for the pending members only


def test_members_expose_their_pending_reason_only_while_pending() -> None:
    group = _Group(2, {0: "no node offers GPU", 1: "busy"})
    assert [m.pending_reason for m in group.members] == ["no node offers GPU", "busy"]
    group.members[1].set_status(JobStatus.RUNNING)
    assert group.members[1].pending_reason is None
    assert group.asked == [[0], [1]]


def test_the_fast_path_and_a_backend_that_cannot_tell_ask_nothing() -> None:
    group = _Group(2, None)
    with pytest.raises(JobTimeoutError) as caught:
        group.wait_ready(timeout=0)
    assert str(caught.value) == "only 0/2 actors of g ready after 0s"
    assert group.members[0].pending_reason is None
    for member in group.members:
        member.set_status(JobStatus.RUNNING)
    group.asked.clear()
    assert group.wait_ready(timeout=0) == ["handle-0", "handle-1"]
    assert group.asked == []
