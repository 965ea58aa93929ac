"""``fray dashboard`` over the in-process Iris cluster: an IrisClient's jobs (the cluster runs
the attempts: counts and the last error, no per-attempt history), logs, a parent and its
child, an actor group, and an unreachable backend beside it. The answers are read from
:class:`fray.dashboard.Dashboard` (what the web page serves, without a web server)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import fray
from fray import Entrypoint, JobInfo, JobRequest
from fray.dashboard import ClientSource, Dashboard
from fray_iris import IrisClient
from fray_testing.conformance import entrypoints as ep

pytestmark = pytest.mark.integration

TIMEOUT = 180.0


class Unreachable:
    """A backend whose every answer is a refused connection."""

    name = "ray"

    def jobs(self) -> Sequence[JobInfo]:
        raise ConnectionError("ray://10.0.0.2:10001 refused the connection")

    job = logs = groups = gangs = jobs  # pyright: ignore[reportAssignmentType]


def _request(name: str, fn: Any, *args: Any) -> JobRequest:
    return JobRequest(name=name, entrypoint=Entrypoint.from_callable(fn, args))


@pytest.fixture
def dashboard(iris_client: IrisClient) -> Iterator[Dashboard]:
    plan = [
        ("dash-ok", ep.print_lines, "first line", "second line"),
        ("dash-broken", ep.print_then_fail, "about to fail", "shard 7 is corrupt"),
        ("dash-parent", ep.spawn_and_wait, "dash-child", ep.add, 1, 2),
    ]
    jobs = [iris_client.submit(_request(name, fn, *args)) for name, fn, *args in plan]
    fray.wait_all(jobs, raise_on_failure=False, timeout=TIMEOUT)
    group = iris_client.create_actor_group(ep.Counter, name="dash-pool", count=2)
    group.wait_ready(timeout=TIMEOUT)
    board = Dashboard([ClientSource(iris_client, groups=[group]), Unreachable()], timeout=60)
    yield board
    board.close()
    group.shutdown()


def test_iris_jobs_reasons_logs_and_children(dashboard: Dashboard) -> None:
    answer = dashboard.jobs({"prefix": "dash-"})
    refused = "ConnectionError: ray://10.0.0.2:10001 refused the connection"
    assert answer["errors"] == [{"source": "ray", "error": refused}]
    rows = {row["name"]: row for row in answer["jobs"]}
    assert {"dash-ok", "dash-broken", "dash-parent"} <= set(rows)
    assert (rows["dash-ok"]["state"], rows["dash-ok"]["failures"]) == ("succeeded", 0)
    broken = rows["dash-broken"]
    assert (broken["state"], broken["failures"]) == ("failed", 1)
    assert "shard 7 is corrupt" in broken["reason"]
    detail = dashboard.job(broken["id"], {"source": "iris"})
    assert (
        detail["root_cause"] is not None and "shard 7 is corrupt" in detail["root_cause"]["error"]
    )
    lines = dashboard.logs(rows["dash-ok"]["id"], {})["lines"]
    assert [line for line in lines if line.endswith("line")] == ["first line", "second line"]
    parent = dashboard.job(rows["dash-parent"]["id"], {})
    assert parent["children"]["total"] == 1
    assert parent["children"]["rows"][0]["name"] == "dash-child"


def test_iris_actor_group(dashboard: Dashboard) -> None:
    (group,) = dashboard.groups({"prefix": "dash-pool"})["groups"]
    assert (group["size"], group["ready"], group["dead"]) == (2, 2, 0)
    assert [m["name"] for m in group["members"]] == ["dash-pool-0", "dash-pool-1"]
