"""The three acceptance workloads, each run unchanged on local, Ray and Iris.

Each test runs the example program in a subprocess (the backend picked only by
``FRAY_CLIENT_SPEC``), then checks what it produced itself, independently of the program's
own checks: the checkpoint files, the final statistics, the outputs of every shard.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# The fixtures (examples/tests/conftest.py): `backend` is each backend in turn, one cluster per
# backend for the module; `example` runs an example program and checks nothing is left behind.
Backend = Any
Example = Any

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TRAIN_STEPS = 200


def test_train(backend: Backend, example: Example, tmp_path: Path) -> None:
    checkpoints = tmp_path / "ckpt"
    run = example(
        "train.py",
        "--steps",
        str(TRAIN_STEPS),
        "--checkpoint-every",
        "100",
        "--checkpoint-url",
        f"file://{checkpoints}",
        spec=backend.spec,
        env=backend.env,
    )
    backend.after_run()
    assert run.returncode == 0, run.output
    assert run.final_line.startswith(f"train: OK on {backend.name}:"), run.final_line
    report = run.report
    assert report["ok"] and report["backend"] == backend.name
    # The loss fell, by a lot, on the one replica.
    assert report["replicas"] == 1
    (first,), (last,) = report["eval_loss_first"], report["eval_loss_last"]
    assert last < 0.25 * first, (first, last)
    # Checkpoints every 100 steps, written through fsspec, readable, the last one final.
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-000100.npz", "step-000200.npz"]
    with np.load(io.BytesIO((checkpoints / "step-000200.npz").read_bytes())) as data:
        assert int(data["step"]) == TRAIN_STEPS
        assert data["params.w1"].shape == (2, 64)
    # Not a TPU job: no TPU or multislice env reached it.
    (host,) = report["hosts"]
    assert host["TPU_NAME"] is None and host["MEGASCALE_SLICE_ID"] is None

    if backend.name == "local":
        # A re-run (as after a preemption) resumes from the newest checkpoint, not from zero.
        more = TRAIN_STEPS + 50
        again = example(
            "train.py",
            "--steps",
            str(more),
            "--checkpoint-url",
            f"file://{checkpoints}",
            spec=backend.spec,
        )
        assert again.returncode == 0, again.output
        assert again.report["start_steps"] == [TRAIN_STEPS]
        assert f"resuming from file://{checkpoints}/step-{TRAIN_STEPS:06d}.npz" in again.output
        assert sorted(p.name for p in checkpoints.iterdir())[-1] == f"step-{more:06d}.npz"


def test_rl(backend: Backend, example: Example, tmp_path: Path) -> None:
    rollouts, versions = 2, 6
    storage = tmp_path / "rl"
    run = example(
        "rl.py",
        "--rollouts",
        str(rollouts),
        "--versions",
        str(versions),
        "--storage-url",
        f"file://{storage}",
        spec=backend.spec,
        env=backend.env,
    )
    backend.after_run()
    assert run.returncode == 0, run.output
    assert run.final_line.startswith(f"rl: OK on {backend.name}:"), run.final_line
    report = run.report
    assert report["statuses"] == ["succeeded"] * (rollouts + 1)
    # The trainer published every version, through storage and the coordinator actor.
    assert report["weights"]["published"] == list(range(versions + 1))
    published = sorted(p.name for p in (storage / "weights").iterdir())
    assert published == [f"v{v:04d}.json" for v in range(versions + 1)]
    # The loop runs in step: every rollout observed every version the trainer learned from,
    # played one lesson with each, and each lesson was reported exactly once.
    curriculum = report["curriculum"]
    assert curriculum["reported_lessons"] == list(range(rollouts * versions))
    assert curriculum["duplicates"] == [] and curriculum["unknown"] == []
    assert report["trainer"]["batches_used"] == rollouts * versions
    for result in report["rollouts"]:
        assert result["versions_seen"] == list(range(versions))
        assert report["weights"]["observed"][str(result["rollout"])] == list(range(versions))
        assert curriculum["per_rollout"][str(result["rollout"])] == result["batches"] == versions
    episodes = list((storage / "episodes").iterdir())
    assert len(episodes) == rollouts * versions
    # The policy learned: the best arm's mean is 0.9, a uniform policy gets 0.4.
    trainer = report["trainer"]
    assert trainer["expected_reward_initial"] == pytest.approx(0.4)
    assert trainer["expected_reward_final"] > 0.7
    final = json.loads((storage / "weights" / f"v{versions:04d}.json").read_text())
    assert final["logits"] == trainer["logits"]


def test_pipeline(backend: Backend, example: Example, tmp_path: Path) -> None:
    shards, workers, kill_at = 10, 3, 2
    storage = tmp_path / "pipe"
    run = example(
        "pipeline.py",
        "--workers",
        str(workers),
        "--shards",
        str(shards),
        "--kill-at-shard",
        str(kill_at),
        "--storage-url",
        f"file://{storage}",
        spec=backend.spec,
        env=backend.env,
    )
    backend.after_run()
    assert run.returncode == 0, run.output
    assert run.final_line.startswith(f"pipeline: OK on {backend.name}:"), run.final_line
    report = run.report
    # One worker was lost holding shard 2; the shard went to another worker.
    assert len(report["dead"]) == 1 and report["reassigned"] == [kill_at]
    # Exactly once: one output per shard, each accepted once, nothing else in the folder.
    names = [f"shard-{s:05d}" for s in range(shards)]
    assert report["accepted"] == {str(s): 1 for s in range(shards)}
    assert sorted(p.name for p in (storage / "output").iterdir()) == [f"{n}.json" for n in names]
    total = 0
    for name in names:
        record = json.loads((storage / "output" / f"{name}.json").read_text())
        words = (storage / "input" / f"{name}.txt").read_text().split()
        assert record["words"] == len(words)
        assert sum(record["counts"].values()) == len(words)
        assert record["worker"] not in report["dead"] or record["shard"] != kill_at
        total += 1
    assert total == shards
    assert sum(report["by_worker"].values()) == shards
    # The worker died (SystemExit ends an actor on every backend) and the caller was told so.
    assert [loss["error"] for loss in report["losses"]] == ["ActorDiedError"]
