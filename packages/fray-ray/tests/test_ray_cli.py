"""The ``fray`` CLI against a real local Ray: ``fray run --spec ray`` submits a command job
through the Jobs API and exits with its code; ``fray jobs`` in a later process finds it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

pytest.importorskip("ray")
from fray_testing.ray_cluster import LocalRayCluster

FRAY = [sys.executable, "-m", "fray.cli"]


@pytest.fixture(scope="module")
def env() -> Iterator[dict[str, str]]:
    with LocalRayCluster(head_cpus=4, head_resources={"head_node": 1}, dashboard=True) as cluster:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("FRAY_CLIENT_SPEC", "FRAY_JOB_ID", "RAY_ADDRESS")
        }
        env["RAY_ADDRESS"] = cluster.address
        env["PYTHONUNBUFFERED"] = "1"
        yield env


def fray(env: dict[str, str], *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FRAY, *args], capture_output=True, text=True, env=env, timeout=timeout, check=False
    )


def fray_run(env: dict[str, str], name: str, code: str) -> subprocess.CompletedProcess[str]:
    """``fray run --spec ray`` of ``python -c code`` with a small footprint."""
    args = ["run", "--spec", "ray", "--name", name, "--cpu", "0.5", "--ram", "64m"]
    return fray(env, *args, "--", sys.executable, "-c", code)


def test_run_streams_output_and_exits_with_the_job_code(env: dict[str, str]) -> None:
    ok = fray(
        env,
        "run",
        "--spec",
        "ray",
        "--name",
        "cli-hello",
        "--cpu",
        "0.5",
        "--ram",
        "64m",
        "--env",
        "GREETING=hello-from-ray",
        "--",
        sys.executable,
        "-c",
        "import os; print(os.environ['GREETING'])",
    )
    assert ok.returncode == 0, ok.stderr
    assert "hello-from-ray" in ok.stdout
    failed = fray_run(env, "cli-exit", "raise SystemExit(7)")
    assert failed.returncode == 7, failed.stderr


def test_jobs_commands_find_a_job_started_by_another_process(env: dict[str, str]) -> None:
    started = fray_run(env, "cli-listed", "print('listed-line')")
    assert started.returncode == 0, started.stderr
    listed = fray(env, "jobs", "list", "--spec", "ray", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    [row] = [r for r in rows if r["name"].startswith("cli-listed")]
    assert row["status"] == "succeeded"
    status = fray(env, "jobs", "status", row["job_id"], "--spec", "ray")
    assert status.returncode == 0, status.stderr
    assert "succeeded" in status.stdout
    logs = fray(env, "jobs", "logs", row["job_id"], "--spec", "ray")
    assert logs.returncode == 0, logs.stderr
    assert "listed-line" in logs.stdout


def test_unknown_job_is_a_one_line_error(env: dict[str, str]) -> None:
    missing = fray(env, "jobs", "status", "no-such-job-0000", "--spec", "ray")
    assert missing.returncode != 0
    assert "Traceback" not in missing.stderr
    assert "no-such-job-0000" in missing.stderr
