"""User code timed by ``bench_predecessor.py`` and ``bench_iris.py``: one script, run
unchanged by Fray's interpreter and by the predecessor's (``marin-fray``) in its own venv.

It imports only what both publish, at the predecessor's paths (``fray.local_backend``,
``fray.types``, ``fray.client``, ``fray.current_client``), so the same lines exercise either
implementation. Started as ``python _user_code.py``, it builds one ``LocalClient``, prints
``ready`` and then serves commands on stdin, one per line: a scenario's name runs it once and
prints one JSON line, ``{"seconds": <per job or per call>}``; ``quit`` (or the end of stdin)
shuts the client down. Started as ``python _user_code.py iris HOST:PORT`` inside an Iris job
(the way Marin drives Fray on Iris: ``current_client()`` in a job), it serves the Iris
scenarios the same way over a TCP connection to ``HOST:PORT``. It uses nothing but the
standard library and ``fray``.
"""

from __future__ import annotations

import itertools
import json
import socket
import statistics
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from fray.client import wait_all
from fray.current_client import current_client
from fray.local_backend import LocalClient
from fray.types import Entrypoint, JobRequest, ResourceConfig

ONE_AT_A_TIME = 200  # jobs per sample of submit(...).wait()
MANY = 1_000  # jobs per sample of submit x N + wait_all
REMOTE_CALLS = 2_000  # calls per sample of .remote().result()
BLOCKING_CALLS = 20_000  # calls per sample of handle.method(x)
IRIS_JOBS = 3  # Iris jobs per sample of submit(...).wait()
IRIS_CALLS = 200  # Iris actor calls per sample of handle.method(x)


def noop() -> None:
    return None


class Echo:
    """The actor: a method that returns its argument."""

    def f(self, x: int) -> int:
        return x


def _median_latency(n: int, once: Callable[[int], Any]) -> float:
    # The median of single latencies: a one-off pause (a GC, another process taking the
    # core) moves it little, unlike a block's mean.
    latencies: list[float] = []
    clock = time.perf_counter
    for i in range(n):
        start = clock()
        once(i)
        latencies.append(clock() - start)
    return statistics.median(latencies)


def scenarios(client: Any) -> dict[str, Callable[[], float]]:
    """Each scenario, as a function that runs it once and returns seconds per job or call."""
    request = JobRequest(name="noop", entrypoint=Entrypoint.from_callable(noop))
    actor = client.create_actor(Echo, name="echo")

    def job_wait() -> float:
        return _median_latency(ONE_AT_A_TIME, lambda _i: client.submit(request).wait())

    def jobs_wait_all() -> float:
        start = time.perf_counter()
        jobs = [client.submit(request) for _ in range(MANY)]
        wait_all(jobs)
        return (time.perf_counter() - start) / MANY

    def actor_remote() -> float:
        return _median_latency(REMOTE_CALLS, lambda i: actor.f.remote(i).result())

    def actor_blocking() -> float:
        # Too short to time one by one: a block's wall time per call.
        start = time.perf_counter()
        for i in range(BLOCKING_CALLS):
            actor.f(i)
        return (time.perf_counter() - start) / BLOCKING_CALLS

    return {
        "job_wait": job_wait,
        "jobs_wait_all": jobs_wait_all,
        "actor_remote": actor_remote,
        "actor_blocking": actor_blocking,
    }


def iris_scenarios(client: Any, group: Any) -> dict[str, Callable[[], float]]:
    """The Iris scenarios: jobs of their own names (Iris keeps a finished job's name), and
    the first actor of ``group`` (an actor group of one Echo)."""
    resources = ResourceConfig(cpu=0.5, ram="256m", disk="1g")
    entrypoint = Entrypoint.from_callable(noop)
    names = (f"noop-{i}" for i in itertools.count())
    actor = group.wait_ready()[0]

    def job_wait() -> float:
        def once(_i: int) -> None:
            request = JobRequest(name=next(names), entrypoint=entrypoint, resources=resources)
            client.submit(request).wait()

        return _median_latency(IRIS_JOBS, once)

    def actor_blocking() -> float:
        return _median_latency(IRIS_CALLS, lambda i: actor.f(i))

    return {"iris_job_wait": job_wait, "iris_actor_blocking": actor_blocking}


def _loop(table: dict[str, Callable[[], float]], commands: IO[str], out: IO[str]) -> None:
    print("ready", file=out, flush=True)
    for line in commands:
        name = line.strip()
        if name == "quit":
            break
        print(json.dumps({"seconds": table[name]()}), file=out, flush=True)


def serve_iris(address: str) -> None:
    """In an Iris job: the Iris scenarios, served over a connection to ``address``."""
    host, port = address.rsplit(":", 1)
    client = current_client()
    resources = ResourceConfig(cpu=0.5, ram="256m", disk="1g")
    group = client.create_actor_group(Echo, name="echo", count=1, resources=resources)
    try:
        with socket.create_connection((host, int(port))) as conn, conn.makefile("rw") as stream:
            _loop(iris_scenarios(client, group), stream, stream)
    finally:
        group.shutdown()


def serve() -> None:
    if sys.argv[1:2] == ["iris"]:
        serve_iris(sys.argv[2])
        return
    client = LocalClient()
    try:
        _loop(scenarios(client), sys.stdin, sys.stdout)
    finally:
        client.shutdown()


if __name__ == "__main__":
    serve()
