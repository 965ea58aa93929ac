"""Node loss during a TPU gang run, on a fake cluster of its own (hosts stay dead).

The cluster: a head, one plain node and two fake v4-16 slices. The first test kills the
plain node under a running gang (nothing of the gang runs there); the host-kill test then
kills a TPU host and adds a replacement slice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fray_testing.ray_cluster import LocalRayCluster
from fray_tpu.ray import launch_on_pod
from tpu_gang_support import record_and_wait, wait_for_files

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FAST = {"scheduling_timeout": 180.0, "health_interval": 0.5}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    with LocalRayCluster(head_cpus=4, head_resources={"head_node": 1}) as c:
        c.add_node(num_cpus=2, resources={"spare": 1})
        c.add_tpu_slice("v4-16", name="slice-a")
        c.add_tpu_slice("v4-16", name="slice-b")
        c.connect(namespace="fray-tpu-faults")
        yield c


def test_a_node_outside_the_gang_dying_leaves_the_gang_alone(
    cluster: LocalRayCluster, tmp_path: Path
) -> None:
    spare = next(
        n
        for n in cluster.alive_nodes()
        if n is not cluster.head_node and all(n not in s for s in cluster.slices.values())
    )
    handle = launch_on_pod(
        record_and_wait,
        "v4-16",
        args=[str(tmp_path)],
        max_retries_preemption=2,
        max_retries_failure=0,
        **FAST,
    )
    wait_for_files(tmp_path, "started-*", 2)
    cluster.kill_node(spare, preemption=True)
    (tmp_path / "release").touch()
    results = handle.result(timeout=150)
    assert [r["TPU_WORKER_ID"] for r in results] == ["0", "1"]
    info = handle.info()
    assert (info.attempts, info.preemptions, info.failures) == (1, 0, 0)


def test_host_killed_mid_run_is_a_preemption_and_reruns_with_fresh_megascale(
    cluster: LocalRayCluster, tmp_path: Path
) -> None:
    handle = launch_on_pod(
        record_and_wait,
        "v4-16",
        num_slices=2,
        args=[str(tmp_path)],
        max_retries_preemption=1,
        max_retries_failure=0,
        **FAST,
    )
    wait_for_files(tmp_path, "started-*", 4)
    first = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert {(r["TPU_NAME"], r["MEGASCALE_SLICE_ID"]) for r in first} == {
        ("slice-a", "0"),
        ("slice-b", "1"),
    }
    cluster.kill_node(cluster.slices["slice-a"][1], preemption=True)
    # slice-a is now incomplete; new capacity arrives as another slice.
    cluster.add_tpu_slice("v4-16", name="slice-c")
    assert handle.wait_for_attempt(2, timeout=150)
    (tmp_path / "release").touch()
    results = handle.result(timeout=150)
    assert [(r["TPU_NAME"], r["TPU_WORKER_ID"]) for r in results] == [
        ("slice-b", "0"),
        ("slice-b", "1"),
        ("slice-c", "0"),
        ("slice-c", "1"),
    ]
    # Recomputed from the live gang: slice-b is now slice 0 and hosts the coordinator.
    assert [r["MEGASCALE_SLICE_ID"] for r in results] == ["0", "0", "1", "1"]
    assert [r["FRAY_TASK_INDEX"] for r in results] == ["0", "1", "2", "3"]
    assert {r["MEGASCALE_NUM_SLICES"] for r in results} == {"2"}
    info = handle.info()
    assert (info.attempts, info.preemptions, info.failures) == (2, 1, 0)
    assert info.error is not None and "slice-a/1" in info.error
