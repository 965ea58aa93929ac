"""The fields the predecessor's 0.2.227 line added, as LocalClient honours them: per-attempt
``timeout``, the job-wide ``max_task_failures``, ``processes_per_task``, placement-only
fields, log tails, and job names holding '/' and ':'."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from fray import (
    Entrypoint,
    InvalidRequestError,
    JobFailedError,
    JobRequest,
    JobStatus,
    LocalClient,
    ResourceConfig,
)
from fray.backend._record import job_id_part


def req(fn: Any, *args: Any, name: str = "job", **kw: Any) -> JobRequest:
    return JobRequest(name=name, entrypoint=Entrypoint.from_callable(fn, args), **kw)


def fail_always() -> None:
    raise ValueError("boom")


def print_lines(count: int) -> None:
    for i in range(count):
        print(f"line {i}")


def test_a_process_attempt_past_its_timeout_fails_not_preempted(client: LocalClient) -> None:
    job = client.submit(
        JobRequest(
            name="sleepy",
            entrypoint=Entrypoint.from_shell("sleep 60"),
            timeout=timedelta(seconds=0.5),
        )
    )
    with pytest.raises(JobFailedError, match=r"ran longer than timeout=0.5s"):
        job.wait(timeout=60)
    assert job.info().preemptions == 0


def test_an_attempt_within_its_timeout_is_untouched(client: LocalClient) -> None:
    job = client.submit(req(print_lines, 2, timeout=30))
    assert job.wait(timeout=60) is JobStatus.SUCCEEDED


def test_max_task_failures_caps_retries_job_wide(client: LocalClient) -> None:
    job = client.submit(req(fail_always, max_retries_failure=5, max_task_failures=2))
    with pytest.raises(
        JobFailedError, match=r"3 failed task attempts, more than max_task_failures=2"
    ):
        job.wait(timeout=60)
    assert job.info().attempts == 3


def test_max_task_failures_zero_leaves_the_failure_budget_alone(client: LocalClient) -> None:
    job = client.submit(req(fail_always, max_retries_failure=2))
    job.wait(timeout=60, raise_on_failure=False)
    assert job.info().attempts == 3


def test_processes_per_task_above_one_is_refused_naming_the_field(client: LocalClient) -> None:
    with pytest.raises(InvalidRequestError) as info:
        client.submit(req(print_lines, 1, processes_per_task=2))
    assert info.value.field == "JobRequest.processes_per_task"


def test_placement_only_fields_are_accepted_as_no_ops(client: LocalClient) -> None:
    resources = ResourceConfig(zone="us-central2-b", image="img:1", regions=["*"])
    job = client.submit(req(print_lines, 1, priority=3, resources=resources))
    assert job.wait(timeout=60) is JobStatus.SUCCEEDED


@pytest.mark.parametrize(
    "name", ["tokenize:documents/fineweb-resiliparse", "gs://bucket/out/step-1", "50%/x"]
)
def test_names_with_slashes_round_trip_through_ids(client: LocalClient, name: str) -> None:
    job = client.submit(req(print_lines, 1, name=name))
    job.wait(timeout=60)
    assert "/" not in job.job_id  # '/' only ever separates a parent from its children
    assert name_of_id_part(job.job_id.rsplit("-", 1)[0]) == name
    assert client.get_job(job.job_id).job_id == job.job_id
    (listed,) = [info for info in client.list_jobs() if info.job_id == job.job_id]
    assert listed.name == name


def name_of_id_part(part: str) -> str:
    """The name a job id part was made from (the inverse of the escaping)."""
    return part.replace("%2F", "/").replace("%25", "%")


def test_id_parts_escape_exactly_slash_and_percent() -> None:
    for name in ["plain", "a/b", "a%b", "a%2Fb", "%%//", "x:y"]:
        part = job_id_part(name)
        assert "/" not in part
        assert name_of_id_part(part) == name
    assert job_id_part("x:y") == "x:y"


def test_logs_max_lines_is_a_tail_of_a_finished_and_of_a_running_job(
    client: LocalClient,
) -> None:
    done = client.submit(req(print_lines, 10))
    done.wait(timeout=60)
    assert list(done.logs(max_lines=3)) == ["line 7", "line 8", "line 9"]
    assert list(done.logs(2)) == ["line 8", "line 9"]  # by position, as the predecessor's
    assert len(list(done.logs(max_lines=0))) == 10  # 0: all of them, as the predecessor's

    release = threading.Event()

    def print_then_block() -> None:
        print_lines(5)
        release.wait()

    running = client.submit(req(print_then_block))
    follower = running.logs(follow=True)
    assert [next(follower) for _ in range(5)][-1] == "line 4"  # all five are printed
    assert running.status() is JobStatus.RUNNING
    assert list(running.logs(max_lines=2)) == ["line 3", "line 4"]
    release.set()
    running.wait(timeout=60)


def test_logs_max_lines_must_be_a_whole_number(client: LocalClient) -> None:
    job = client.submit(req(print_lines, 1))
    with pytest.raises(InvalidRequestError) as info:
        list(job.logs(max_lines=-1))
    assert info.value.field == "logs.max_lines"
