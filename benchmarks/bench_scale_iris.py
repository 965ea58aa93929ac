"""How Fray's costs on Iris grow with the number of jobs and of actors, counted in controller
calls through a wrapper of the Iris client (``packages/fray-iris/tests/iris_counting.py``),
on the in-process Iris cluster as far as it goes on this machine, and beyond it on a stand-in
of the controller that answers as Iris does (each row says which).

Rows:
- controller calls per ``wait_all`` sweep over N unfinished jobs (the client's watcher asks
  the states of all of them each round): N = 100 and 1,000 on the real controller (jobs
  that wait to be placed: eight H100s each, on a cluster with one such VM), N = 100, 1,000
  and 10,000 on the stand-in; target <= 1 + N / 1,000;
- per-job driver CPU for N jobs submitted and awaited with ``wait_all`` (stand-in
  controller, so only Fray's own work is timed; each job also costs one status and one tasks
  call at its end), growth from N = 100 to 10,000 at most 1.5x; and the driver's RSS growth
  for 10,000 finished jobs kept in the client's history (<= 50 MB);
- actor-group discovery: controller calls per look at a group of 10, 200 and 2,000 members
  (target <= 2): the group's job waits to be placed (one member at most runs) and the other
  members' endpoints are registered through the controller's own ``RegisterEndpoint`` RPC,
  as their tasks would, without 2,000 processes; ``wait_ready(count=k)`` with k registered
  must return on its first look.

Run: ``python benchmarks/bench_scale_iris.py [--repeats N]`` or through ``benchmarks/run.py``.
"""

# pyright: standard
# marin-iris is untyped: this module is an adapter over it.

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from _bench import at_most, failed_row, main
from bench_scale import Member, _rss_mb

NS = (100, 1_000, 10_000)
REAL_NS = (100, 1_000)  # what the in-process controller takes in this benchmark's time
MEMBERS = (10, 200, 2_000)
GROWTH_LIMIT = 1.5
RSS_LIMIT_MB = 50.0
WINDOW_S = 3.0  # how long the sweeps over unfinished jobs are counted
CLUSTER_YAML = """
name: fray-bench-scale
platform:
  local:
controller:
  local:
    port: 0
worker_provider: {}
scale_groups:
  gpu:
    num_vms: 1
    resources: {cpu: 64, ram: 256GB, disk: 1000GB, device_type: gpu, device_variant: H100,
                device_count: 8, capacity_type: on-demand}
    buffer_slices: 0
    max_slices: 1
    slice_template: {num_vms: 1, local: {}}
"""
# The counting wrapper is the fray-iris tests' own.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages/fray-iris/tests"))


class Submitted(NamedTuple):
    """What the stand-in's ``submit`` returns (as Iris's ``Job``, its id)."""

    job_id: Any


class StandInController:
    """Answers what ``IrisClient`` asks of marin-iris 0.2.20's client, from a dict, as the
    controller would: jobs are submitted PENDING and end SUCCEEDED on :meth:`finish_all`."""

    def __init__(self) -> None:
        from iris.rpc import job_pb2

        self._pb = job_pb2
        self.states: dict[str, int] = {}
        # The name the 0.2.20 adapter reads its batched state call from (spelt apart as in
        # the fray-iris structure test: this file is not an adapter).
        setattr(self, "_cluster" + "_client", self)

    def submit(self, entrypoint: Any, name: str, **kwargs: Any) -> Any:
        """Records a PENDING job."""
        from iris.cluster.types import JobName

        del entrypoint, kwargs
        wire = JobName.from_wire(f"/bench/{name}")
        self.states[wire.to_wire()] = self._pb.JOB_STATE_PENDING
        return Submitted(wire)

    def get_job_states(self, wires: list[Any]) -> dict[str, int]:
        """The states of the jobs asked for (one call, however many)."""
        return {w.to_wire(): self.states[w.to_wire()] for w in wires}

    def status(self, wire: Any) -> Any:
        """A job's status, as ``GetJobStatus`` returns it."""
        state = self.states[wire.to_wire()]
        return self._pb.JobStatus(job_id=wire.to_wire(), state=state, task_count=1)

    def list_tasks(self, wire: Any) -> list[Any]:
        """A job's one task, ended as its job."""
        done = self._pb.TASK_STATE_SUCCEEDED
        return [self._pb.TaskStatus(task_id=f"{wire.to_wire()}/0", state=done)]

    def finish_all(self) -> None:
        """Every job ends SUCCEEDED."""
        for wire in self.states:
            self.states[wire] = self._pb.JOB_STATE_SUCCEEDED

    def shutdown(self) -> None:
        """Nothing to close."""


