"""A RayClient's connection and shutdown, as a driver sees them (issue 36), in a driver of
its own that starts its own local Ray (``fray_ray_lifecycle_support``):

- Ray started by ``current_client()`` (``FRAY_CLIENT_SPEC=ray``) from a thread that then
  ends stays up: Ray ties the processes it starts to the thread that started them, so Fray
  starts it from a thread of its own;
- ``shutdown()`` returns within its documented bound (about 40 s) with a running job, an
  actor call in flight and an actor that can never be placed;
- afterwards the call in flight and a new call raise Fray's ``ActorDiedError`` (never a bare
  ``ValueError``), and nothing starts a new Ray behind the user's back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SHUTDOWN_BOUND_S = 40.0  # RayClient's docstring


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("ray")
    tests = os.path.dirname(__file__)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "FRAY_JOB_ID")}
    env.update(
        FRAY_CLIENT_SPEC="ray",
        RAY_TMPDIR=str(root),
        PYTHONPATH=os.pathsep.join(p for p in (tests, env.get("PYTHONPATH", "")) if p),
    )
    os.makedirs(root / "ray", exist_ok=True)
    out = subprocess.run(
        [sys.executable, "-m", "fray_ray_lifecycle_support"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tests,
        check=False,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"the driver printed no result:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return json.loads(lines[-1].removeprefix("RESULT "))


def test_ray_started_from_a_short_lived_thread_outlives_it(seen: dict[str, Any]) -> None:
    assert seen["client"] == "RayClient"
    assert seen["after_the_thread_ended"] == 3


def test_shutdown_returns_within_its_bound(seen: dict[str, Any]) -> None:
    assert seen["pending_actor"] == "pending"
    assert seen["shutdown_s"] < SHUTDOWN_BOUND_S
    assert seen["job_status"] == "stopped"


def test_after_shutdown_actor_calls_raise_actor_died_and_start_no_ray(
    seen: dict[str, Any],
) -> None:
    assert seen["future_error"] == "fray.errors.ActorDiedError"
    assert seen["call_error"] == "fray.errors.ActorDiedError"
    assert seen["ray_initialized_after"] is False
