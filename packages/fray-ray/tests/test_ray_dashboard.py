"""``fray dashboard`` over a real local Ray: a RayClient's jobs (a preemption kept apart from
a failure, each attempt, the root cause, logs), an actor group with a dead member, and an
unreachable backend beside it. The answers are read from :class:`fray.dashboard.Dashboard`
(what the web page serves, without a web server: fray-ray's tests install no Starlette)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

import fray
from fray import ActorConfig, Entrypoint, JobInfo, JobRequest
from fray.dashboard import ClientSource, Dashboard
from fray.errors import ActorError
from fray_testing.conformance import entrypoints as ep

pytestmark = pytest.mark.integration

TIMEOUT = 180.0


@pytest.fixture(scope="module")
def cluster(ray_cluster: str) -> str:
    return ray_cluster


class Unreachable:
    """A backend whose every answer is a refused connection."""

    name = "iris"

    def jobs(self) -> Sequence[JobInfo]:
        raise ConnectionError("iris://10.0.0.1:10000 refused the connection")

    job = logs = groups = gangs = jobs  # pyright: ignore[reportAssignmentType]


def _request(name: str, fn: Any, *args: Any, **kw: Any) -> JobRequest:
    return JobRequest(name=name, entrypoint=Entrypoint.from_callable(fn, args), **kw)


@pytest.fixture
def dashboard(client: Any, tmp_path: Path) -> Iterator[Dashboard]:
    plan = [
        ("recovers", ep.follow_plan, str(tmp_path / "fs"), "FS", os.getpid()),
        ("preempted", ep.follow_plan, str(tmp_path / "ps"), "PS", os.getpid()),
        ("broken", ep.print_then_fail, "about to fail", "shard 7 is corrupt"),
    ]
    retries = {"max_retries_failure": 1, "max_retries_preemption": 1}
    jobs = [client.submit(_request(name, fn, *args, **retries)) for name, fn, *args in plan]
    fray.wait_all(jobs, raise_on_failure=False, timeout=TIMEOUT)
    group = client.create_actor_group(
        ep.FailOnIndex, 1, name="pool", count=3, actor_config=ActorConfig(max_restarts=0)
    )
    with pytest.raises(ActorError):
        group.wait_ready(timeout=TIMEOUT)  # every member: index 1 never starts
    group.wait_ready(count=2, timeout=TIMEOUT)
    board = Dashboard([ClientSource(client, groups=[group]), Unreachable()], timeout=60)
    yield board
    board.close()
    group.shutdown()


def test_ray_jobs_attempts_and_root_causes(dashboard: Dashboard) -> None:
    answer = dashboard.jobs({})
    refused = "ConnectionError: iris://10.0.0.1:10000 refused the connection"
    assert answer["errors"] == [{"source": "iris", "error": refused}]
    rows = {row["name"]: row for row in answer["jobs"]}
    assert {name: row["source"] for name, row in rows.items()} == dict.fromkeys(rows, "ray")
    counts = {name: (r["state"], r["failures"], r["preemptions"]) for name, r in rows.items()}
    assert counts == {
        "recovers": ("succeeded", 1, 0),
        "preempted": ("succeeded", 0, 1),
        "broken": ("failed", 2, 0),
    }
    assert rows["recovers"]["reason"].startswith("attempt 1 failed: ConformanceError")
    recovers = dashboard.job(rows["recovers"]["id"], {"source": "ray"})
    assert [a["kind"] for a in recovers["attempts"]] == ["failed", "succeeded"]
    assert (recovers["root_cause"]["attempt"], recovers["root_cause"]["recovered"]) == (1, True)
    preempted = dashboard.job(rows["preempted"]["id"], {})
    assert [a["kind"] for a in preempted["attempts"]] == ["preempted", "succeeded"]
    assert preempted["root_cause"] is None  # a preemption is not a failure
    broken = dashboard.job(rows["broken"]["id"], {})
    assert broken["root_cause"]["attempt"] == 1
    assert "shard 7 is corrupt" in broken["root_cause"]["error"]
    assert "about to fail" in dashboard.logs(rows["broken"]["id"], {})["lines"]


def test_ray_actor_group_with_a_dead_member(dashboard: Dashboard) -> None:
    (group,) = dashboard.groups({"source": "ray"})["groups"]
    assert (group["size"], group["ready"], group["dead"]) == (3, 2, 1)
    (dead,) = [m for m in group["members"] if m["state"] == "dead"]
    assert dead["name"] == "pool-1" and "actor 1 refuses to start" in dead["error"]
