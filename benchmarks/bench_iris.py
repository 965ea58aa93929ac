"""IrisClient against the raw marin-iris client doing the same work, on one local Iris cluster.

Both sides run on the same in-process cluster, interleaved (a, b, b, a, ...), with the first
round discarded and the median of the repeats reported; the ratio is raw time / Fray time
(Fray's throughput relative to raw Iris), and the target is >= 0.95x.

* trivial job round trip: submit a callable returning its argument, wait until SUCCEEDED.
  Raw: ``IrisClient.submit`` + ``Job.wait(poll_interval=1.0)``; Fray: ``submit`` + ``wait``
  (Fray also stores the return value, which raw Iris discards).
* actor call round trip: one blocking call of a method that returns its argument, on an
  actor served in an Iris task. Raw: ``iris.actor.ActorClient``; Fray: ``handle.method(x)``.

On marin-iris 0.2.20 the same cluster then compares Fray with its predecessor
(``marin-fray``, in its own venv, see ``bench_predecessor.py``): ``_user_code.py iris`` runs
as one Iris job per side (a driver, as Marin drives Fray on Iris: ``current_client()`` in a
job; the predecessor's actor handles only resolve inside an Iris job), submitted under the
user ``fray`` or ``predecessor``, and serves the scenarios to this process over TCP: trivial
jobs ``submit(...).wait()`` and blocking calls to an actor group of one, the rows
"vs predecessor (Iris): ...". A local cluster runs every task with its own interpreter; here
the tasks of the user ``predecessor`` run with the predecessor venv's instead (what a real
cluster's workers do once they install a job's workspace), through a small launcher given
to the cluster's process runtime for these rows only.

The cluster is ``fray_testing.iris_cluster.LocalIrisCluster``, the one the fray-iris tests
run on (a private temp folder, the freshness check widened and a 0.1 s reconcile, for this
cluster only), on whichever marin-iris line is installed (0.2.20 on Python 3.11, 0.2.227 on
3.12+). Run alone with
``python benchmarks/bench_iris.py [--repeats N]`` or through ``benchmarks/run.py``.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import secrets
import shlex
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from _bench import alternate, at_least, failed_row, main, median
from bench_predecessor import SCRIPT, Side, measure, predecessor_python, ratio_rows

PREDECESSOR_USER = "predecessor"
PREDECESSOR_IRIS = "0.2.20."  # the marin-iris line the predecessor speaks
DRIVER_START_S = 300.0  # seconds a driver job may take to connect back
MIN_REPEATS = 7  # per run, as for the local rows against the predecessor
# scenario of _user_code.py's iris_scenarios -> (row name, what one sample is per)
PREDECESSOR_SCENARIOS = {
    "iris_job_wait": ("vs predecessor (Iris): trivial job submit(...).wait()", "job"),
    "iris_actor_blocking": ("vs predecessor (Iris): actor blocking call handle.method(x)", "call"),
}
PREDECESSOR_HOW = {
    "iris_job_wait": "submit -> SUCCEEDED of a callable job from a driver job on the local Iris "
    "cluster, median latency of 3 jobs per sample",
    "iris_actor_blocking": "from a driver job to an actor group of one on the local Iris "
    "cluster, median latency of 200 calls per sample",
}

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


class DriverSide(Side):
    """A side whose user code (``_user_code.py iris``) runs as an Iris job submitted as
    ``user``, serving its scenarios over a TCP connection back to this process."""

    def __init__(self, raw: Any, user: str, results_url: str) -> None:
        from iris.cluster.types import Entrypoint as IrisEntrypoint
        from iris.cluster.types import EnvironmentSpec, ResourceSpec, is_job_finished

        from fray_iris.environment_variables import FRAY_IRIS_RESULTS_URL

        with socket.create_server(("127.0.0.1", 0)) as listener:
            listener.settimeout(1.0)
            address = f"127.0.0.1:{listener.getsockname()[1]}"
            self.job = raw.submit(
                IrisEntrypoint.from_command("python", str(SCRIPT), "iris", address),
                f"driver-{secrets.token_hex(3)}",
                ResourceSpec(cpu=0.5, memory="256m", disk="1g"),
                environment=EnvironmentSpec(env_vars={FRAY_IRIS_RESULTS_URL: results_url}),
                user=user,
            )
            deadline = time.monotonic() + DRIVER_START_S
            while True:
                try:
                    conn, _ = listener.accept()
                    break
                except TimeoutError:
                    finished = is_job_finished(self.job.state_only())
                    if finished or time.monotonic() > deadline:
                        self.job.terminate()
                        raise RuntimeError(
                            f"{user}'s driver job {self.job.job_id} never connected"
                            + (f": {self.job.status().error}" if finished else "")
                        ) from None
        conn.settimeout(600.0)  # no sample takes that long: a hung driver fails the row
        self._conn = conn
        self._stream = conn.makefile("rw")
        try:
            self.attach(self._stream, self._stream, f"{user}'s driver job {self.job.job_id}")
        except (RuntimeError, OSError):
            self.close()
            raise

    def sample(self, scenario: str) -> float:
        try:
            return super().sample(scenario)
        except (RuntimeError, OSError) as err:
            time.sleep(1.0)  # for the job to be seen finished, with its error
            status = self.job.status()
            raise RuntimeError(f"{err} (job state {status.state}: {status.error!r})") from err

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._stream.write("quit\n")
            self._stream.flush()
        self._stream.close()
        self._conn.close()
        try:
            self.job.wait(timeout=60, raise_on_failure=False, poll_interval=0.2)
        finally:
            self.job.terminate()  # a no-op for a finished job


class _TaskSys(types.ModuleType):
    """``sys`` for Iris's process runtime, with ``executable`` swapped for a launcher."""

    def __init__(self, executable: str) -> None:
        super().__init__("sys")
        self.executable = executable

    def __getattr__(self, name: str) -> Any:
        return getattr(sys, name)


