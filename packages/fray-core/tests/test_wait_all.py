"""wait_all: success, fail-fast, timeout, empty, input order, event-driven notification."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from fray import (
    Entrypoint,
    InvalidRequestError,
    JobFailedError,
    JobRequest,
    JobStatus,
    JobTimeoutError,
    LocalClient,
    wait_all,
)


def value(x: int) -> int:
    return x


def wait_on(event: threading.Event, x: int) -> int:
    assert event.wait(30)
    return x


def fail(message: str) -> None:
    raise ValueError(message)


def job(client: LocalClient, fn: Callable[..., Any], *args: Any, name: str = "j") -> Any:
    return client.submit(JobRequest(name=name, entrypoint=Entrypoint.from_callable(fn, args)))


def test_empty() -> None:
    assert wait_all([]) == []


def test_all_succeed_in_input_order(client: LocalClient) -> None:
    gates = [threading.Event() for _ in range(5)]
    jobs = [job(client, wait_on, g, i) for i, g in enumerate(gates)]
    for gate in reversed(gates):  # finish in reverse order
        gate.set()
    statuses = wait_all(jobs, timeout=30)
    assert statuses == [JobStatus.SUCCEEDED] * 5
    assert [j.result() for j in jobs] == [0, 1, 2, 3, 4]


def test_fail_fast_raises_the_failed_jobs_error(client: LocalClient) -> None:
    hold = threading.Event()
    slow = job(client, wait_on, hold, 1, name="slow")
    bad = job(client, fail, "shard 3 is corrupt", name="bad")
    with pytest.raises(JobFailedError) as info:
        wait_all([slow, bad], timeout=30)
    assert info.value.job_id == bad.job_id
    assert "ValueError: shard 3 is corrupt" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)
    assert not slow.status().is_finished  # fail-fast: the slow one was not waited for
    hold.set()
    assert slow.wait(30) is JobStatus.SUCCEEDED


def test_no_raise_returns_failed_and_stopped(client: LocalClient) -> None:
    hold = threading.Event()
    ok = job(client, value, 1)
    bad = job(client, fail, "x")
    stopped = job(client, wait_on, hold, 2)
    stopped.terminate()
    assert wait_all([ok, bad, stopped], timeout=30, raise_on_failure=False) == [
        JobStatus.SUCCEEDED,
        JobStatus.FAILED,
        JobStatus.STOPPED,
    ]
    # STOPPED is not a failure, even with raise_on_failure.
    assert wait_all([ok, stopped], timeout=30) == [JobStatus.SUCCEEDED, JobStatus.STOPPED]
    hold.set()


def test_timeout(client: LocalClient) -> None:
    hold = threading.Event()
    jobs = [job(client, wait_on, hold, i, name=f"w{i}") for i in range(3)]
    started = time.monotonic()
    with pytest.raises(JobTimeoutError) as info:
        wait_all(jobs, timeout=0.2)
    assert time.monotonic() - started < 5
    assert isinstance(info.value, TimeoutError)
    assert "3 of 3 jobs unfinished" in str(info.value)
    assert jobs[0].job_id in str(info.value)
    hold.set()


class PolledHandle:
    """A handle without add_done_callback: wait_all must poll it."""

    def __init__(self, finish_after: int) -> None:
        self.calls = 0
        self.finish_after = finish_after
        self.job_id = "polled"

    def status(self) -> JobStatus:
        self.calls += 1
        return JobStatus.SUCCEEDED if self.calls > self.finish_after else JobStatus.RUNNING

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        return self.status()


def test_handles_without_notification_are_polled(client: LocalClient) -> None:
    polled = PolledHandle(finish_after=3)
    notifying = job(client, value, 5)
    assert wait_all([polled, notifying], timeout=30) == [JobStatus.SUCCEEDED] * 2
    assert polled.calls == 4


class CountingHandle:
    """Wraps a notifying handle and counts status() calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.job_id = inner.job_id
        self.calls = 0
        self.subscribed = threading.Event()

    def status(self) -> JobStatus:
        self.calls += 1
        return self.inner.status()

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        return self.inner.wait(timeout, raise_on_failure=raise_on_failure)

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        self.inner.add_done_callback(lambda _h: callback(self))
        self.subscribed.set()


def test_notifying_handles_are_not_polled(client: LocalClient) -> None:
    hold = threading.Event()
    counted = CountingHandle(job(client, wait_on, hold, 1))

    def release_once_subscribed() -> None:  # the job ends while wait_all waits on it
        if counted.subscribed.wait(30):
            hold.set()

    threading.Thread(target=release_once_subscribed, daemon=True).start()
    assert wait_all([counted], timeout=30) == [JobStatus.SUCCEEDED]
    # Once at the start, once when notified: no polling loop in between.
    assert counted.calls <= 2


def test_progress_line_when_forced(client: LocalClient, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = [job(client, value, i) for i in range(3)]
    wait_all(jobs, progress=True)
    assert "jobs: 3/3 done, 0 running, 0 failed" in capsys.readouterr().err
    wait_all(jobs, progress=False)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("jobs", "kwargs", "field"),
    [
        (None, {}, "wait_all.jobs"),
        ("abc", {}, "wait_all.jobs"),
        ([1, 2], {}, "wait_all.jobs"),
        ([], {"timeout": "x"}, "wait_all.timeout"),
        ([], {"timeout": True}, "wait_all.timeout"),
        ([], {"timeout": -1}, "wait_all.timeout"),
        ([], {"progress": "yes"}, "wait_all.progress"),
    ],
)
def test_bad_arguments_are_refused_naming_them(
    jobs: Any, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidRequestError, match=rf"^{field}: "):
        wait_all(jobs, **kwargs)
