"""Two engine hooks backends lean on: the scheduling deadline (a job not placed in time fails
with what it asked for and why the backend says it waits, read while it still waits) and
``_call_soon`` (work handed off a library's callback thread runs in order on the client's
event thread, which ends with the client)."""

from __future__ import annotations

import threading

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


def test_call_soon_runs_in_order_on_one_thread_of_the_client_until_shutdown() -> None:
    client = NeverPlaced()
    seen: list[tuple[int, str]] = []
    done = threading.Event()
    for index in range(3):
        client._call_soon(lambda i=index: seen.append((i, threading.current_thread().name)))  # pyright: ignore[reportPrivateUsage]
    client._call_soon(done.set)  # pyright: ignore[reportPrivateUsage]
    assert done.wait(30)
    assert [i for i, _ in seen] == [0, 1, 2]
    assert {name for _, name in seen} == {"fray-never-events"}
    thread = next(t for t in threading.enumerate() if t.name == "fray-never-events")
    client.shutdown()
    thread.join(30)
    assert not thread.is_alive()
