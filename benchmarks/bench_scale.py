"""How Fray's own costs grow with the number of jobs and actors: growth curves at N = 100,
1,000 and 10,000, side by side in one run (Iris's rows are in ``bench_scale_iris.py``).

Rows:
- jobs submitted then ``wait_all``, per job, on Local, Fake and Ray (Ray against raw Ray's
  ``ray.get`` of the same N zero-argument tasks, interleaved); the target is a per-job cost at
  N = 10,000 of at most 1.5x the cost at N = 100, and on Ray >= 0.80x raw at N = 10,000;
- driver memory: RSS growth of the driver for 10,000 finished trivial jobs kept in the
  client's history (``FRAY_JOB_HISTORY`` keeps 10,000 by default), per backend (<= 50 MB);
- Ray actor-group discovery: 200 real ``num_cpus=0`` actors created and awaited with
  ``wait_ready()``, timed against raw Ray creating the same actors and waiting on a method
  call of each; the Ray calls one poll makes are counted (``ray.get_actor``, a lookup in
  Ray's GCS, must not be made per member).

Local and Fake time the process's CPU (every thread of the client included); Ray times wall
clock, as its work happens in other processes. Run: ``python benchmarks/bench_scale.py
[--repeats N]`` or through ``benchmarks/run.py``.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from typing import Any

from _bench import alternate, at_least, at_most, failed_row, main, median

from fray import Entrypoint, JobRequest, LocalClient, ResourceConfig, wait_all

NS = (100, 1_000, 10_000)
GROWTH_LIMIT = 1.5  # per-job cost at 10,000 over the cost at 100
RAY_TARGET = 0.80  # Fray's throughput over raw Ray's at N = 10,000
RSS_LIMIT_MB = 50.0  # driver memory for 10,000 finished jobs
ACTORS = 200
ACTORS_LIMIT_S = 900  # 200 actor processes start about two at a time on 2 cores: minutes


def noop() -> int:
    """The trivial job."""
    return 1


class Member:
    """A trivial actor."""

    def ping(self) -> int:
        """Answers at once."""
        return 1


def _rss_mb() -> float:
    """The process's resident memory now, in MiB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _request() -> JobRequest:
    """The trivial job, asking what raw Ray's ``noop.remote()`` asks: one CPU and no
    memory reservation (as in ``bench_ray.py``; Fray's default ``ram="4g"`` makes Ray account
    memory for each task, about 25 us per job at N = 10,000)."""
    return JobRequest(
        name="scale",
        entrypoint=Entrypoint.from_callable(noop),
        resources=ResourceConfig(cpu=1, ram="0"),
    )


def _cpu_per_job(make: Callable[[], Any], n: int) -> float:
    """Process CPU seconds per job to submit ``n`` trivial jobs and ``wait_all`` them."""
    request = _request()
    with make() as client:
        gc.collect()  # an earlier sample's garbage is not this sample's cost
        cpu = time.process_time()
        wait_all([client.submit(request) for _ in range(n)], timeout=600)
        return (time.process_time() - cpu) / n


def _growth_rows(backend: str, per_job: dict[int, float], how: str) -> list[dict[str, Any]]:
    base = per_job[NS[0]]
    return [
        at_most(
            f"{backend}: {n:,} jobs submitted + wait_all, per job",
            per_job[n] * 1e6,
            GROWTH_LIMIT * base * 1e6,
            "us",
            target=f"<= {GROWTH_LIMIT}x the per-job cost at N={NS[0]}",
            ratio=per_job[n] / base,
            note=f"{how}; ratio: growth over N={NS[0]}",
        )
        for n in NS
    ]


def _rss_row(backend: str, make: Callable[[], Any]) -> dict[str, Any]:
    """RSS growth of the driver for 10,000 finished trivial jobs kept in the history."""
    request = _request()
    with make() as client:
        wait_all([client.submit(request) for _ in range(200)], timeout=600)  # warm
        gc.collect()
        before = _rss_mb()
        handles = [client.submit(request) for _ in range(NS[-1])]
        wait_all(handles, timeout=600)
        del handles
        gc.collect()
        grown = _rss_mb() - before
        kept = len(client.list_jobs())
    return at_most(
        f"{backend}: driver RSS for {NS[-1]:,} finished jobs",
        grown,
        RSS_LIMIT_MB,
        "MB",
        note=f"RSS after minus before, {kept:,} jobs in the client's history",
    )


def bench_local(repeats: int) -> list[dict[str, Any]]:
    """Local: CPU per job at each N, and the driver's memory."""

    def make() -> LocalClient:
        return LocalClient(echo_logs=False)

    samples = alternate({str(n): (lambda n=n: _cpu_per_job(make, n)) for n in NS}, repeats)
    per_job = {n: median(samples[str(n)]) for n in NS}
    return [*_growth_rows("local", per_job, "process CPU time / N"), _rss_row("local", make)]


def bench_fake(repeats: int) -> list[dict[str, Any]]:
    """Fake: CPU per job at each N, and the driver's memory."""
    from fray_testing import FakeClient

    samples = alternate({str(n): (lambda n=n: _cpu_per_job(FakeClient, n)) for n in NS}, repeats)
    per_job = {n: median(samples[str(n)]) for n in NS}
    return [*_growth_rows("fake", per_job, "process CPU time / N"), _rss_row("fake", FakeClient)]


