"""Helpers shared by the TPU gang tests on fake clusters: a payload that records where it
ran and waits to be released, and a wait on the files it writes.

Ray workers import ``record_and_wait`` from this module by name (the fake cluster gives its
nodes the driver's ``sys.path``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def record_and_wait(workdir: str) -> dict[str, Any]:
    """Writes this host's env, then waits for the test's release file."""
    env = {
        key: os.environ.get(key)
        for key in (
            "TPU_NAME",
            "TPU_WORKER_ID",
            "MEGASCALE_SLICE_ID",
            "MEGASCALE_NUM_SLICES",
            "MEGASCALE_COORDINATOR_ADDRESS",
            "FRAY_TASK_INDEX",
        )
    }
    with open(os.path.join(workdir, "records.jsonl"), "a") as out:
        out.write(json.dumps(env) + "\n")
    Path(workdir, f"started-{env['TPU_NAME']}-{env['TPU_WORKER_ID']}").touch()
    deadline = time.monotonic() + 150
    while not os.path.exists(os.path.join(workdir, "release")):
        if time.monotonic() > deadline:
            raise RuntimeError("never released")
        time.sleep(0.05)
    return env


def wait_for_files(directory: Path, pattern: str, count: int, timeout: float = 150) -> None:
    """Waits until ``count`` files match ``pattern`` in ``directory``; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while len(list(directory.glob(pattern))) < count:
        assert time.monotonic() < deadline, f"fewer than {count} {pattern} in {timeout}s"
        time.sleep(0.05)
