"""The fourth workload, document classification on an actor pool, run unchanged on local, Ray
and Iris; a member is killed in the middle, and every document must be scored exactly once.

The program runs in a subprocess (the backend picked only by ``FRAY_CLIENT_SPEC``); this test
then reads the output shards itself, independently of the program's own checks.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest

# The fixtures (examples/tests/conftest.py): `backend` is each backend in turn, one cluster per
# backend for the module; `example` runs an example program and checks nothing is left behind.
Backend = Any
Example = Any

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_classify(backend: Backend, example: Example, tmp_path: Path) -> None:
    shards, docs, workers, kill_at = 8, 30, 3, 3
    storage = tmp_path / "classify"
    run = example(
        "classify.py",
        "--workers",
        str(workers),
        "--shards",
        str(shards),
        "--docs",
        str(docs),
        "--kill-at-shard",
        str(kill_at),
        "--storage-url",
        f"file://{storage}",
        spec=backend.spec,
        env=backend.env,
    )
    backend.after_run()
    assert run.returncode == 0, run.output
    assert run.final_line.startswith(f"classify: OK on {backend.name}:"), run.final_line
    report = run.report
    # The member holding shard 3 died; the pool sent the shard to another member, once.
    assert (report["members_dead"], report["redispatched"]) == (1, 1)
    assert report["members_started"] >= 2
    # Exactly once: one output shard per input shard, one scored line per document.
    outputs = sorted(p.name for p in (storage / "output").iterdir())
    assert outputs == [f"shard-{s:05d}.jsonl" for s in range(shards)]
    scored: collections.Counter[str] = collections.Counter()
    for name in outputs:
        for line in (storage / "output" / name).read_text().splitlines():
            record = json.loads(line)
            assert 0.0 <= record["score"] <= 1.0
            scored[record["id"]] += 1
    inputs = [
        json.loads(line)["id"]
        for s in range(shards)
        for line in (storage / "input" / f"shard-{s:05d}.jsonl").read_text().splitlines()
    ]
    assert len(inputs) == shards * docs
    assert scored == collections.Counter(inputs)
    assert report["accuracy"] >= 0.9
