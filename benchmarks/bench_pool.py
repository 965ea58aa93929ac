"""Actor pools (issue 46) against their targets in DESIGN.md, side by side in one run.

Rows:

* local, 16 members, 10,000 no-op items through ``map``: wall time per item (all of it is
  the pool's overhead: the method does nothing), and the results in input order; the same
  items sent straight to the members' handles round-robin (``.remote()``) are in the note.
* Ray, 4 actors, 2,000 trivial items: ``pool.map`` throughput over ``ray.util.ActorPool.map``
  on the same actors (the Ray actors under the Fray group's handles), interleaved; the pool
  sends up to 4 items to an actor at a time (ActorPool cannot), and the note gives the pool
  with one at a time as well.
* death test, local, Ray and Iris: 8 members, 2,000 items through ``map``; two items end their
  member (``SystemExit``) the first time they run. Every item must come back, each must have
  run at most 1 + (deaths while it was in flight) times (read from a log every run appends
  to), and ``status().redispatched`` must equal the items that ran again.
* broadcast to 2,000 members, fake and local: the threads started while it runs (counted at
  ``Thread.start``), at most 64.

Run alone with ``python benchmarks/bench_pool.py [--repeats N]`` or via ``benchmarks/run.py``.
"""

# pyright: standard
# Ray is untyped: the Ray rows adapt to it.

from __future__ import annotations

import collections
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _bench import alternate, at_least, at_most, failed_row, main, median, timed

from fray import ActorConfig, LocalClient

LOCAL_ITEMS = 10_000
RAY_ITEMS = 2_000
DEATH_ITEMS = 2_000
KILLERS = (500, 1_300)  # the items that end their member on their first run
BROADCAST_MEMBERS = 2_000
PIPELINE = 4  # Ray row: items sent to one actor at a time, so its next call waits there


class Echo:
    """The pool member of every row."""

    def f(self, x: int) -> int:
        return x

    def threads(self) -> int:
        return threading.active_count()

    def work(self, i: int, log: str, marker: str | None) -> int:
        """Appends ``i`` to ``log``; an item with a ``marker`` ends this member once."""
        with open(log, "a") as f:
            f.write(f"{i}\n")
        if marker is not None:
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return i
            raise SystemExit(1)
        return i


def bench_local_map(repeats: int) -> list[dict[str, Any]]:
    items = list(range(LOCAL_ITEMS))
    with LocalClient(echo_logs=False) as client:
        group = client.create_actor_group(Echo, name="sixteen", count=16)
        handles = group.wait_ready(timeout=120)
        pool = group.pool()
        in_order = True

        def through_pool() -> float:
            nonlocal in_order
            start = time.perf_counter()
            out = list(pool.map("f", items))
            seconds = time.perf_counter() - start
            in_order = in_order and out == items
            return seconds / LOCAL_ITEMS * 1e6

        def straight() -> float:
            def send_all() -> None:
                futures = [handles[i % 16].f.remote(i) for i in items]
                for future in futures:
                    future.result()

            return timed(send_all) / LOCAL_ITEMS * 1e6

        samples = alternate({"pool": through_pool, "raw": straight}, repeats)
        pool.shutdown()
    per_item = median(samples["pool"])
    return [
        at_most(
            "pool map overhead per item, local, 16 members, 10,000 no-op items",
            per_item if in_order else float("nan"),
            200,
            "us",
            note=(
                f"wall time per item of map (results in input order: {in_order}); the same "
                f"items sent straight to the handles: {median(samples['raw']):.1f} us each"
            ),
        )
    ]


def _death_row(backend: str, client: Any, root: str) -> dict[str, Any]:
    log = os.path.join(root, f"{backend}-runs.log")
    marks = {i: os.path.join(root, f"{backend}-killed-{i}") for i in KILLERS}
    pool = client.create_actor_pool(
        Echo,
        name=f"death-{backend}",
        min_workers=8,
        max_workers=8,
        actor_config=ActorConfig(max_restarts=0),
    )
    start = time.perf_counter()
    futures = [pool.submit("work", i, log, marks.get(i)) for i in range(DEATH_ITEMS)]
    values = [f.result(600) for f in futures]
    seconds = time.perf_counter() - start
    status = pool.status()
    pool.shutdown()
    runs = collections.Counter(int(line) for line in Path(log).read_text().split())
    # With one item in flight per member, the only item in flight when a member died is the
    # item that ended it: it may run twice, every other item once.
    excess = sum(1 for i in range(DEATH_ITEMS) if runs[i] > 1 + (i in KILLERS))
    ran_again = sum(1 for i in range(DEATH_ITEMS) if runs[i] > 1)
    ok = values == list(range(DEATH_ITEMS)) and status.redispatched == ran_again
    return at_most(
        f"pool death test, {backend}: kill 2 of 8 members while 2,000 items run",
        excess if ok else float("nan"),
        0,
        "items",
        note=(
            f"items run more than 1 + deaths-in-flight times: {excess}; every future resolved: "
            f"{values == list(range(DEATH_ITEMS))}; re-dispatched {status.redispatched}, items "
            f"that ran again {ran_again}, members dead {status.members_dead}; {seconds:.1f} s"
        ),
    )