@contextlib.contextmanager
def predecessor_tasks(folder: Path, predecessor: Path) -> Iterator[None]:
    """While open, the local cluster runs the tasks of the user ``predecessor`` with the
    predecessor venv's interpreter, and every other task with this one, as before.

    The local cluster's process runtime starts each task with ``sys.executable``; it gets a
    launcher choosing by the task's id (``/user/job/.../index``) instead.
    """
    import iris.cluster.runtime.process as process  # marin-iris 0.2.20

    launcher = folder / "task-python"
    launcher.write_text(
        "#!/bin/sh\n"
        f'case "$IRIS_TASK_ID" in /{PREDECESSOR_USER}/*) '
        f'exec {shlex.quote(str(predecessor))} "$@" ;; esac\n'
        f'exec {shlex.quote(sys.executable)} "$@"\n'
    )
    launcher.chmod(0o755)
    with mock.patch.object(process, "sys", _TaskSys(str(launcher))):
        yield


def bench_predecessor(cluster: Any, predecessor: Path, repeats: int) -> list[dict[str, Any]]:
    """Fray against the predecessor (its venv's interpreter: ``predecessor``) on ``cluster``,
    each side's user code a driver job."""
    from iris.client import IrisClient as RawIrisClient

    raw = RawIrisClient.remote(cluster.url)

    def start() -> dict[str, Side]:
        sides: dict[str, Side] = {"fray": DriverSide(raw, "fray", cluster.results_url)}
        try:
            sides["predecessor"] = DriverSide(raw, PREDECESSOR_USER, cluster.results_url)
        except BaseException:
            sides["fray"].close()
            raise
        return sides

    repeats = max(repeats, MIN_REPEATS)
    try:
        with predecessor_tasks(cluster.root, predecessor):
            found = measure(start, PREDECESSOR_SCENARIOS, repeats)
    finally:
        raw.shutdown()
    return ratio_rows(found, repeats, PREDECESSOR_SCENARIOS, PREDECESSOR_HOW)


def _predecessor() -> Path | str:
    """The predecessor venv's interpreter (made if need be), or why there is none."""
    version = importlib.metadata.version("marin-iris")
    if not version.startswith(PREDECESSOR_IRIS):
        return f"needs marin-iris {PREDECESSOR_IRIS}x (Python 3.11), has {version}"
    try:
        return predecessor_python()
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:
        return str(err)


def run(repeats: int = 5) -> list[dict[str, Any]]:
    """Both Iris comparisons and, on marin-iris 0.2.20, the rows against the predecessor, on
    one in-process local cluster."""
    try:
        import fray_iris  # noqa: F401
    except ImportError as err:
        return [failed_row("Iris benchmarks", f"fray-iris is not installed: {err}")]
    import cloudpickle

    # Task processes cannot import this file: ship its functions and classes by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    # Before the cluster starts: it points HOME (where the venv is cached) elsewhere.
    predecessor = _predecessor()
    rows: list[dict[str, Any]] = []
    from fray_testing.iris_cluster import LocalIrisCluster

    with LocalIrisCluster(CLUSTER_YAML) as cluster:
        for bench in (bench_jobs, bench_actors):
            try:
                rows.append(bench(cluster.url, repeats))
            except Exception as err:
                rows.append(failed_row(bench.__name__, f"{type(err).__name__}: {err}"))
        names = [name for name, _ in PREDECESSOR_SCENARIOS.values()]
        if isinstance(predecessor, str):
            rows += [failed_row(name, predecessor) for name in names]
        else:
            try:
                rows += bench_predecessor(cluster, predecessor, repeats)
            except Exception as err:
                rows += [failed_row(name, f"{type(err).__name__}: {err}") for name in names]
    return rows


if __name__ == "__main__":
    main(run, default_repeats=5)
