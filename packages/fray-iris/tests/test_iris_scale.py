"""Controller calls at scale, on the in-process Iris cluster, counted through a wrapper of
the Iris client (``iris_counting.CountingIris``), not timed: the states of many jobs are
asked in one call per 1,000 ids; a wait over many jobs asks, each round, one state call
for all the unfinished ones (and for each job, once at its end, its status and tasks); a
look at an actor group is two calls whatever its size, and ``wait_ready(count=k)`` returns
on the first look that finds k members serving."""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from iris.client import IrisClient as RawIrisClient
from iris.cluster.types import JobName

import fray
from fray import Entrypoint, JobRequest, JobStatus, ResourceConfig
from fray_iris import IrisClient
from fray_iris._convert import line
from fray_iris._iris_0_2_20 import STATES_PER_CALL
from fray_testing.conformance import entrypoints as ep
from iris_counting import CountingIris, register_endpoints

pytestmark = pytest.mark.integration

# A job's status, as each Iris line's adapter asks for it (0.2.227 through a Job object).
STATUS_CALLS = {"status", "job"}


@pytest.fixture
def counted(iris_cluster: Any) -> Iterator[tuple[IrisClient, CountingIris]]:
    """A Fray client whose every controller call goes through a :class:`CountingIris`."""
    raw = RawIrisClient.remote(iris_cluster.url)
    counting = CountingIris(raw)
    client = IrisClient(iris_client=counting, results_url=iris_cluster.results_url)  # type: ignore[arg-type]
    yield client, counting
    client.shutdown()
    raw.shutdown()


def _tag() -> str:
    return os.urandom(3).hex()


def test_states_of_many_jobs_are_asked_a_thousand_ids_a_call(
    counted: tuple[IrisClient, CountingIris],
) -> None:
    client, counting = counted
    job = client.submit(
        JobRequest(name=f"known-{_tag()}", entrypoint=Entrypoint.from_callable(ep.add, [1, 2]))
    )
    assert job.wait(timeout=120) is JobStatus.SUCCEEDED
    absent = [JobName.from_wire(f"/{client.user}/absent-{_tag()}-{i}") for i in range(2_400)]
    counting.clear()
    states = line.states(counting, [JobName.from_wire(job.iris_job_id), *absent])
    assert states == {job.iris_job_id: "succeeded"}  # jobs Iris does not know are left out
    assert [(c.name, c.ids) for c in counting.calls()] == [
        ("get_job_states", STATES_PER_CALL),
        ("get_job_states", STATES_PER_CALL),
        ("get_job_states", 401),
    ]


def test_wait_all_asks_all_unfinished_jobs_states_in_one_call_a_round(
    counted: tuple[IrisClient, CountingIris],
) -> None:
    client, counting = counted
    count = 6
    jobs = [
        client.submit(
            JobRequest(
                name=f"sweep-{i}-{_tag()}",
                # Long enough that none ends before the last is submitted (and counted).
                entrypoint=Entrypoint.from_command("sleep", f"{2 + 0.2 * i:.1f}"),
            )
        )
        for i in range(count)
    ]
    submitted = time.time()  # from now on every job is watched
    counting.clear()
    ends: list[float] = []  # when each record ended, in this process
    for job in jobs:
        job.add_done_callback(lambda _job: ends.append(time.time()))
    assert fray.wait_all(jobs, timeout=180) == [JobStatus.SUCCEEDED] * count
    calls = counting.calls()
    rounds = [c for c in calls if c.name == "get_job_states" and c.at > submitted]
    assert rounds, "no state call was made"
    for call in rounds:  # each round: one call, for every job not yet ended then
        assert call.ids == sum(1 for end in ends if end > call.at), (call, ends)
    # Besides the rounds, each job once, at its end: its status and its tasks.
    others = collections.Counter(c.name for c in calls if c.name != "get_job_states")
    assert sum(others[name] for name in STATUS_CALLS) == count, others
    assert others["list_tasks"] == count, others
    assert set(others) <= {*STATUS_CALLS, "list_tasks"}, others


def test_a_look_at_an_actor_group_is_two_calls_whatever_its_size(
    counted: tuple[IrisClient, CountingIris], iris_cluster: Any
) -> None:
    client, counting = counted
    size, ready = 40, 25
    name = f"wide-{_tag()}"
    # Eight GPUs a member: the cluster's one GPU VM takes one member; the others wait.
    group = client.create_actor_group(
        ep.Counter, name=name, count=size, resources=ResourceConfig.with_gpu("H100", 8)
    )
    try:
        wire = group.job.iris_job_id
        # The last ones (never the one placed), as their tasks would register them.
        register_endpoints(iris_cluster.url, wire, name, range(size - ready, size))
        me = threading.get_ident()
        counting.clear()
        handles = group.wait_ready(count=ready, timeout=60)
        # The first look finds them all: two calls, the endpoints by prefix and the tasks.
        assert [c.name for c in counting.calls(me)] == ["list_endpoints", "list_tasks"]
        assert len(handles) == ready
        counting.clear()
        for _ in range(3):
            assert group.statuses().count(JobStatus.RUNNING) >= ready
        looks = [c.name for c in counting.calls(me)]
        assert looks == ["list_endpoints", "list_tasks"] * 3
    finally:
        group.shutdown()
