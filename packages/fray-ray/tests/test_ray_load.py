"""Load on RayClient, in proportion to the LocalClient load tests: jobs and actor calls from
16 threads at once. Every result arrives exactly once: none lost, none duplicated, none given
to the wrong handle (single waits, batched ``wait_all`` and resubmitted requests mixed)."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import gc
import os
import threading
import time
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from fray import Entrypoint, JobNotFoundError, JobRequest, JobStatus, ResourceConfig, wait_all
from fray.environment_variables import FRAY_JOB_HISTORY
from fray_ray import RayClient

pytest.importorskip("ray")

THREADS = 16
JOBS_PER_THREAD = 20
CALLS_PER_THREAD = 125
SMALL = ResourceConfig(cpu=1, ram="0")  # at most one worker per CPU: worker starts are costly


@pytest.fixture
def client(ray_cluster: str) -> Iterator[RayClient]:
    client = RayClient(namespace="load", echo_logs=False)
    yield client
    client.shutdown()


def echo(value: int) -> int:
    return value


class Payload:
    """A return value the test can watch being freed."""


def make_payload() -> Payload:
    return Payload()


def print_then_wait(path: str) -> int:
    print("streamed", flush=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)  # polls for the test's go-ahead (a file), bounded
    return 1


def own_job_id() -> str | None:
    return os.environ.get("FRAY_JOB_ID")


class Tally:
    def __init__(self) -> None:
        self.seen: list[int] = []
        self.lock = threading.Lock()

    def add(self, value: int) -> int:
        with self.lock:
            self.seen.append(value)
        return value

    def values(self) -> list[int]:
        with self.lock:
            return list(self.seen)


def test_jobs_from_16_threads_each_result_exactly_once(client: RayClient) -> None:
    def worker(thread: int) -> list[tuple[str, object, object]]:
        # Half the jobs are distinct requests, half one request submitted again and again.
        again = JobRequest(
            name=f"again-{thread}",
            entrypoint=Entrypoint.from_callable(own_job_id),
            resources=SMALL,
        )
        handles = []
        for i in range(JOBS_PER_THREAD):
            if i % 2:
                handles.append((client.submit(again), None))
            else:
                value = thread * 1000 + i
                request = JobRequest(
                    name=f"echo-{thread}-{i}",
                    entrypoint=Entrypoint.from_callable(echo, [value]),
                    resources=SMALL,
                )
                handles.append((client.submit(request), value))
        # Even threads wait one by one, odd threads all at once.
        if thread % 2:
            assert wait_all([h for h, _ in handles], timeout=300) == [JobStatus.SUCCEEDED] * len(
                handles
            )
        return [(h.job_id, h.result(timeout=300), expected) for h, expected in handles]

    with ThreadPoolExecutor(THREADS) as pool:
        outcomes = [row for rows in pool.map(worker, range(THREADS)) for row in rows]

    assert len(outcomes) == THREADS * JOBS_PER_THREAD
    ids = [job_id for job_id, _value, _expected in outcomes]
    assert len(set(ids)) == len(ids), "two handles share a job id"
    for job_id, value, expected in outcomes:
        if expected is None:
            assert value == job_id  # the job ran under the id its handle reports
        else:
            assert value == expected
    echoed = sorted(v for _id, v, e in outcomes if e is not None)
    assert echoed == sorted(
        t * 1000 + i for t in range(THREADS) for i in range(0, JOBS_PER_THREAD, 2)
    )
    listed = {info.job_id for info in client.list_jobs()}
    assert set(ids) <= listed


def test_actor_calls_from_16_threads_each_exactly_once(client: RayClient) -> None:
    from fray import ActorConfig

    tally = client.create_actor(Tally, name="tally", actor_config=ActorConfig(max_concurrency=16))

    def worker(thread: int) -> list[int]:
        base = thread * CALLS_PER_THREAD
        if thread % 2:  # blocking calls
            return [tally.add(base + i) for i in range(CALLS_PER_THREAD)]
        futures = [tally.add.remote(base + i) for i in range(CALLS_PER_THREAD)]
        return [f.result(timeout=120) for f in futures]

    with ThreadPoolExecutor(THREADS) as pool:
        returned = [v for values in pool.map(worker, range(THREADS)) for v in values]

    expected = list(range(THREADS * CALLS_PER_THREAD))
    assert sorted(returned) == expected
    assert sorted(tally.values()) == expected


def test_history_keeps_unfinished_jobs_and_the_last_finished(
    ray_cluster: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(FRAY_JOB_HISTORY, "2")
    client = RayClient(namespace="history", echo_logs=False)
    try:
        go = tmp_path / "go"
        held = client.submit(request(print_then_wait, str(go), name="held"))
        # A running job streams its output to the registry while it runs.
        deadline = time.monotonic() + 60
        while client.registry.call("logs", held.job_id) != ["streamed"]:
            assert time.monotonic() < deadline, "the held job's output never streamed"
            time.sleep(0.05)  # bounded poll of another process's progress
        done = []
        for i in range(4):  # one after another: they finish in this order
            done.append(client.submit(request(make_payload, name=f"done{i}")))
            assert isinstance(done[-1].result(timeout=120), Payload)

        ours = {held.job_id, *(job.job_id for job in done)}
        listed = [info.job_id for info in client.list_jobs() if info.job_id in ours]
        assert listed == [held.job_id, done[2].job_id, done[3].job_id]
        with pytest.raises(JobNotFoundError, match=FRAY_JOB_HISTORY) as caught:
            client.get_job(done[0].job_id)
        assert caught.value.job_id == done[0].job_id
        assert done[0].status() is JobStatus.SUCCEEDED  # a handle keeps its own job
        value = weakref.ref(done[0].result())
        del done[0]
        # Nothing else keeps a dropped job's value (the thread that settled it may still be
        # on its way out).
        deadline = time.monotonic() + 30
        while True:
            gc.collect()
            if value() is None:
                break
            assert time.monotonic() < deadline, "a dropped job's value is still kept"
            time.sleep(0.05)  # bounded poll: other threads let go on their own time

        go.touch()
        assert held.result(timeout=120) == 1
        assert list(held.logs()) == ["streamed"]
        # Its streamed copy in the registry is dropped once the job ended.
        deadline = time.monotonic() + 60
        while client.registry.call("logs", held.job_id):
            assert time.monotonic() < deadline, "the registry kept an ended job's output"
            time.sleep(0.05)  # the drop is sent without waiting for it
    finally:
        client.shutdown()


def request(fn: Any, *args: Any, name: str) -> JobRequest:
    return JobRequest(name=name, entrypoint=Entrypoint.from_callable(fn, args), resources=SMALL)


def test_max_command_jobs_is_checked(ray_cluster: str) -> None:
    from fray.errors import InvalidRequestError

    with pytest.raises(InvalidRequestError) as caught:
        RayClient(max_command_jobs=0)
    assert caught.value.field == "max_command_jobs"