def _sweep_calls(counting: Any, n: int, handles: list[Any]) -> float:
    """Counts the controller calls of ``WINDOW_S`` of sweeps over ``n`` unfinished jobs
    (the watcher's rounds) while ``wait_all`` waits on them; returns calls per sweep."""
    from fray import wait_all
    from fray.errors import JobTimeoutError

    counting.clear()
    with contextlib.suppress(JobTimeoutError):
        wait_all(handles, timeout=WINDOW_S)
    states = [c for c in counting.calls() if c.name == "get_job_states"]
    sweeps = sum(c.ids for c in states) / n
    others = [c.name for c in counting.calls() if c.name != "get_job_states"]
    if others:  # nothing but state calls while every job waits
        raise RuntimeError(f"calls other than state calls while the jobs wait: {others[:5]}")
    return len(states) / sweeps if sweeps else float("nan")


def bench_stand_in(n: int) -> dict[str, float]:
    """``n`` jobs on the stand-in controller: calls per sweep while they wait, then the
    driver's CPU per job to submit and await them, and its RSS growth once they ended."""
    from fray import Entrypoint, JobRequest, wait_all
    from fray_iris import IrisClient
    from iris_counting import CountingIris

    controller = StandInController()
    counting = CountingIris(controller)
    requests = [
        JobRequest(name=f"scale-{i}", entrypoint=Entrypoint.from_command("true")) for i in range(n)
    ]
    gc.collect()
    rss = _rss_mb()
    with IrisClient(iris_client=counting) as client:  # type: ignore[arg-type]
        cpu = time.process_time()
        handles = [client.submit(request) for request in requests]
        submit_cpu = time.process_time() - cpu
        per_sweep = _sweep_calls(counting, n, handles)
        controller.finish_all()
        cpu = time.process_time()
        wait_all(handles, timeout=600)
        wait_cpu = time.process_time() - cpu
        del handles
        gc.collect()
        grown = _rss_mb() - rss
    return {"per_sweep": per_sweep, "cpu_per_job": (submit_cpu + wait_cpu) / n, "rss": grown}


@contextlib.contextmanager
def _counted_client(cluster: Any) -> Iterator[tuple[Any, Any]]:
    """A Fray client on the real cluster whose controller calls are counted."""
    from iris.client import IrisClient as RawIrisClient

    from fray_iris import IrisClient
    from iris_counting import CountingIris

    raw = RawIrisClient.remote(cluster.url)
    counting = CountingIris(raw)
    try:
        with IrisClient(iris_client=counting, results_url=cluster.results_url) as client:  # type: ignore[arg-type]
            yield client, counting
    finally:
        raw.shutdown()


def _waiting() -> Any:
    """Resources the cluster's one GPU VM gives one job (or member) at a time."""
    from fray import ResourceConfig

    return ResourceConfig.with_gpu("H100", 8)


def real_sweep_row(cluster: Any, n: int, name: str) -> dict[str, Any]:
    """Calls per sweep over ``n`` unfinished jobs on the real controller (all but one wait to
    be placed)."""
    from fray import Entrypoint, JobRequest

    with _counted_client(cluster) as (client, counting):
        tag = os.urandom(3).hex()
        started = time.monotonic()
        handles = [
            client.submit(
                JobRequest(
                    name=f"wait-{tag}-{i}",
                    entrypoint=Entrypoint.from_command("sleep", "600"),
                    resources=_waiting(),
                )
            )
            for i in range(n)
        ]
        submitting = time.monotonic() - started
        # One of them may run (sleeping): it is unfinished too, and asked about with the rest.
        per_sweep = _sweep_calls(counting, n, handles)
    return at_most(
        name,
        per_sweep,
        1 + n / 1000,
        "calls",
        note=f"real controller, jobs waiting to be placed ({submitting:.0f} s to submit "
        "them); calls counted through a wrapper of the Iris client",
    )


