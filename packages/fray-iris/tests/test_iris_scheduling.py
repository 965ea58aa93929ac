"""``JobRequest.scheduling_timeout`` and pending reasons on Iris: a job no worker can take
says why while it waits, and fails at its scheduling timeout with what it asked for and
Iris's reason. marin-iris 0.2.227 refuses at submit a job that no scaling group could ever
place (the 0.2.20 line lets it wait), which says so at once instead."""

from __future__ import annotations

import time
from typing import Any

import pytest

from fray import Entrypoint, JobRequest, JobStatus, ResourceConfig
from fray.errors import InvalidRequestError, JobFailedError
from fray_iris._convert import line

# The 0.2.227 line (it has the job-wide failure budget) checks capacity at submit.
REFUSES_AT_SUBMIT = line.FAILURE_BUDGET
WAITS = pytest.mark.skipif(
    REFUSES_AT_SUBMIT,
    reason="marin-iris 0.2.227 refuses a job no group can place at submit (tested below)",
)


def noop() -> int:
    return 1


def huge(**fields: Any) -> JobRequest:
    return JobRequest(
        name="huge",
        entrypoint=Entrypoint.from_callable(noop),
        resources=ResourceConfig(cpu=1000),
        **fields,
    )


@WAITS
def test_an_unplaceable_job_fails_at_its_scheduling_timeout_saying_why(iris_client: Any) -> None:
    job = iris_client.submit(huge(scheduling_timeout=3))
    with pytest.raises(JobFailedError) as caught:
        job.wait(timeout=120)
    message = str(caught.value)
    assert "not placed within scheduling_timeout=3s" in message
    assert "asks for cpu=1000" in message
    assert "Insufficient CPU" in message  # Iris's own reason
    assert job.info().status is JobStatus.FAILED


@WAITS
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


@pytest.mark.skipif(not REFUSES_AT_SUBMIT, reason="marin-iris 0.2.20 lets such a job wait")
def test_a_job_no_group_can_ever_place_is_refused_at_submit_saying_why(iris_client: Any) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        iris_client.submit(huge(scheduling_timeout=3))
    message = str(caught.value)
    assert "unschedulable" in message
    # Fray's field and sizes a person reads, not Iris's millicores.
    assert "cpu: 1000 cores requested — ResourceConfig.cpu — its VMs have " in message
    assert "need 1000000" not in message
