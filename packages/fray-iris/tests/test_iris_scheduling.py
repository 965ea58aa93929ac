"""``JobRequest.scheduling_timeout`` and pending reasons on Iris: a job no worker can take
says why while it waits, and fails at its scheduling timeout with what it asked for and
Iris's reason."""

from __future__ import annotations

import time
from typing import Any

import pytest

from fray import Entrypoint, JobRequest, JobStatus, ResourceConfig
from fray.errors import JobFailedError


def noop() -> int:
    return 1


def huge(**fields: Any) -> JobRequest:
    return JobRequest(
        name="huge",
        entrypoint=Entrypoint.from_callable(noop),
        resources=ResourceConfig(cpu=1000),
        **fields,
    )


def test_an_unplaceable_job_fails_at_its_scheduling_timeout_saying_why(iris_client: Any) -> None:
    job = iris_client.submit(huge(scheduling_timeout=3))
    with pytest.raises(JobFailedError) as caught:
        job.wait(timeout=120)
    message = str(caught.value)
    assert "not placed within scheduling_timeout=3s" in message
    assert "asks for cpu=1000" in message
    assert "Insufficient CPU" in message  # Iris's own reason
    assert job.info().status is JobStatus.FAILED


def test_a_waiting_job_says_why_in_its_info(iris_client: Any) -> None:
    job = iris_client.submit(huge())
    try:
        deadline = time.monotonic() + 60
        while (reason := job.info().pending_reason) is None and time.monotonic() < deadline:
            assert job.status() is JobStatus.PENDING
            time.sleep(0.1)  # polling interval of a bounded wait: Iris only answers polls
        assert reason is not None and "Insufficient CPU" in reason, reason
    finally:
        job.terminate()
    assert job.info().pending_reason is None  # only while it waits
