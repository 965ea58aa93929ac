"""``train.py --tpu v4-16 --slices 2`` on a local Ray that poses as a TPU pod.

The cluster has two fake v4-16 slices of two hosts each (raylets with the env and resources a
real TPU VM gives Ray); RayClient hands the TPU request to fray-tpu's gang orchestration,
which runs the training function once on every host with its slice's ``MEGASCALE_*`` env.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_train_runs_on_every_host_of_a_two_slice_gang(
    tpu_ray_cluster: Any, example: Any, tmp_path: Path
) -> None:
    pytest.importorskip("fray_tpu.ray", reason="TPU gangs on Ray need fray-tpu[ray]")
    checkpoints = tmp_path / "ckpt"
    run = example(
        "train.py",
        "--tpu",
        "v4-16",
        "--slices",
        "2",
        "--steps",
        "100",
        "--checkpoint-every",
        "50",
        "--checkpoint-url",
        f"file://{checkpoints}",
        spec="ray",
        env=tpu_ray_cluster.env,
    )
    tpu_ray_cluster.assert_no_actors_left()
    assert run.returncode == 0, run.output
    assert run.final_line.startswith("train: OK on ray:"), run.final_line
    report = run.report
    hosts = report["hosts"]
    # One replica per VM: 2 slices x 2 VMs, each a different fake host.
    assert report["replicas"] == 4 and len(hosts) == 4
    assert sorted((h["TPU_NAME"], h["TPU_WORKER_ID"]) for h in hosts) == [
        ("slice-a", "0"),
        ("slice-a", "1"),
        ("slice-b", "0"),
        ("slice-b", "1"),
    ]
    # Multislice env: one slice id per slice, the same on both of its hosts, one coordinator.
    by_slice = {h["TPU_NAME"]: set() for h in hosts}
    for h in hosts:
        by_slice[h["TPU_NAME"]].add(h["MEGASCALE_SLICE_ID"])
    assert sorted(ids.pop() for ids in by_slice.values() if len(ids) == 1) == ["0", "1"]
    assert {h["MEGASCALE_NUM_SLICES"] for h in hosts} == {"2"}
    coordinators = {h["MEGASCALE_COORDINATOR_ADDRESS"] for h in hosts}
    assert len(coordinators) == 1 and None not in coordinators
    assert {h["TPU_ACCELERATOR_TYPE"] for h in hosts} == {"v4-16"}
    assert {h["FRAY_TASK_INDEX"] for h in hosts} == {"0", "1", "2", "3"}
    # Every host trained (its loss fell); host 0 of slice 0 alone wrote the checkpoints.
    for first, last in zip(report["eval_loss_first"], report["eval_loss_last"], strict=True):
        assert last < 0.5 * first
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-000050.npz", "step-000100.npz"]
