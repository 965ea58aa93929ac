"""RayClient's TPU route, through fray-tpu, on a local Ray posing as two v4-16 slices (no
TPUs): a TPU request becomes a gang job on the client's engine, and a driver that runs TPU
jobs for days keeps neither their records nor their hub actors forever."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from fray import Entrypoint, JobRequest, JobStatus, ResourceConfig, TpuConfig
from fray.errors import JobFailedError, JobNotFoundError
from fray_ray import RayClient
from fray_testing.ray_cluster import LocalRayCluster
from fray_tpu import TpuJobFailedError
from fray_tpu.ray.gang import hub_name

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def task_index() -> int:
    return int(os.environ["FRAY_TASK_INDEX"])


def fail() -> None:
    raise ValueError("the gang's own failure")


def _hub_gone(job_id: str) -> bool:
    import ray

    try:
        ray.get_actor(hub_name(job_id))
    except ValueError:
        return True
    return False


def _eventually(check: Any, timeout: float = 60) -> bool:
    """Whether ``check()`` holds within ``timeout`` (a job's hub is killed just after its
    end, from the client's event thread)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)  # polls a bounded wait
    return False


def test_finished_tpu_jobs_age_out_and_release_their_hub(
    fake_tpu_ray_cluster: LocalRayCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FRAY_JOB_HISTORY", "1")
    client = RayClient(namespace="tpu-route", echo_logs=False)
    try:
        request = JobRequest(
            name="tpu-index",
            entrypoint=Entrypoint.from_callable(task_index),
            resources=ResourceConfig.with_tpu("v4-16"),
        )
        first = client.submit(request)
        assert first.result(timeout=180) == [0, 1]  # one replica per host of the slice
        assert client.get_job(first.job_id) == first
        second = client.submit(request)
        assert second.result(timeout=180) == [0, 1]

        def listed() -> list[str]:
            return [info.job_id for info in client.list_jobs()]

        # One finished TPU job is kept: the older one ages out.
        assert first.job_id not in listed()
        assert second.job_id in listed()
        with pytest.raises(JobNotFoundError):
            client.get_job(first.job_id)
        assert client.get_job(second.job_id) == second
        # Neither job left its hub running; their handles still answer.
        for handle in (first, second):
            assert _eventually(lambda h=handle: _hub_gone(h.job_id))
            assert handle.status() is JobStatus.SUCCEEDED
            assert handle.info().attempts == 1
        failing = client.submit(
            JobRequest(
                name="tpu-fail",
                entrypoint=Entrypoint.from_callable(fail),
                resources=ResourceConfig.with_tpu("v4-16"),
            )
        )
        with pytest.raises(TpuJobFailedError) as caught:
            failing.wait(timeout=180)
        assert (caught.value.attempts, caught.value.failures, caught.value.reason) == (
            1,
            1,
            "failure",
        )
        assert isinstance(caught.value.__cause__, ValueError)
    finally:
        client.shutdown()


def test_a_tpu_job_no_node_can_take_waits_and_fails_at_its_scheduling_timeout_saying_why(
    fake_tpu_ray_cluster: LocalRayCluster,
) -> None:
    """No node offers a v4-8 slice (the cluster has two v4-16 slices). Ray does not say
    whether this cluster can grow, so the job is not refused: it waits, and says why; its
    scheduling timeout ends it."""
    with RayClient(namespace="no-slice", echo_logs=False) as client:
        handle = client.submit(
            JobRequest(
                name="no-such-slice",
                entrypoint=Entrypoint.from_callable(task_index),
                resources=ResourceConfig(device=TpuConfig(variant="v4-8")),
                scheduling_timeout=2,
            )
        )
        with pytest.raises(JobFailedError) as caught:
            handle.wait(timeout=120)
        message = str(caught.value)
        assert "not placed within scheduling_timeout=2s" in message
        assert "asked for 1 slice(s) of v4-8" in message
        assert "the cluster has no v4-8 slice" in message
        assert handle.info().attempts == 0
