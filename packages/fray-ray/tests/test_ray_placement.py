"""Placement on a real local Ray: ``JobRequest.scheduling_timeout``, ``JobInfo.pending_reason``
and requests no node could ever take (Ray does not say whether a cluster can grow, so they
wait, and say why).

The cluster: a head node (1 CPU, ``head_node`` resource) and a worker node with 3 CPUs in
region ``test-east1``; no dashboard. A job that asks for 3 CPUs fits only the worker, so a
3-CPU blocker makes the next one wait for it.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fray import Entrypoint, JobHandle, JobRequest, JobStatus, ResourceConfig
from fray.errors import InvalidRequestError, JobFailedError
from fray_ray import RayClient
from fray_ray_placement_support import UNPLACEABLE, first_reason, hold_cpus, placement_cluster

ray = pytest.importorskip("ray")

SMALL = {"ram": "64m"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    yield from placement_cluster()


def sleep_for(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def job(name: str, seconds: float = 0, **fields: Any) -> JobRequest:
    resources = {**SMALL, **fields.pop("resources", {})}
    return JobRequest(
        name=name,
        entrypoint=Entrypoint.from_callable(sleep_for, args=(seconds,)),
        resources=ResourceConfig(**resources),
        **fields,
    )


def blocker(client: RayClient) -> JobHandle:
    """A job holding the worker's 3 CPUs until it is stopped."""
    return hold_cpus(client, job("blocker", 600, resources={"cpu": 3}), 3)


@UNPLACEABLE
def test_a_callable_no_node_could_ever_take_waits_and_fails_at_its_scheduling_timeout(
    client: RayClient, resources: dict[str, Any], says: str
) -> None:
    handle = client.submit(job("too-big", resources=resources, scheduling_timeout=1))
    with pytest.raises(JobFailedError) as caught:
        handle.wait(timeout=120)
    message = str(caught.value)
    assert "not placed within scheduling_timeout=1s" in message
    assert says in message
    assert "it waits until the cluster has such a node" in message


def test_a_command_job_refuses_a_scheduling_timeout_naming_it(client: RayClient) -> None:
    request = JobRequest(
        name="command-timeout",
        entrypoint=Entrypoint.from_command(sys.executable, "-c", "print(1)"),
        resources=ResourceConfig(**SMALL),
        scheduling_timeout=5,
    )
    with pytest.raises(InvalidRequestError, match="Jobs API") as caught:
        client.submit(request)
    assert caught.value.field == "JobRequest.scheduling_timeout"


def wait_for_file(path: str) -> str:
    deadline = time.monotonic() + 120
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)  # polls the test's release file
    return "released"


def test_a_job_placed_in_time_outlives_its_scheduling_timeout(
    client: RayClient, tmp_path: Path
) -> None:
    # Long enough for a busy machine to start the task; the job then runs past it.
    limit = 10
    release = tmp_path / "release"
    submitted = time.monotonic()
    handle = client.submit(
        JobRequest(
            name="placed",
            entrypoint=Entrypoint.from_callable(wait_for_file, args=(str(release),)),
            resources=ResourceConfig(**SMALL),
            scheduling_timeout=limit,
        )
    )
    try:
        while handle.status() is JobStatus.PENDING:  # polls: placed, or failed at the limit
            time.sleep(0.05)
        assert handle.status() is JobStatus.RUNNING, handle.info()
        time.sleep(max(0.0, submitted + limit + 1 - time.monotonic()))  # the limit passes
        assert handle.status() is JobStatus.RUNNING, handle.info()
    finally:
        release.touch()
    assert handle.result(timeout=120) == "released"
    assert handle.info().pending_reason is None


def test_a_job_waiting_for_a_busy_node_fails_at_its_scheduling_timeout_saying_why(
    client: RayClient,
) -> None:
    hold = blocker(client)
    try:
        handle = client.submit(job("waits", resources={"cpu": 3}, scheduling_timeout=2))
        with pytest.raises(JobFailedError) as caught:
            handle.wait(timeout=120)
    finally:
        hold.terminate()
    message = str(caught.value)
    assert "not placed within scheduling_timeout=2s" in message
    assert "each of its 1 replica(s) asks for cpu=3" in message
    assert "1 of 1 replica(s) waiting for a node: each asks for CPU=3" in message
    assert "the 1 node(s) that could take it are busy" in message
    assert handle.status() is JobStatus.FAILED
    assert handle.info().pending_reason is None


def reason_behind_blocker(client: RayClient, request: JobRequest) -> tuple[JobHandle, str]:
    """Submits ``request`` while a blocker holds the worker; its pending reason, once it
    has one (the blocker is then stopped, so the job can run)."""
    hold = blocker(client)
    try:
        handle = client.submit(request)
        return handle, first_reason(lambda: handle.info().pending_reason)
    finally:
        hold.terminate()


def test_a_waiting_job_says_why_then_runs_once_the_node_is_free(client: RayClient) -> None:
    request = job("patient", resources={"cpu": 3}, scheduling_timeout=600)
    handle, reason = reason_behind_blocker(client, request)
    assert reason.startswith("1 of 1 replica(s) waiting for a node: each asks for CPU=3, memory=")
    assert "the 1 node(s) that could take it are busy (free: CPU=0" in reason
    assert handle.result(timeout=120) == "slept"
    assert handle.info().pending_reason is None


def test_a_job_without_a_scheduling_timeout_says_why_it_may_wait(client: RayClient) -> None:
    handle, reason = reason_behind_blocker(client, job("unbounded", resources={"cpu": 3}))
    assert reason.startswith("a replica may be waiting for a node: each asks for CPU=3")
    assert "busy" in reason
    assert handle.result(timeout=120) == "slept"


def test_disk_no_node_advertises_runs_and_is_noted_once_per_client(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # No node has a 'disk' resource: a job that sizes its disk runs all the same (as
    # Marin's steps do, disk="10g"), and each client says once that Ray does not reserve it.
    import logging

    request = job("sized", resources={"disk": "10g"})
    with caplog.at_level(logging.WARNING, logger="fray.ray"):
        for _ in range(2):
            with RayClient(namespace="disk-noted", echo_logs=False) as client:
                handles = [client.submit(request) for _ in range(3)]
                assert [h.result(timeout=120) for h in handles] == ["slept"] * 3
    notes = [r.getMessage() for r in caplog.records if "resources.disk" in r.getMessage()]
    assert len(notes) == 2  # one per client
    assert notes[0].startswith("resources.disk='10g': Ray does not reserve disk")


def test_a_workspace_ray_cannot_ship_to_a_task_is_refused_at_submit(tmp_path: Path) -> None:
    # create_environment()'s workspace (the current directory) is the driver's own code: it
    # runs with no task-level working_dir. Any other local directory is refused at submit,
    # not failed later by Ray ("only supported at the job level").
    from fray import EnvironmentConfig
    from fray.types import create_environment

    with RayClient(namespace="workspace", echo_logs=False) as client:
        here = job("here", environment=create_environment())
        assert client.submit(here).result(timeout=120) == "slept"
        elsewhere = job("elsewhere", environment=EnvironmentConfig(workspace=str(tmp_path)))
        with pytest.raises(InvalidRequestError) as caught:
            client.submit(elsewhere)
        assert caught.value.field == "JobRequest.environment.workspace"
        assert "Run the driver from that directory" in str(caught.value)
        assert client.list_jobs()[-1].name == "here"  # nothing was submitted
