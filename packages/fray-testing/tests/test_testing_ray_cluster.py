"""LocalRayCluster: a private multi-node Ray, fake TPU hosts, node kills, clean teardown."""

from __future__ import annotations

import os
import time

import pytest

from fray_testing.ray_cluster import LocalRayCluster

ray = pytest.importorskip("ray", reason="needs fray-testing[ray]")
psutil = pytest.importorskip("psutil", reason="needs fray-testing[ray]")

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _read_env(name: str) -> str | None:
    return os.environ.get(name)


def _niceness() -> int:
    return os.nice(0)


def test_local_ray_cluster_lifecycle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # a dead address must not be used
    before_tmpdir = os.environ.get("RAY_TMPDIR")
    with LocalRayCluster(head_cpus=2, head_resources={"head_node": 1}) as cluster:
        root = cluster.temp_root
        assert os.environ["RAY_TMPDIR"] == root and "RAY_ADDRESS" not in os.environ
        plain = cluster.add_node(num_cpus=1, resources={"worker": 1}, env={"FRAY_X": "on-node"})
        assert "FRAY_X" not in os.environ  # applied around add_node only
        [host] = cluster.add_tpu_slice("v4-8", name="slice-z")
        cluster.connect()
        nodes = {n["NodeID"]: n for n in ray.nodes() if n["Alive"]}
        assert len(nodes) == 3
        tpu = nodes[cluster.node_id(host)]
        assert tpu["Resources"]["TPU"] == 4
        assert tpu["Resources"]["TPU-v4-8-head"] == 1
        assert tpu["Resources"]["slice-z"] == 1
        assert tpu["Labels"]["ray.io/tpu-slice-name"] == "slice-z"
        assert nodes[cluster.node_id(cluster.head_node)]["Resources"]["head_node"] == 1
        read = ray.remote(_read_env).options(num_cpus=0, resources={"worker": 1})
        assert ray.get(read.remote("FRAY_X"), timeout=120) == "on-node"
        # Workers at normal priority (Ray's own default is 15), on every node.
        for resources in ({"worker": 1}, {"TPU": 1}):
            nice = ray.remote(num_cpus=0, resources=resources)(_niceness)
            assert ray.get(nice.remote(), timeout=120) == 0
        cluster.kill_node(plain, preemption=True)
        deadline = time.monotonic() + 60
        while any(n["Alive"] for n in ray.nodes() if n["NodeID"] == cluster.node_id(plain)):
            assert time.monotonic() < deadline, "the killed node is still alive in GCS"
            time.sleep(0.1)
    # Exit: disconnected, every process gone, temp root deleted, env restored.
    assert not ray.is_initialized()
    assert not os.path.exists(root)
    assert os.environ.get("RAY_TMPDIR") == before_tmpdir
    assert "RAY_worker_niceness" not in os.environ
    assert os.environ["RAY_ADDRESS"] == "127.0.0.1:1"
    leftovers = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("RAY_TMPDIR") == root:
                leftovers.append(proc.pid)
        except psutil.Error:
            continue
    assert leftovers == []
