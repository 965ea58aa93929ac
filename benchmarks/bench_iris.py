"""IrisClient against the raw marin-iris client doing the same work, on one local Iris cluster.

Both sides run on the same in-process cluster, interleaved (a, b, b, a, ...), with the first
round discarded and the median of the repeats reported; the ratio is raw time / Fray time
(Fray's throughput relative to raw Iris), and the target is >= 0.95x.

* trivial job round trip: submit a callable returning its argument, wait until SUCCEEDED.
  Raw: ``IrisClient.submit`` + ``Job.wait(poll_interval=1.0)``; Fray: ``submit`` + ``wait``
  (Fray also stores the return value, which raw Iris discards).
* actor call round trip: one blocking call of a method that returns its argument, on an
  actor served in an Iris task. Raw: ``iris.actor.ActorClient``; Fray: ``handle.method(x)``.

The cluster is started here, inside a private temp folder, with the controller's 14-day
client-freshness check turned off and a 0.1 s reconcile interval (both for this cluster
only), exactly as the fray-iris test fixture does. Run alone with
``python benchmarks/bench_iris.py [--repeats N]`` or through ``benchmarks/run.py``.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

from _bench import alternate, at_least, failed_row, main, median

CALLS_PER_SAMPLE = 200
CLUSTER_YAML = """
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
    from iris.actor import ActorServer
    from iris.client import iris_ctx

    ctx = iris_ctx()
    server = ActorServer(host="127.0.0.1", port=ctx.get_port("actor"))
    server.register(endpoint, Echo())
    port = server.serve_background()
    ctx.registry.register(endpoint, f"http://127.0.0.1:{port}")
    threading.Event().wait()


@contextlib.contextmanager
def local_cluster() -> Iterator[str]:
    """An in-process Iris cluster in a private temp folder; yields the controller URL."""
    root = tempfile.mkdtemp(prefix="fray-bench-iris-")
    saved_env = {k: os.environ.get(k) for k in ("HOME", "TMPDIR", "FRAY_CLIENT_SPEC")}
    saved_tempdir = tempfile.tempdir
    os.makedirs(f"{root}/home")
    os.makedirs(f"{root}/tmp")
    os.environ["HOME"] = f"{root}/home"
    os.environ["TMPDIR"] = f"{root}/tmp"
    os.environ.pop("FRAY_CLIENT_SPEC", None)
    tempfile.tempdir = f"{root}/tmp"
    for name in ("iris", "finelog", "uvicorn"):
        logging.getLogger(name).setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import iris.cluster.backends.local.cluster as local_cluster_module
        import iris.cluster.controller.service as controller_service
        from iris.cluster.config import load_config, make_local_config
        from rigging.timing import Duration
    saved_window = controller_service.FRESHNESS_WINDOW
    saved_config = local_cluster_module.ControllerConfig
    controller_service.FRESHNESS_WINDOW = datetime.timedelta(days=365_000)
    local_cluster_module.ControllerConfig = functools.partial(  # type: ignore[misc]
        saved_config, poll_interval=Duration.from_seconds(0.1)
    )
    config_path = f"{root}/cluster.yaml"
    with open(config_path, "w") as out:
        out.write(CLUSTER_YAML)
    cluster = local_cluster_module.LocalCluster(make_local_config(load_config(config_path)))
    try:
        yield cluster.start()
    finally:
        cluster.close()
        controller_service.FRESHNESS_WINDOW = saved_window
        local_cluster_module.ControllerConfig = saved_config  # type: ignore[misc]
        tempfile.tempdir = saved_tempdir
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(root, ignore_errors=True)


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
    from iris.actor import ActorClient
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
        host.terminate()
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
    with local_cluster() as url:
        for bench in (bench_jobs, bench_actors):
            try:
                rows.append(bench(url, repeats))
            except Exception as err:
                rows.append(failed_row(bench.__name__, f"{type(err).__name__}: {err}"))
    return rows


if __name__ == "__main__":
    main(run, default_repeats=5)
