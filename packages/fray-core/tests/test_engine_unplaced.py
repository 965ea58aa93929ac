"""The engine's scheduling deadline: a job not placed in time fails with what it asked for
and why the backend says it waits, read while it still waits (before its attempt is
cancelled)."""

from __future__ import annotations

import pytest

from fray import Entrypoint, JobRequest, ResourceConfig
from fray.backend import BaseClient, BaseJobHandle, JobRecord, Outcome
from fray.errors import JobFailedError


class NeverPlaced(BaseClient):
    """Starts attempts that never run; its cluster says why, until an attempt is cancelled
    (as a real cluster forgets a cancelled request)."""

    scheme = "never"
    handle_type = BaseJobHandle

    def __init__(self) -> None:
        super().__init__()
        self.waiting = False

    def _start_attempt(self, job: JobRecord) -> Outcome | None:
        self.waiting = True
        return None

    def _cancel_attempt(self, job: JobRecord) -> float:
        self.waiting = False
        job.report(Outcome.stopped())
        return 0.0

    def _pending_reason(self, job: JobRecord) -> str | None:
        return "no node offers GPU" if self.waiting else None


def test_a_job_not_placed_in_time_fails_saying_why_it_waited() -> None:
    with NeverPlaced() as client:
        job = client.submit(
            JobRequest(
                name="stuck",
                entrypoint=Entrypoint.from_callable(print),
                resources=ResourceConfig(cpu=2),
                scheduling_timeout=0.1,
            )
        )
        with pytest.raises(JobFailedError) as caught:
            job.wait(timeout=30)
    error = str(caught.value)
    assert "not placed within scheduling_timeout=0.1s" in error
    assert "asks for cpu=2" in error
    assert error.endswith("the cluster says: no node offers GPU")
    assert job.info().attempts == 0
