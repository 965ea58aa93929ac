"""Runs the example programs as a user would: ``python examples/<name>.py`` in a subprocess,
with ``FRAY_CLIENT_SPEC`` choosing the backend, against real backends started here.

* ``run_example`` runs one example, kills it at a generous deadline, and checks that no
  process it started is left behind (every process of the run carries a marker env var).
* ``ray_cluster``: a private local Ray per test module (``head_node`` resource for the
  ``preemptible=False`` actors), left through ``RAY_ADDRESS``; ``tpu_ray_cluster``: the same
  with two fake v4-16 slices.
* ``iris_cluster``: a real in-process Iris cluster (controller, autoscaler, worker threads,
  tasks as child processes), as in ``packages/fray-iris/tests/conftest.py``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

EXAMPLES = Path(__file__).resolve().parents[1]
# One CPU scale group is all the examples need; sizes are logical (not checked against the
# machine). Written to the cluster's temp folder at start.
IRIS_CONFIG = """\
name: fray-examples
platform:
  local:
controller:
  local:
    port: 0
worker_provider: {}
scale_groups:
  cpu:
    num_vms: 1
    resources:
      {cpu: 64, ram: 256GB, disk: 2000GB, device_type: cpu, device_variant: cpu,
       capacity_type: on-demand}
    buffer_slices: 1
    max_slices: 2
    slice_template: {num_vms: 1, local: {}}
