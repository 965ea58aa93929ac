"""Engine hooks backends lean on: the scheduling deadline (a job not placed in time fails
with what it asked for and why the backend says it waits, read while it still waits),
``_call_soon`` (work handed off a library's callback thread runs in order on the client's
event thread, which ends with the client), ``_await`` (whoever waits may learn every end of a
client's jobs at once), ``JobRecord.observe`` (a job the cluster runs) and the history of
every attempt's end."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from fray import Entrypoint, JobRequest, JobStatus, ResourceConfig, wait_all
from fray.backend import BaseClient, BaseJobHandle, JobRecord, Observed, Outcome
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


class CallerDriven(BaseClient):
    """Attempts that end only when a caller waits: ``_await`` ends them all at once, in the
    caller's thread, as Ray's bulk wait does (and records what it was given)."""

    scheme = "driven"
    handle_type = BaseJobHandle

    def __init__(self) -> None:
        super().__init__()
        self.awaited: list[tuple[list[str], str]] = []

    def _start_attempt(self, job: JobRecord) -> Outcome | None:
        job.placed()
        return None

    def _cancel_attempt(self, job: JobRecord) -> float:
        job.report(Outcome.stopped())
        return 0.0

    def _await(self, jobs: Any, timeout: float | None, wakeup: Any) -> bool:
        jobs = list(jobs)
        self.awaited.append(([job.job_id for job in jobs], threading.current_thread().name))
        for job in jobs:
            job.report(Outcome.succeeded(job.name))
        return wakeup.wait(0)


def test_whoever_waits_is_asked_to_wait_for_all_of_a_clients_jobs_at_once() -> None:
    with CallerDriven() as client:
        jobs = [
            client.submit(JobRequest(name=f"j{i}", entrypoint=Entrypoint.from_callable(print)))
            for i in range(5)
        ]
        assert wait_all(jobs, timeout=30) == [JobStatus.SUCCEEDED] * 5
        ids, thread = client.awaited[0]
        assert sorted(ids) == sorted(job.job_id for job in jobs)
        assert thread == threading.current_thread().name
        one = client.submit(JobRequest(name="one", entrypoint=Entrypoint.from_callable(print)))
        assert one.result(timeout=30) == "one"
        assert client.awaited[-1][0] == [one.job_id]


class ClusterRun(BaseClient):
    """A cluster that runs attempts and budgets itself: records move only by ``observe``."""

    scheme = "cluster"
    handle_type = BaseJobHandle
    cluster_runs_attempts = True

    def _launch(self, job: JobRecord, adopt_existing: bool) -> None:
        del job, adopt_existing

    def _cancel_attempt(self, job: JobRecord) -> float:
        job.end(JobStatus.STOPPED)
        return 0.0


def test_a_job_the_cluster_runs_moves_by_observation_and_counts_never_go_down() -> None:
    with ClusterRun() as client:
        handle = client.submit(JobRequest(name="c", entrypoint=Entrypoint.from_callable(print)))
        job = handle._job  # pyright: ignore[reportPrivateUsage]
        ended: list[str] = []
        handle.add_done_callback(lambda h: ended.append(h.job_id))
        assert not job.observe(Observed(status=JobStatus.RUNNING, attempts=2, preemptions=1))
        assert not job.observe(Observed(attempts=1, error="a node was lost"))
        info = handle.info()
        assert (info.status, info.attempts, info.preemptions) == (JobStatus.RUNNING, 2, 1)
        final = Observed(status=JobStatus.FAILED, failures=1, exit_code=3, error="boom")
        assert job.observe(final)
        assert not job.observe(final)  # ended once
        assert handle.wait(timeout=5, raise_on_failure=False) is JobStatus.FAILED
        info = handle.info()
        assert (info.failures, info.exit_code, info.error) == (1, 3, "boom")
        assert ended == [handle.job_id]


def test_a_job_the_engine_runs_cannot_be_observed() -> None:
    with CallerDriven() as client:
        handle = client.submit(JobRequest(name="e", entrypoint=Entrypoint.from_callable(print)))
        with pytest.raises(RuntimeError, match="run by Fray's engine"):
            handle._job.observe(Observed(status=JobStatus.SUCCEEDED))  # pyright: ignore[reportPrivateUsage]
        handle.wait(timeout=30)


class Scripted(BaseClient):
    """Each attempt ends at once with the next outcome of a script."""

    scheme = "scripted"
    handle_type = BaseJobHandle

    def __init__(self, *outcomes: Outcome) -> None:
        super().__init__()
        self.outcomes = list(outcomes)

    def _start_attempt(self, job: JobRecord) -> Outcome | None:
        job.placed()
        return self.outcomes.pop(0)


def test_every_attempts_end_is_kept_in_order() -> None:
    script = (
        Outcome.preempted("node lost"),
        Outcome.failed(ValueError("bad"), exit_code=1),
        Outcome.succeeded(7, exit_code=0),
    )
    with Scripted(*script) as client:
        handle = client.submit(
            JobRequest(
                name="h",
                entrypoint=Entrypoint.from_callable(print),
                max_retries_preemption=1,
                max_retries_failure=1,
            )
        )
        assert handle.result(timeout=30) == 7
        history = handle.info().attempt_history
    assert [(a.attempt, a.outcome, a.exit_code) for a in history] == [
        (1, "preempted", None),
        (2, "failed", 1),
        (3, "succeeded", 0),
    ]
    assert history[0].error == "node lost" and history[1].error == "ValueError: bad"
    assert all(a.started_at is not None and a.finished_at >= a.started_at for a in history)  # type: ignore[operator]


def test_a_job_bound_as_an_id_and_index_pair_is_the_parent_of_jobs_submitted_inside() -> None:
    """A backend may bind a running job as ``(job id, index)`` without its record (as the
    guide for backend authors showed): a job submitted inside is that job's child by id."""
    from fray import LocalClient
    from fray.backend import binding

    with LocalClient() as client, binding(client, job=("outer-1", 0)):  # pyright: ignore[reportArgumentType]
        child = client.submit(JobRequest(name="inner", entrypoint=Entrypoint.from_callable(int)))
        assert child.job_id.startswith("outer-1/inner-")
        assert child.wait(timeout=60) is JobStatus.SUCCEEDED
