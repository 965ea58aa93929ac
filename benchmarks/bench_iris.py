"""IrisClient against the raw marin-iris client doing the same work, on one local Iris cluster.

Both sides run on the same in-process cluster, interleaved (a, b, b, a, ...), with the first
round discarded and the median of the repeats reported; the ratio is raw time / Fray time
(Fray's throughput relative to raw Iris), and the target is >= 0.95x.

* trivial job round trip: submit a callable returning its argument, wait until SUCCEEDED.
  Raw: ``IrisClient.submit`` + ``Job.wait(poll_interval=1.0)``; Fray: ``submit`` + ``wait``
  (Fray also stores the return value, which raw Iris discards).
* actor call round trip: one blocking call of a method that returns its argument, on an
  actor served in an Iris task. Raw: ``iris.actor.ActorClient``; Fray: ``handle.method(x)``.

The cluster is ``fray_testing.iris_cluster.LocalIrisCluster``, the one the fray-iris tests
run on (a private temp folder, the freshness check widened and a 0.1 s reconcile, for this
cluster only), on whichever marin-iris line is installed (0.2.20 on Python 3.11, 0.2.227 on
3.12+). Run alone with
``python benchmarks/bench_iris.py [--repeats N]`` or through ``benchmarks/run.py``.
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any

from _bench import alternate, at_least, failed_row, main, median

CALLS_PER_SAMPLE = 200
CLUSTER_YAML = """
name: fray-bench
platform:
  local:
controller:
  local:
    port: 0
worker_provider: {}
scale_groups:
  cpu:
    num_vms: 1
    resources: {cpu: 64, ram: 256GB, disk: 2000GB, device_type: cpu, device_variant: cpu,
                capacity_type: on-demand}
    buffer_slices: 1
    max_slices: 2
    slice_template: {num_vms: 1, local: {}}
"""


def trivial(x: int) -> int:
    return x


class Echo:
    """The actor under test."""

    def f(self, x: int) -> int:
        return x


def raw_echo_actor(endpoint: str) -> None:
    """Raw Iris: serve an Echo on the task's ``actor`` port and register it."""
    from iris.actor.server import ActorServer
    from iris.client.client import iris_ctx

    ctx = iris_ctx()
    server = ActorServer(host="127.0.0.1", port=ctx.get_port("actor"))
    server.register(endpoint, Echo())
    port = server.serve_background()
    ctx.registry.register(endpoint, f"http://127.0.0.1:{port}")
    threading.Event().wait()


def _ratio_row(
    name: str, raw: list[float], fray: list[float], unit_scale: float, unit: str, note: str
) -> dict[str, Any]:
    raw_median, fray_median = median(raw), median(fray)
    ratio = raw_median / fray_median
    return at_least(
        name,
        ratio,
        0.95,
        "x raw",
        target=">= 0.95x raw",
        ratio=ratio,
        note=(
            f"{note}; median Fray {fray_median * unit_scale:.3g} {unit}, "
            f"raw Iris {raw_median * unit_scale:.3g} {unit} ({len(raw)} samples each)"
        ),
    )


def bench_jobs(url: str, repeats: int) -> dict[str, Any]:
    from iris.client import IrisClient as RawIrisClient
    from iris.cluster.types import Entrypoint as IrisEntrypoint
    from iris.cluster.types import ResourceSpec

    from fray import Entrypoint, JobRequest, ResourceConfig
    from fray_iris import IrisClient

    raw = RawIrisClient.remote(url)
    fray = IrisClient(url)
    small_raw = ResourceSpec(cpu=0.5, memory="256m", disk="1g")
    small = ResourceConfig(cpu=0.5, ram="256m", disk="1g")

    def raw_side() -> float:
        start = time.perf_counter()
        job = raw.submit(
            IrisEntrypoint.from_callable(trivial, 1), f"raw-{secrets.token_hex(3)}", small_raw
        )
        job.wait(timeout=120, poll_interval=1.0)
        return time.perf_counter() - start

    def fray_side() -> float:
        start = time.perf_counter()
        request = JobRequest(
            name=f"fray-{secrets.token_hex(3)}",
            entrypoint=Entrypoint.from_callable(trivial, [1]),
            resources=small,
        )
        fray.submit(request).wait(timeout=120)
        return time.perf_counter() - start

    try:
        samples = alternate({"raw": raw_side, "fray": fray_side}, repeats, warmup=1)
    finally:
        fray.shutdown()
        raw.shutdown()
    return _ratio_row(
        "Iris trivial job round trip",
        samples["raw"],
        samples["fray"],
        1e3,
        "ms",
        "submit -> SUCCEEDED",
    )


def bench_actors(url: str, repeats: int) -> dict[str, Any]:
    from iris.actor.client import ActorClient
    from iris.client import IrisClient as RawIrisClient
    from iris.cluster.types import Entrypoint as IrisEntrypoint
    from iris.cluster.types import ResourceSpec

    from fray import ResourceConfig
    from fray_iris import IrisClient

    raw = RawIrisClient.remote(url)
    fray = IrisClient(url)
    name = f"raw-echo-{secrets.token_hex(3)}"
    host = raw.submit(
        IrisEntrypoint.from_callable(raw_echo_actor, f"/bench/{name}"),
        name,
        ResourceSpec(cpu=0.5, memory="256m", disk="1g"),
        ports=["actor"],
    )
    try:
        resolver = raw.resolver_for_job(host.job_id)
        deadline = time.monotonic() + 120
        while resolver.resolve(f"/bench/{name}").is_empty:
            if time.monotonic() > deadline:
                raise TimeoutError("the raw Iris actor never registered")
            time.sleep(0.05)  # polling interval of a bounded wait
        raw_actor = ActorClient(resolver, f"/bench/{name}")
        handle = fray.create_actor(
            Echo,
            name=f"fray-echo-{secrets.token_hex(3)}",
            resources=ResourceConfig(cpu=0.5, ram="256m", disk="1g"),
        )

        def block(call: Any) -> float:
            start = time.perf_counter()
            for i in range(CALLS_PER_SAMPLE):
                call(i)
            return (time.perf_counter() - start) / CALLS_PER_SAMPLE

        samples = alternate(
            {"raw": lambda: block(raw_actor.f), "fray": lambda: block(handle.f)},
            repeats,
            warmup=1,
        )
    finally:
        host.cancel() if hasattr(host, "cancel") else host.terminate()  # 0.2.227 / 0.2.20
        fray.shutdown()
        raw.shutdown()
    return _ratio_row(
        "Iris actor call round trip",
        samples["raw"],
        samples["fray"],
        1e3,
        "ms",
        f"blocking call, mean of {CALLS_PER_SAMPLE} calls per sample",
    )


def run(repeats: int = 5) -> list[dict[str, Any]]:
    """Both Iris comparisons, on one in-process local cluster."""
    try:
        import fray_iris  # noqa: F401
    except ImportError as err:
        return [failed_row("Iris benchmarks", f"fray-iris is not installed: {err}")]
    import sys

    import cloudpickle

    # Task processes cannot import this file: ship its functions and classes by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    rows: list[dict[str, Any]] = []
    from fray_testing.iris_cluster import LocalIrisCluster

    with LocalIrisCluster(CLUSTER_YAML) as cluster:
        for bench in (bench_jobs, bench_actors):
            try:
                rows.append(bench(cluster.url, repeats))
            except Exception as err:
                rows.append(failed_row(bench.__name__, f"{type(err).__name__}: {err}"))
    return rows


if __name__ == "__main__":
    main(run, default_repeats=5)