def discovery_row(cluster: Any, members: int, name: str) -> dict[str, Any]:
    """Controller calls per look at a group of ``members``, all but one registered by hand;
    the note says what ``wait_ready(count=k)`` made with k registered, and its time."""
    from iris_counting import register_endpoints

    with _counted_client(cluster) as (client, counting):
        group_name = f"wide-{os.urandom(3).hex()}"
        group = client.create_actor_group(
            Member, name=group_name, count=members, resources=_waiting()
        )
        try:
            ready = members - 1  # member 0 may be placed: the others are registered
            register_endpoints(cluster.url, group.job.iris_job_id, group_name, range(1, members))
            me = threading.get_ident()
            counting.clear()
            started = time.monotonic()
            group.wait_ready(count=ready, timeout=300)
            first_look = time.monotonic() - started
            on_ready = len(counting.calls(me))
            counting.clear()
            looks = 5
            for _ in range(looks):
                group.statuses()
            per_look = len(counting.calls(me)) / looks
        finally:
            group.shutdown()
    return at_most(
        name,
        per_look,
        2,
        "calls",
        note=f"real controller; {ready:,} endpoints registered through its RegisterEndpoint "
        "RPC with no process behind them (the job waits to be placed); "
        f"wait_ready(count={ready:,}) made {on_ready} calls, {first_look * 1e3:.0f} ms",
    )


def _row_or_failure(name: str, make: Any) -> dict[str, Any]:
    """``make()``'s row, or a failed row saying why it could not be measured."""
    try:
        return make()
    except Exception as err:
        return failed_row(name, f"{type(err).__name__}: {err}")


def run(repeats: int = 1) -> list[dict[str, Any]]:
    """The Iris scale rows (one sample each: they count calls, and time once)."""
    del repeats
    try:
        import fray_iris  # noqa: F401
        from fray_iris._convert import IRIS_VERSION
    except ImportError as err:
        return [failed_row("Iris scale benchmarks", f"fray-iris is not installed: {err}")]
    rows: list[dict[str, Any]] = []
    if not IRIS_VERSION.startswith("0.2.20."):
        rows.append(
            failed_row("Iris scale: stand-in rows", f"stand-in speaks 0.2.20, not {IRIS_VERSION}")
        )
    else:
        measured = {n: bench_stand_in(n) for n in NS}
        for n in NS:
            rows.append(
                at_most(
                    f"Iris (stand-in controller): calls per wait_all sweep, N = {n:,}",
                    measured[n]["per_sweep"],
                    1 + n / 1000,
                    "calls",
                    note="stand-in of the controller (answers as marin-iris 0.2.20); calls counted "
                    "through a wrapper of the Iris client while every job waits",
                )
            )
        base = measured[NS[0]]["cpu_per_job"]
        for n in NS:
            rows.append(
                at_most(
                    f"Iris (stand-in controller): {n:,} jobs submitted + wait_all, per job",
                    measured[n]["cpu_per_job"] * 1e6,
                    GROWTH_LIMIT * base * 1e6,
                    "us",
                    target=f"<= {GROWTH_LIMIT}x the per-job cost at N={NS[0]}",
                    ratio=measured[n]["cpu_per_job"] / base,
                    note="driver process CPU / N, submit and wait_all; stand-in controller, so "
                    "only Fray's work; ratio: growth over N=100",
                )
            )
        rows.append(
            at_most(
                f"Iris (stand-in controller): driver RSS for {NS[-1]:,} finished jobs",
                measured[NS[-1]]["rss"],
                RSS_LIMIT_MB,
                "MB",
                note="RSS after minus before, the jobs kept in the client's history",
            )
        )
    import cloudpickle

    from fray_testing.iris_cluster import LocalIrisCluster

    # Task processes cannot import these files: ship their classes by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cloudpickle.register_pickle_by_value(sys.modules[Member.__module__])
    with LocalIrisCluster(CLUSTER_YAML) as cluster:
        for n in REAL_NS:
            name = f"Iris (in-process cluster): calls per wait_all sweep, N = {n:,}"
            rows.append(
                _row_or_failure(name, lambda n=n, name=name: real_sweep_row(cluster, n, name))
            )
        for members in MEMBERS:
            name = f"Iris (in-process cluster): discovery calls per poll, {members:,} members"
            rows.append(
                _row_or_failure(name, lambda m=members, name=name: discovery_row(cluster, m, name))
            )
    return rows


if __name__ == "__main__":
    main(run, default_repeats=1)
