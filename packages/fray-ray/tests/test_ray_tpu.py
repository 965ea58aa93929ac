"""RayClient's TPU route on a local Ray posing as two v4-16 slices (no TPUs): a TPU request
becomes a fray-tpu gang, and a driver that runs TPU jobs for days keeps neither their
handles nor their state actors forever."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from fray import Entrypoint, JobRequest, JobStatus, ResourceConfig
from fray.errors import JobNotFoundError
from fray_ray import RayClient
from fray_testing.ray_cluster import LocalRayCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def task_index() -> int:
    return int(os.environ["FRAY_TASK_INDEX"])


def _state_actor(handle: Any) -> dict[str, Any]:
    """The GCS record of a TPU job's state actor."""
    from ray._private import state as ray_state

    return ray_state.actors(actor_id=handle._state._actor_id.hex())


def _eventually(check: Any, timeout: float = 60) -> bool:
    """Whether ``check()`` holds within ``timeout`` (the client learns that a TPU job ended
    from Ray's completion callback, which may run just after ``result()`` returns)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def test_finished_tpu_jobs_age_out_and_release_their_state(
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
        assert client.get_job(first.job_id) is first
        second = client.submit(request)
        assert second.result(timeout=180) == [0, 1]

        def listed() -> list[str]:
            return [info.job_id for info in client.list_jobs()]

        # One finished TPU job is kept: the older one ages out.
        assert _eventually(lambda: first.job_id not in listed())
        assert second.job_id in listed()
        with pytest.raises(JobNotFoundError):
            client.get_job(first.job_id)
        assert client.get_job(second.job_id) is second
        # Neither job left its state actor running; their handles still answer.
        for handle in (first, second):
            assert _eventually(lambda h=handle: _state_actor(h)["State"] == "DEAD")
            assert handle.status() is JobStatus.SUCCEEDED
            assert handle.info().attempts == 1
    finally:
        client.shutdown()
