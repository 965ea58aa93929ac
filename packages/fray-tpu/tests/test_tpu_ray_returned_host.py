"""A preempted TPU host that comes back as a new Ray node is used again.

A preempted VM returns as a new Ray node with the same slice name and TPU worker id, often
before GCS has declared the old node dead: for a while both are listed alive and both claim
the worker id. Here GCS takes minutes to notice a dead node, so every rerun below happens
while the old node still looks alive; the gang must rerun on the returned host within its
preemption budget rather than wait for the old node (or its scheduling timeout).

The cluster: a head and one fake v4-16 slice (two hosts); each test kills one host of the
running gang and brings it back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from fray_testing.ray_cluster import LocalRayCluster
from fray_tpu.ray import launch_on_pod
from tpu_gang_support import record_and_wait, wait_for_files

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# GCS declares a dead node dead after period x threshold: 5 minutes here, longer than any
# test below (the fake cluster's default is about 3 s).
_SLOW_FAILURE_DETECTION = {
    "health_check_initial_delay_ms": 1000,
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 1000,
    "health_check_failure_threshold": 300,
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    with LocalRayCluster(
        head_cpus=4, head_resources={"head_node": 1}, system_config=_SLOW_FAILURE_DETECTION
    ) as c:
        c.add_tpu_slice("v4-16", name="slice-a")
        c.connect(namespace="fray-tpu-returned-host")
        yield c


def test_restore_tpu_host_names_the_bad_field(cluster: LocalRayCluster) -> None:
    with pytest.raises(ValueError, match=r"slice_name 'slice-z' .*added: slice-a"):
        cluster.restore_tpu_host("slice-z", 1)
    with pytest.raises(ValueError, match=r"worker_id 2 is not a host of 'slice-a'.*0\.\.1"):
        cluster.restore_tpu_host("slice-a", 2)
    with pytest.raises(ValueError, match="worker_id must be an int"):
        cluster.restore_tpu_host("slice-a", "1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="worker_id 1 of 'slice-a' is still alive"):
        cluster.restore_tpu_host("slice-a", 1)


def alive_in_gcs(node_id: str) -> bool:
    return any(n["Alive"] for n in ray.nodes() if n["NodeID"] == node_id)


@pytest.mark.parametrize("worker", [1, 0])
def test_preempted_host_that_comes_back_is_used_again(
    cluster: LocalRayCluster, tmp_path: Path, worker: int
) -> None:
    handle = launch_on_pod(
        record_and_wait,
        "v4-16",
        args=[str(tmp_path)],
        max_retries_preemption=1,
        max_retries_failure=0,
        scheduling_timeout=120.0,
        health_interval=0.5,
    )
    try:
        # Hosts lost by an earlier test are still listed alive: the gang must not take them.
        assert handle.wait_for_attempt(1, timeout=60), handle.info()
        alive = {cluster.node_id(node) for node in cluster.alive_nodes()}
        assert {p["node_id"] for p in handle.placement()} <= alive, handle.placement()
        wait_for_files(tmp_path, "started-*", 2)
        lost = cluster.slices["slice-a"][worker]
        cluster.kill_node(lost, preemption=True)
        back = cluster.restore_tpu_host("slice-a", worker)
        assert cluster.node_id(back) != cluster.node_id(lost)
        assert handle.wait_for_attempt(2, timeout=60), (
            f"no second attempt within 60s of slice-a/{worker} coming back: {handle.info()}"
        )
        # The rerun did not wait for GCS: the old node is still listed alive.
        assert alive_in_gcs(cluster.node_id(lost))
        [here] = [p for p in handle.placement() if p["worker"] == worker]
        assert here["node_id"] == cluster.node_id(back), handle.logs()
        (tmp_path / "release").touch()
        results = handle.result(timeout=150)
        assert [(r["TPU_NAME"], r["TPU_WORKER_ID"]) for r in results] == [
            ("slice-a", "0"),
            ("slice-a", "1"),
        ]
        recorded = (tmp_path / "records.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in recorded]
        assert len(records) == 4  # two hosts, two attempts
        info = handle.info()
        assert (info.attempts, info.preemptions, info.failures) == (2, 1, 0)
        assert info.error is not None and f"slice-a/{worker}" in info.error
    finally:  # a failed test must not leave its gang holding the slice
        (tmp_path / "release").touch()
        handle.terminate()