def bench_ray(repeats: int) -> list[dict[str, Any]]:
    """Ray: Fray and raw Ray at each N in one Ray session, the driver's memory, discovery."""
    import ray

    from fray_ray import RayClient

    # run.py imports this file as ``bench_scale``: Ray's workers, started after this, find it.
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (here, os.environ.get("PYTHONPATH"))))
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", namespace="scale")
    try:
        raw_noop = ray.remote(noop)
        client = RayClient(namespace="scale", echo_logs=False)
        request = _request()

        def raw(n: int) -> float:
            gc.collect()
            start = time.perf_counter()
            ray.get([raw_noop.remote() for _ in range(n)])
            return (time.perf_counter() - start) / n

        def fray(n: int) -> float:
            gc.collect()
            start = time.perf_counter()
            wait_all([client.submit(request) for _ in range(n)], timeout=600)
            return (time.perf_counter() - start) / n

        rows: list[dict[str, Any]] = []
        fray_per_job: dict[int, float] = {}
        for n in NS:
            rounds = repeats if n < NS[-1] else max(3, repeats // 2)
            samples = alternate({"raw": lambda n=n: raw(n), "fray": lambda n=n: fray(n)}, rounds)
            fray_per_job[n] = median(samples["fray"])
            ratios = [r / f for r, f in zip(samples["raw"], samples["fray"], strict=True)]
            if n == NS[-1]:
                rows.append(
                    at_least(
                        f"ray: {n:,} trivial jobs vs raw Ray's ray.get of {n:,} tasks",
                        median(ratios),
                        RAY_TARGET,
                        "x",
                        ratio=median(ratios),
                        note=f"throughput ratio, median of {rounds} interleaved samples; "
                        f"raw {median(samples['raw']) * 1e6:.0f} us, Fray "
                        f"{fray_per_job[n] * 1e6:.0f} us per job (wall)",
                    )
                )
        rows += _growth_rows("ray", fray_per_job, "wall time / N")
        client.shutdown()
        rows.append(_rss_row("ray", lambda: RayClient(namespace="scale", echo_logs=False)))
        try:  # a discovery that fails (200 actors on 2 cores) must not lose the rows above
            rows += _ray_discovery(ray)
        except Exception as exc:
            rows.append(failed_row("ray: actor-group discovery", f"{type(exc).__name__}: {exc}"))
    finally:
        ray.shutdown()
    return rows


def _ray_discovery(ray: Any) -> list[dict[str, Any]]:
    """200 ``num_cpus=0`` actors: Fray's group against raw Ray's, and Ray calls per poll."""
    from fray_ray import RayClient

    raw_member = ray.remote(num_cpus=0)(Member)
    counts = {"get_actor": 0, "wait": 0}
    real_get_actor, real_wait = ray.get_actor, ray.wait

    def counting_get_actor(*args: Any, **kwargs: Any) -> Any:
        counts["get_actor"] += 1
        return real_get_actor(*args, **kwargs)

    def counting_wait(*args: Any, **kwargs: Any) -> Any:
        counts["wait"] += 1
        return real_wait(*args, **kwargs)

    def raw() -> float:
        start = time.perf_counter()
        actors = [raw_member.remote() for _ in range(ACTORS)]
        ray.get([actor.ping.remote() for actor in actors], timeout=ACTORS_LIMIT_S)
        elapsed = time.perf_counter() - start
        for actor in actors:
            ray.kill(actor)
        return elapsed

    polls: list[dict[str, int]] = []

    def fray() -> float:
        with RayClient(namespace="scale", echo_logs=False) as client:
            start = time.perf_counter()
            group = client.create_actor_group(
                Member, name="scale-group", count=ACTORS, resources=ResourceConfig(cpu=0, ram="0")
            )
            group.wait_ready(timeout=ACTORS_LIMIT_S)
            elapsed = time.perf_counter() - start
            counts.update(get_actor=0, wait=0)
            ray.get_actor, ray.wait = counting_get_actor, counting_wait
            try:
                group.wait_ready(count=1, timeout=60)  # one poll of a ready group
                group.discover_new()
            finally:
                ray.get_actor, ray.wait = real_get_actor, real_wait
            polls.append(dict(counts))
            group.shutdown()
        return elapsed

    # One sample a side: each starts 200 processes (a few minutes here), and the start-up of
    # Ray's workers, not Fray's work, is what the time is made of.
    samples = alternate({"raw": raw, "fray": fray}, 1, warmup=0)
    ratio = median(samples["raw"]) / median(samples["fray"])
    lookups = max(p["get_actor"] for p in polls)
    waits = max(p["wait"] for p in polls)
    return [
        at_least(
            f"ray: {ACTORS} num_cpus=0 actors created + wait_ready vs raw Ray",
            ratio,
            0.0,
            "x",
            target="measured (no target: Ray's actor start-up dominates)",
            ratio=ratio,
            note=f"one sample a side: raw {median(samples['raw']):.1f} s, Fray "
            f"{median(samples['fray']):.1f} s",
        ),
        at_most(
            f"ray: GCS actor lookups per discovery poll, {ACTORS} members",
            lookups,
            0,
            "calls",
            note=f"ray.get_actor calls in wait_ready(count=1) + discover_new() on a ready "
            f"group; ray.wait calls: {waits}",
        ),
    ]


def run(repeats: int) -> list[dict[str, Any]]:
    """Every growth curve above; see the module docstring."""
    return bench_local(repeats) + bench_fake(repeats) + bench_ray(repeats)


if __name__ == "__main__":
    main(run, default_repeats=3)