"""
MARKER = "FRAY_EXAMPLES_RUN"
# The machine is shared and slow: deadlines are generous, and only bound a hung run.
RUN_TIMEOUT_S = 420.0
LEFTOVER_TIMEOUT_S = 60.0
RAY_START_ATTEMPTS = 2  # each LocalRayCluster.start() itself tries twice


@dataclass
class ExampleRun:
    """The outcome of one example run."""

    name: str
    returncode: int
    output: str
    report: dict[str, Any]
    seconds: float

    @property
    def final_line(self) -> str:
        """The program's own last line (``<name>: ...``). Ray forwards the jobs' output to
        the driver asynchronously from a thread of its own, so some of it may come after;
        and as it writes a job's line and its newline in two writes, the program's own line
        may land between them, glued to the end of that forwarded line."""
        marker = f"{self.name}: "
        lines: list[str] = []
        for line in self.output.splitlines():
            if line.startswith(marker):
                lines.append(line)
            elif _RAY_FORWARDED.match(line) and marker in line:
                lines.append(line[line.rindex(marker) :])
        return lines[-1] if lines else ""


# The prefix Ray puts on a job's output line forwarded to the driver: "(name pid=N)", maybe
# with an ip and colour codes around it.
_RAY_FORWARDED = re.compile(r"^(?:\x1b\[[0-9;]*m)?\([^)]*\bpid=\d+[^)]*\)")


def _marked(marker: str) -> list[psutil.Process]:
    found: list[psutil.Process] = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(MARKER) == marker and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Polls ``predicate`` until it returns something true; fails the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)  # polling interval of a bounded wait


def run_example(
    script: str,
    *args: str,
    spec: str,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    timeout: float = RUN_TIMEOUT_S,
) -> ExampleRun:
    """Runs ``examples/<script>`` with ``FRAY_CLIENT_SPEC=spec`` and ``--report``.

    Fails the test if the run hangs past ``timeout`` or leaves a process behind.
    """
    marker = uuid.uuid4().hex
    report = tmp_path / f"{Path(script).stem}-report.json"
    pythonpath = [str(EXAMPLES), *filter(None, [os.environ.get("PYTHONPATH")])]
    run_env = {
        **os.environ,
        "FRAY_CLIENT_SPEC": spec,
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": os.pathsep.join(pythonpath),
        "PYTHONUNBUFFERED": "1",
        MARKER: marker,
        **(env or {}),
    }
    argv = [sys.executable, str(EXAMPLES / script), *args, "--report", str(report)]
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        env=run_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for leftover in _marked(marker):
            leftover.kill()
        output, _ = proc.communicate()
        pytest.fail(f"{script} did not finish within {timeout:.0f}s; output:\n{output}")
    seconds = time.monotonic() - started
    print(output)  # shown by pytest when the test fails
    print(f"[{script} on {spec or 'local'} took {seconds:.1f}s]")

    deadline = time.monotonic() + LEFTOVER_TIMEOUT_S
    left = _marked(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)  # polling interval of a bounded wait
        left = _marked(marker)
    if left:
        described = [(p.pid, " ".join(p.cmdline())[:120]) for p in left if p.is_running()]
        for leftover in left:
            leftover.kill()
        pytest.fail(f"{script} left processes behind: {described}")
    data = json.loads(report.read_text()) if report.exists() else {}
    return ExampleRun(Path(script).stem, proc.returncode, output, data, seconds)


# -- Ray -----------------------------------------------------------------------------------


_RAY_SYSTEM_TITLES = ("ray::IDLE", "ray::DashboardAgent", "ray::RuntimeEnvAgent")


def _ray_actor_processes(root: str) -> list[str]:
    """Ray workers of the cluster under ``root`` that still run an actor or a task (idle
    pool workers and the per-node agents do not count)."""
    found: list[str] = []
    for proc in psutil.process_iter():
        try:
            title = " ".join(proc.cmdline())
            if not title.startswith("ray::") or title.startswith(_RAY_SYSTEM_TITLES):
                continue
            if proc.environ().get("RAY_TMPDIR") == root:
                found.append(title[:80])
        except psutil.Error:
            continue
    return found


@dataclass
class RayForExamples:
    """A running local Ray cluster and how examples reach it."""

    cluster: Any
    env: dict[str, str]

    def assert_no_actors_left(self) -> None:
        """Every actor the example created (and its client's registry) is gone."""
        root = self.cluster.temp_root
        wait_until(
            lambda: not _ray_actor_processes(root),
            LEFTOVER_TIMEOUT_S,
            f"actor processes to end: {_ray_actor_processes(root)}",
        )


def _start_ray(add_slices: int) -> Iterator[RayForExamples]:
    pytest.importorskip("ray", reason="the Ray examples need fray-ray")
    from fray_testing.ray_cluster import LocalRayCluster

    saved = os.environ.get("PYTHONPATH")
    # Nodes take this process's sys.path and PYTHONPATH: workers can import the examples.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EXAMPLES), saved]))
    try:
        cluster = LocalRayCluster(head_cpus=4, head_resources={"head_node": 1})
        for attempt in range(1, RAY_START_ATTEMPTS + 1):
            try:
                # Ray gives a raylet a fixed 30 s to register: on a machine loaded by other
                # test runs that is sometimes not enough (the cluster cleans up after itself).
                cluster.start()
                break
            except Exception:
                if attempt == RAY_START_ATTEMPTS:
                    raise
        try:
            for index in range(add_slices):
                cluster.add_tpu_slice("v4-16", name=f"slice-{'abcd'[index]}")
            yield RayForExamples(cluster, {"RAY_ADDRESS": cluster.address})
        finally:
            cluster.shutdown()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


@pytest.fixture(scope="module")
def tpu_ray_cluster() -> Iterator[RayForExamples]:
    """A local Ray posing as a pod: a head node and two fake v4-16 slices of two hosts."""
    yield from _start_ray(add_slices=2)


# -- Iris ----------------------------------------------------------------------------------


@dataclass
class IrisForExamples:
    """A running in-process Iris cluster."""

    url: str
    root: Path
    before: set[int]

    @property
    def spec(self) -> str:
        return "iris://" + self.url.split("://", 1)[1]

    def assert_no_tasks_left(self) -> None:
        """Every task process the example started (jobs, actor hosts) has ended."""

        def new_children() -> list[psutil.Process]:
            return [
                p
                for p in psutil.Process().children(recursive=True)
                if p.pid not in self.before and _alive(p)
            ]

        wait_until(
            lambda: not new_children(),
            LEFTOVER_TIMEOUT_S,
            f"Iris task processes to end: {[p.pid for p in new_children()]}",
        )


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _start_iris() -> Iterator[IrisForExamples]:
    """Starts a local Iris cluster in this process (``fray_testing.iris_cluster``, as the
    fray-iris tests do); the examples, run with this env, and the tasks, children of this
    process, see the same HOME and TMPDIR."""
    pytest.importorskip("fray_iris", reason="the Iris examples need fray-iris")
    from fray_testing.iris_cluster import LocalIrisCluster

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    pythonpath = os.pathsep.join(filter(None, [str(EXAMPLES), os.environ.get("PYTHONPATH")]))
    with LocalIrisCluster(IRIS_CONFIG, env={"PYTHONPATH": pythonpath}) as cluster:
        yield IrisForExamples(cluster.url, cluster.root, before)


# -- the backend an example runs on -----------------------------------------------------------


@dataclass
class Backend:
    """Where an example runs: its spec, extra env, and the leftover check after a run."""

    name: str
    spec: str
    env: dict[str, str]
    after_run: Callable[[], None]


@pytest.fixture(scope="session", autouse=True)
def _tmp_root_outside_clusters(tmp_path_factory: pytest.TempPathFactory) -> None:
    """pytest's folder for ``tmp_path`` is made before any cluster starts: pytest makes it
    where ``TMPDIR`` points the first time a test asks, and an Iris cluster points ``TMPDIR``
    into its own folder, which it removes when it stops, so every later module's
    ``tmp_path`` would be under a folder that no longer exists."""
    tmp_path_factory.getbasetemp()


@pytest.fixture(scope="module", params=["local", "ray", "iris"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """Each backend in turn, one cluster per module (pytest finishes every test on one
    backend and tears its cluster down before starting the next)."""
    if request.param == "local":
        yield Backend("local", "local", {}, lambda: None)
    elif request.param == "ray":
        for ray in _start_ray(add_slices=0):
            yield Backend("ray", "ray", ray.env, ray.assert_no_actors_left)
    else:
        for iris in _start_iris():
            yield Backend("iris", iris.spec, {}, iris.assert_no_tasks_left)


@pytest.fixture
def example(tmp_path: Path) -> Callable[..., ExampleRun]:
    """``example("train.py", "--steps", "10", spec="local")``: see :func:`run_example`."""
    return functools.partial(run_example, tmp_path=tmp_path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Iris's process runtime drops the pipes of finished tasks without closing them; the
    ResourceWarnings that causes surface (through garbage collection) in whichever test runs
    next, so every test here ignores them (as the fray-iris tests do)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(
                pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
            )
            item.add_marker(pytest.mark.filterwarnings("ignore::ResourceWarning"))