def bench_broadcast(client: Any, backend: str) -> dict[str, Any]:
    group = client.create_actor_group(Echo, name=f"wide-{backend}", count=BROADCAST_MEMBERS)
    group.wait_ready(timeout=300)
    before = threading.active_count()
    started = _ThreadStarts()
    with started:
        start = time.perf_counter()
        results = group.broadcast("threads", timeout=300)
        seconds = time.perf_counter() - start
    group.shutdown()
    answered = sum(1 for r in results if r.ok)
    alive = max(r.value for r in results if r.ok) - before if answered else float("nan")
    return at_most(
        f"broadcast to 2,000 members, {backend}: threads it uses",
        started.count if answered == BROADCAST_MEMBERS else float("nan"),
        64,
        "threads",
        note=(
            f"threads started during the broadcast (counted at Thread.start); "
            f"{answered}/{BROADCAST_MEMBERS} members answered in {seconds:.2f} s; at most "
            f"{alive} more threads alive than before, as the calls saw it"
        ),
    )


class _ThreadStarts:
    """Counts every ``threading.Thread.start`` while it is entered (a measuring hook)."""

    def __init__(self) -> None:
        self.count = 0
        self._start = threading.Thread.start

    def __enter__(self) -> _ThreadStarts:
        original = self._start

        def counted(thread: threading.Thread) -> None:
            self.count += 1
            original(thread)

        threading.Thread.start = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        threading.Thread.start = self._start  # type: ignore[method-assign]


def bench_ray(repeats: int, root: str) -> list[dict[str, Any]]:
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    import ray
    from ray.util import ActorPool as RayActorPool

    from fray_ray import RayClient

    os.environ.pop("RAY_ADDRESS", None)
    sys.path.insert(0, os.path.dirname(__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")) if p
    )
    os.makedirs(os.path.join(root, "ray"), exist_ok=True)
    ray.init(
        address="local",
        num_cpus=8,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=os.path.join(root, "ray"),
    )
    rows: list[dict[str, Any]] = []
    try:
        import bench_pool as here  # the actor class pickles by reference from this module

        client = RayClient(namespace="bench-pool", echo_logs=False)
        group = client.create_actor_group(here.Echo, name="four", count=4)
        handles = group.wait_ready(timeout=300)
        raw = RayActorPool([h._resolve() for h in handles])  # the Ray actors of those handles
        one, four = group.pool(), group.pool(max_in_flight_per_member=PIPELINE)
        items = list(range(RAY_ITEMS))

        def rate(run_map: Any) -> Any:
            return lambda: RAY_ITEMS / timed(lambda: list(run_map()))

        sides = {
            "pool": rate(lambda: four.map("f", items)),
            "pool, 1 per member": rate(lambda: one.map("f", items)),
            "ray": rate(lambda: raw.map(lambda a, v: a.f.remote(v), items)),
        }
        samples = alternate(sides, max(repeats, 5))
        ratios = [f / r for f, r in zip(samples["pool"], samples["ray"], strict=True)]
        singles = [
            f / r for f, r in zip(samples["pool, 1 per member"], samples["ray"], strict=True)
        ]
        one.shutdown()
        four.shutdown()
        group.shutdown()
        rows.append(
            at_least(
                "pool.map vs ray.util.ActorPool.map, Ray, 4 actors, 2,000 trivial items",
                median(ratios),
                1.0,
                "x",
                ratio=median(ratios),
                note=(
                    f"items/s: pool {median(samples['pool']):.0f} with "
                    f"max_in_flight_per_member={PIPELINE}, ray.util.ActorPool "
                    f"{median(samples['ray']):.0f} (one call per actor at a time, all it can "
                    f"do); the pool with one per member (its default): {median(singles):.2f}x "
                    "(each end reaches the pool by a callback of Ray's, a thread hop the "
                    "caller's ray.wait of ActorPool does not pay); median of interleaved repeats"
                ),
            )
        )
        rows.append(_death_row("ray", client, root))
        client.shutdown()
    finally:
        ray.shutdown()
    return rows


def bench_iris(root: str) -> list[dict[str, Any]]:
    """The death test on the in-process Iris cluster the fray-iris tests use."""
    try:
        from fray_iris import IrisClient
    except ImportError as err:
        return [failed_row("pool death test, iris", f"fray-iris is not installed: {err}")]
    import cloudpickle
    from bench_iris import CLUSTER_YAML

    from fray_testing.iris_cluster import LocalIrisCluster

    # Task processes cannot import this file: its actor class travels by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with LocalIrisCluster(CLUSTER_YAML) as cluster:
        client = IrisClient(cluster.url)
        try:
            return [_death_row("iris", client, root)]
        finally:
            client.shutdown()


def run(repeats: int) -> list[dict[str, Any]]:
    """Every pool row; see the module docstring."""
    from fray_testing import FakeClient

    root = tempfile.mkdtemp(prefix="fray-bench-pool-", dir="/tmp")
    rows = bench_local_map(repeats)
    with LocalClient(echo_logs=False) as client:
        rows.append(_death_row("local", client, root))
        rows.append(bench_broadcast(client, "local"))
    with FakeClient() as fake:
        rows.append(bench_broadcast(fake, "fake"))
    rows += bench_ray(repeats, root)
    rows += bench_iris(root)
    return rows


if __name__ == "__main__":
    main(run)
