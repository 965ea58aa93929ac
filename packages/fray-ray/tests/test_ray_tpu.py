"""RayClient without fray-tpu (fray-ray does not depend on it): a TPU request says how to
install it, on a local Ray posing as two v4-16 slices."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import os

import pytest

from fray import Entrypoint, JobRequest, ResourceConfig
from fray_ray import RayClient
from fray_testing.ray_cluster import LocalRayCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def task_index() -> int:
    return int(os.environ["FRAY_TASK_INDEX"])


def test_a_tpu_request_without_fray_tpu_says_how_to_install_it(
    fake_tpu_ray_cluster: LocalRayCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fray-ray does not depend on fray-tpu: its gangs are an entry point loaded at the first
    # TPU request, and a driver without them gets the install line instead of an ImportError.
    # fray-ray's own test session has no fray-tpu (no entry point); in the workspace the
    # module is made unimportable, as when fray-tpu's files are gone but not its metadata.
    import sys

    from fray.errors import BackendUnavailableError

    monkeypatch.setitem(sys.modules, "fray_tpu.ray.gang", None)  # as if not installed
    with RayClient(namespace="no-tpu", echo_logs=False) as client:
        request = JobRequest(
            name="tpu",
            entrypoint=Entrypoint.from_callable(task_index),
            resources=ResourceConfig.with_tpu("v4-16"),
        )
        with pytest.raises(BackendUnavailableError) as caught:
            client.submit(request)
    assert 'pip install "fray-core[tpu]"' in str(caught.value)
    assert client.list_jobs() == []
