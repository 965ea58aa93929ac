"""RayClient on a real two-node local Ray: placement, preemption, runtime envs.

The cluster: a head node (``head_node`` resource, 2 CPUs, dashboard on for command jobs) and
a worker node labelled as region ``test-east1`` with 4 CPUs. Jobs that ask for 3 CPUs can only
run on the worker, which lets a test kill "the node the job runs on".
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from fray import (
    ActorConfig,
    Entrypoint,
    EnvironmentConfig,
    JobRequest,
    JobStatus,
    ResourceConfig,
)
from fray.errors import ActorDiedError, ActorUnavailableError, InvalidRequestError, JobFailedError
from fray_ray import RayClient
from fray_ray_placement_support import first_reason, hold_cpus

ray = pytest.importorskip("ray")
from fray_testing.ray_cluster import LocalRayCluster  # noqa: E402

REGION = "test-east1"
DISK = {"disk": float(500 * 2**30)}  # the worker node advertises 500 GiB of disk


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    tests_dir = os.path.dirname(__file__)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (tests_dir, os.environ.get("PYTHONPATH", "")) if p
    )
    with LocalRayCluster(head_cpus=2, head_resources={"head_node": 1}, dashboard=True) as c:
        c.add_node(num_cpus=4, resources=DISK, labels={"ray.io/availability-region": REGION})
        c.connect()
        yield c


def node_id() -> str:
    return ray.get_runtime_context().get_node_id()


class Where:
    def node(self) -> str:
        return node_id()


def wait_for_file_then_block(path: str) -> str:
    """Records the attempt in ``path`` and blocks on the first attempt; returns the node."""
    with open(path, "a") as f:
        f.write("x")
    if os.path.getsize(path) == 1:
        import time

        while True:
            time.sleep(0.05)
    return node_id()


def read_env(*names: str) -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in names}


def import_pyjokes() -> str:
    import pyjokes  # pyright: ignore[reportMissingImports]

    return str(pyjokes.__name__)


class Restartable:
    def pid(self) -> int:
        return os.getpid()

    def block(self, started: str, seconds: float) -> str:
        with open(started, "w"):
            pass
        import time

        time.sleep(seconds)
        return "done"


def killed_mid_call(actor: Any, started: Path, seconds: float) -> Any:
    """Starts a call on ``actor``, kills its process once the call runs; the call's future."""
    import signal

    pid = actor.pid()
    call = actor.block.remote(str(started), seconds)
    deadline_wait(started.exists)
    os.kill(pid, signal.SIGKILL)
    return call, pid


def test_a_restarting_actor_is_unavailable_not_dead_and_retries_retry(
    client: RayClient, tmp_path: Path
) -> None:
    phoenix = client.create_actor(
        Restartable, name="phoenix", actor_config=ActorConfig(max_restarts=-1)
    )
    call, pid = killed_mid_call(phoenix, tmp_path / "a", 60)
    with pytest.raises(ActorUnavailableError):
        call.result(timeout=120)
    answers: list[int] = []

    def answered() -> bool:
        try:
            answers.append(phoenix.pid())
        except ActorUnavailableError:  # still restarting
            return False
        return True

    deadline_wait(answered)
    assert answers[-1] != pid  # a new incarnation answers
    retried = client.create_actor(
        Restartable, name="retried", actor_config=ActorConfig(max_restarts=-1, max_task_retries=2)
    )
    call, _ = killed_mid_call(retried, tmp_path / "b", 1)
    assert call.result(timeout=120) == "done"  # Ray ran the call again on the new one
    gone = client.create_actor(Restartable, name="gone", actor_config=ActorConfig(max_restarts=0))
    call, _ = killed_mid_call(gone, tmp_path / "c", 60)
    with pytest.raises(ActorDiedError):
        call.result(timeout=120)
    with pytest.raises(ActorDiedError):
        gone.pid()


def test_head_node_pinned_actor_lands_on_the_head(client: RayClient, cluster: LocalRayCluster):
    head = cluster.node_id(cluster.head_node)
    pinned = client.create_actor(
        Where, name="pinned", resources=ResourceConfig(cpu=0, preemptible=False)
    )
    assert pinned.node() == head
    group = client.create_actor_group(
        Where,
        name="spread",
        count=3,
        resources=ResourceConfig(cpu=0, preemptible=False),
        actor_config=ActorConfig(max_concurrency=2),
    )
    assert {h.node() for h in group.wait_ready(timeout=120)} == {head}
    group.shutdown()


def test_regions_become_a_label_requirement(client: RayClient, cluster: LocalRayCluster):
    head = cluster.node_id(cluster.head_node)
    job = client.submit(
        JobRequest(
            name="in-region",
            entrypoint=Entrypoint.from_callable(node_id),
            resources=ResourceConfig(cpu=0.5, ram="64m", regions=(REGION,)),
        )
    )
    assert job.result(timeout=120) != head


def test_disk_is_reserved_where_a_node_advertises_it(
    client: RayClient, cluster: LocalRayCluster, caplog: pytest.LogCaptureFixture
) -> None:
    # The labelled node advertises a custom resource 'disk' (bytes): a job that asks for
    # disk reserves it there (and only there fits); the default disk reserves nothing.
    asked = JobRequest(
        name="disk",
        entrypoint=Entrypoint.from_callable(placement),
        resources=ResourceConfig(cpu=1, ram="0", disk="100g"),
    )
    with caplog.at_level(logging.WARNING, logger="fray.ray"):
        for _ in range(2):
            _own, resources, node = client.submit(asked).result(timeout=120)
            assert resources == {"CPU": 1.0, "disk": 100 * 2**30}
            assert node != cluster.node_id(cluster.head_node)
    plain = JobRequest(
        name="plain",
        entrypoint=Entrypoint.from_callable(placement),
        resources=ResourceConfig(cpu=1, ram="0"),
    )
    assert client.submit(plain).result(timeout=120)[1] == {"CPU": 1.0}
    assert "resources.disk" not in caplog.text  # reserved: nothing to say


def test_fields_ray_does_not_honour_are_refused(client: RayClient) -> None:
    request = JobRequest(
        name="unhonoured", entrypoint=Entrypoint.from_callable(node_id), processes_per_task=2
    )
    with pytest.raises(InvalidRequestError) as caught:
        client.submit(request)
    assert caught.value.field == "JobRequest.processes_per_task"


def test_setup_scripts_are_not_run_on_ray_and_that_is_said(
    client: RayClient, caplog: pytest.LogCaptureFixture
) -> None:
    scripts = EnvironmentConfig(setup_scripts=["uv sync"], sync_packages=["pkg"])
    request = JobRequest(
        name="setup",
        entrypoint=Entrypoint.from_callable(node_id),
        resources=ResourceConfig(cpu=0.5),
        environment=scripts,
    )
    assert client.submit(request).result(timeout=120)
    said = [r.getMessage() for r in caplog.records if "ignores EnvironmentConfig" in r.getMessage()]
    assert len(said) == 2 and any("sync_packages" in text for text in said)


def sleep_for(seconds: float) -> str:
    import time

    time.sleep(seconds)
    return "slept"


def sleeper(seconds: float, **fields: Any) -> JobRequest:
    fields.setdefault("resources", ResourceConfig(cpu=0.5))
    return JobRequest(
        name="sleeper", entrypoint=Entrypoint.from_callable(sleep_for, args=(seconds,)), **fields
    )


def test_a_two_replica_attempt_past_its_timeout_fails_without_retry(client: RayClient) -> None:
    job = client.submit(sleeper(600, replicas=2, timeout=1, max_retries_failure=1))
    with pytest.raises(JobFailedError, match=r"ran longer than timeout=1s") as caught:
        job.wait(timeout=120)
    assert isinstance(caught.value.__cause__, TimeoutError)
    info = job.info()
    assert (info.attempts, info.failures, info.preemptions) == (1, 1, 0)


def test_a_callable_within_its_timeout_is_untouched(client: RayClient) -> None:
    assert client.submit(sleeper(0, timeout=60)).result(timeout=120) == "slept"


def test_a_command_past_its_timeout_is_stopped_and_fails_not_preempted(client: RayClient) -> None:
    job = client.submit(
        JobRequest(
            name="sleepy",
            entrypoint=Entrypoint.from_command(
                sys.executable, "-c", "import time; time.sleep(600)"
            ),
            resources=ResourceConfig(cpu=0.5),
            timeout=timedelta(seconds=2),
        )
    )
    with pytest.raises(JobFailedError, match=r"ran longer than timeout=2s"):
        job.wait(timeout=120)
    info = job.info()
    assert (info.failures, info.preemptions) == (1, 0)


def test_a_command_waiting_for_a_busy_node_says_why_then_runs(client: RayClient) -> None:
    """Only the worker has 4 CPUs; while a job holds them, a 4-CPU command's entrypoint
    waits, and its pending reason says what it asks for and what the cluster has."""
    hold = hold_cpus(client, sleeper(600, resources=ResourceConfig(cpu=4, ram="64m")), 4)
    try:
        handle = client.submit(
            JobRequest(
                name="waiting-command",
                entrypoint=Entrypoint.from_command(sys.executable, "-c", "print('ran')"),
                resources=ResourceConfig(cpu=4, ram="64m"),
            )
        )
        reason = first_reason(lambda: handle.info().pending_reason)
        assert handle.status() is not JobStatus.SUCCEEDED
    finally:
        hold.terminate()
    assert reason.startswith("the command may be waiting for a node: it asks for CPU=4, memory=")
    assert "the 1 node(s) that could take it are busy (free: CPU=0" in reason
    assert handle.wait(timeout=120) is JobStatus.SUCCEEDED
    assert "ran" in list(handle.logs())
    assert handle.info().pending_reason is None


def test_a_command_no_node_could_ever_take_waits_saying_why(client: RayClient) -> None:
    handle = client.submit(
        JobRequest(
            name="too-big-command",
            entrypoint=Entrypoint.from_command(sys.executable, "-c", "print(1)"),
            resources=ResourceConfig(cpu=64, ram="64m"),
        )
    )
    try:
        reason = first_reason(lambda: handle.info().pending_reason)
        assert reason.startswith("the command may be waiting for a node: it asks for CPU=64")
        assert "the most any of its 2 node(s) has: CPU=4" in reason
        assert handle.status() is JobStatus.PENDING
    finally:
        handle.terminate()
    assert handle.status() is JobStatus.STOPPED


def test_env_vars_reach_callable_and_command_jobs(client: RayClient, tmp_path: Path):
    env = EnvironmentConfig(env_vars={"FRAY_IT_COLOUR": "teal", "FRAY_IT_SHAPE": "cube"})
    job = client.submit(
        JobRequest(
            name="env-callable",
            entrypoint=Entrypoint.from_callable(read_env, args=("FRAY_IT_COLOUR", "FRAY_IT_SHAPE")),
            resources=ResourceConfig(cpu=0.5, ram="64m"),
            environment=env,
        )
    )
    assert job.result(timeout=120) == {"FRAY_IT_COLOUR": "teal", "FRAY_IT_SHAPE": "cube"}
    command = client.submit(
        JobRequest(
            name="env-command",
            entrypoint=Entrypoint.from_command(
                sys.executable,
                "-c",
                "import os; print('colour=' + os.environ['FRAY_IT_COLOUR'])",
            ),
            resources=ResourceConfig(cpu=0.5, ram="64m"),
            environment=env,
        )
    )
    assert command.wait(timeout=120) is JobStatus.SUCCEEDED
    assert "colour=teal" in list(command.logs())


def test_pip_runtime_env_installs_a_package(client: RayClient):
    # Runs before the node-kill test: on the replacement node that test adds, a pip env was
    # seen built but not applied to the worker (Ray 2.60, one machine posing as two nodes).
    with pytest.raises(ImportError):
        import_pyjokes()  # not in the test environment
    job = client.submit(
        JobRequest(
            name="pip",
            entrypoint=Entrypoint.from_callable(import_pyjokes),
            resources=ResourceConfig(cpu=0.5, ram="64m"),
            environment=EnvironmentConfig(pip_packages=("pyjokes",)),
        )
    )
    assert job.result(timeout=300) == "pyjokes"


_PY_EXECUTABLE_DRIVER = """
import sys
import ray
from fray import Entrypoint, EnvironmentConfig, JobRequest
from fray.errors import InvalidRequestError
from fray_ray import RayClient

ray.init(address=sys.argv[1], runtime_env={"py_executable": sys.executable})
client = RayClient(namespace="py-executable")
try:
    client.submit(JobRequest(
        name="pip",
        entrypoint=Entrypoint.from_callable(print),
        environment=EnvironmentConfig(pip_packages=("pyjokes",)),
    ))
except InvalidRequestError as exc:
    print("refused:", exc.field)
else:
    print("accepted")
client.shutdown()
ray.shutdown()
"""


def test_pip_packages_are_refused_when_the_ray_job_sets_py_executable(
    cluster: LocalRayCluster,
) -> None:
    # Ray sets a job-wide py_executable for a driver run under `uv run`; every worker then
    # starts with it and a task's pip env is silently ignored (seen in CI: ModuleNotFound).
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run(
        [sys.executable, "-c", _PY_EXECUTABLE_DRIVER, cluster.address],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert "refused: JobRequest.environment.pip_packages" in out.stdout, out.stdout + out.stderr


def test_killed_worker_node_is_a_preemption_and_the_job_reruns(
    client: RayClient, cluster: LocalRayCluster, tmp_path: Path
):
    marker = tmp_path / "attempts"
    job = client.submit(
        JobRequest(
            name="survivor",
            entrypoint=Entrypoint.from_callable(wait_for_file_then_block, args=(str(marker),)),
            resources=ResourceConfig(cpu=3, ram="64m"),  # only the worker node has 3 CPUs
            max_retries_preemption=2,
            max_retries_failure=0,
        )
    )
    deadline_wait(lambda: marker.exists() and marker.stat().st_size == 1)
    [worker] = [n for n in cluster.alive_nodes() if n is not cluster.head_node]
    cluster.kill_node(worker, preemption=True)
    replacement = cluster.add_node(
        num_cpus=4, resources=DISK, labels={"ray.io/availability-region": REGION}
    )
    assert job.result(timeout=180) == cluster.node_id(replacement)
    info = job.info()
    assert (info.attempts, info.preemptions, info.failures) == (2, 1, 0)
    assert info.status is JobStatus.SUCCEEDED


def deadline_wait(predicate: Callable[[], bool], timeout: float = 120.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    delay = 0.01
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(delay)  # polling a bounded wait
        delay = min(delay * 2, 0.2)


# -- how a job's end is noticed (whoever waits, else callbacks on its tasks' futures) -------


def own_job_id() -> str | None:
    return os.environ.get("FRAY_JOB_ID")


def count_attempt_then_fail_once(path: str) -> str:
    """Appends to ``path``; raises on the first attempt."""
    with open(path, "a") as f:
        f.write("x")
    if os.path.getsize(path) == 1:
        raise ValueError("first attempt fails")
    return "second attempt"


def fails_once(marker: Path) -> JobRequest:
    return JobRequest(
        name="flaky",
        entrypoint=Entrypoint.from_callable(count_attempt_then_fail_once, [str(marker)]),
        max_retries_failure=1,
    )


def test_a_resubmitted_request_runs_under_the_id_its_handle_reports(client: RayClient) -> None:
    request = JobRequest(name="whoami", entrypoint=Entrypoint.from_callable(own_job_id))
    handles = [client.submit(request) for _ in range(4)]
    ids = [handle.job_id for handle in handles]
    assert [handle.result(timeout=120) for handle in handles] == ids
    assert len(set(ids)) == 4
    assert all(job_id.startswith("whoami-") for job_id in ids)
    assert {info.job_id for info in client.list_jobs()} >= set(ids)


def placement() -> tuple[str | None, dict[str, float], str]:
    context = ray.get_runtime_context()
    return own_job_id(), context.get_assigned_resources(), context.get_node_id()


def test_every_submission_of_a_request_runs_with_its_resources_and_labels(
    client: RayClient,
) -> None:
    # A request's Ray options are worked out at each submit: every run of it asks Ray for
    # the same resources, on the node they pin it to, under the id its handle reports.
    request = JobRequest(
        name="options",
        entrypoint=Entrypoint.from_callable(placement),
        resources=ResourceConfig(cpu=2, ram="64M", preemptible=False),
    )
    runs = []
    for _ in range(3):
        handle = client.submit(request)
        runs.append((handle.job_id, handle.result(timeout=120)))
    head = runs[0][1][2]
    for job_id, (own_id, resources, node) in runs:
        assert own_id == job_id
        assert resources == {"CPU": 2.0, "memory": 64 * 2**20, "head_node": 0.001}
        assert node == head
    labelled = JobRequest(
        name="labelled",
        entrypoint=Entrypoint.from_callable(placement),
        resources=ResourceConfig(cpu=1, regions=[REGION]),
    )
    nodes = {client.submit(labelled).result(timeout=120)[2] for _ in range(3)}
    assert len(nodes) == 1 and nodes != {head}  # the labelled node, every time


def test_a_request_whose_resources_change_runs_with_each_submissions_own(
    client: RayClient,
) -> None:
    # The client keeps Ray's remote function per set of options: a request changed back and
    # forth between submissions still asks for what it holds at each one.
    request = JobRequest(
        name="resized",
        entrypoint=Entrypoint.from_callable(placement),
        resources=ResourceConfig(cpu=2, ram="0"),
    )
    seen = []
    for cpu in (2, 1, 2, 1):
        request.resources = ResourceConfig(cpu=cpu, ram="0")
        seen.append(client.submit(request).result(timeout=120)[1])
    assert seen == [{"CPU": 2.0}, {"CPU": 1.0}, {"CPU": 2.0}, {"CPU": 1.0}]


def test_a_request_changed_after_it_ran_runs_as_changed(client: RayClient) -> None:
    # Requests can be changed after they are made; each submission works its options out
    # again, so its id (a '/' in the name is escaped there) and its function's agree.
    request = JobRequest(name="before", entrypoint=Entrypoint.from_callable(own_job_id))
    for _ in range(2):
        handle = client.submit(request)
        assert handle.result(timeout=120) == handle.job_id
    request.name = "after/step"
    for _ in range(2):
        handle = client.submit(request)
        assert handle.job_id.startswith("after%2Fstep-")
        assert handle.result(timeout=120) == handle.job_id


def test_a_job_nobody_waits_for_is_still_retried_and_finished(
    client: RayClient, tmp_path: Path
) -> None:
    # No wait(), result() or status(): the watcher's callbacks on the tasks' futures must
    # drive the retry and run the done-callback. The test only reads the client's list and
    # the callback's list, which ask nothing of the job.
    marker = tmp_path / "attempts"
    handle = client.submit(fails_once(marker))
    ended: list[str] = []
    handle.add_done_callback(lambda h: ended.append(h.job_id))

    def listed() -> Any:
        return next(info for info in client.list_jobs() if info.job_id == handle.job_id)

    deadline_wait(lambda: bool(ended))
    assert ended == [handle.job_id]
    assert marker.read_text() == "xx"
    info = listed()
    assert (info.status, info.attempts, info.failures) == (JobStatus.SUCCEEDED, 2, 1)
    assert handle.result() == "second attempt"


def exit_with(code: int) -> None:
    sys.exit(code)


def test_sys_exit_in_a_job_is_a_failure_with_its_exit_code_not_a_preemption(
    client: RayClient,
) -> None:
    # Ray ends a worker whose task calls sys.exit and reports WorkerCrashedError, which
    # reads as a preemption; the wrapper makes it the job's failure, with its code.
    job = client.submit(
        JobRequest(
            name="exits",
            entrypoint=Entrypoint.from_callable(exit_with, [3]),
            max_retries_failure=0,
            max_retries_preemption=5,
        )
    )
    with pytest.raises(JobFailedError, match="SystemExit: 3") as caught:
        job.wait(timeout=120)
    assert isinstance(caught.value.__cause__, SystemExit)
    info = job.info()
    assert (info.status, info.exit_code) == (JobStatus.FAILED, 3)
    assert (info.attempts, info.failures, info.preemptions) == (1, 1, 0)


def test_done_callbacks_and_a_blocked_waiter_each_see_the_end_once(client: RayClient) -> None:
    import threading

    handle = client.submit(sleeper(1))
    seen: list[str] = []
    waiter = threading.Thread(target=lambda: seen.append(str(handle.wait(timeout=120))))
    waiter.start()
    for name in ("first", "second"):
        handle.add_done_callback(lambda h, n=name: seen.append(f"{n}:{h.status().value}"))
    waiter.join(timeout=120)
    deadline_wait(lambda: len(seen) == 3)
    assert sorted(seen) == ["first:succeeded", "second:succeeded", "succeeded"]
    handle.add_done_callback(lambda h: seen.append("late"))  # an ended job: called at once
    assert seen[-1] == "late"


def test_wait_all_batches_many_jobs_with_a_retry_among_them(
    client: RayClient, tmp_path: Path
) -> None:
    from fray import wait_all

    flaky = fails_once(tmp_path / "attempts")
    quick = JobRequest(name="quick", entrypoint=Entrypoint.from_callable(own_job_id))
    handles = [client.submit(quick) for _ in range(20)]
    handles.insert(7, client.submit(flaky))
    statuses = wait_all(handles, timeout=120)
    assert statuses == [JobStatus.SUCCEEDED] * 21
    assert handles[7].result() == "second attempt"
    assert [h.result() for i, h in enumerate(handles) if i != 7] == [
        h.job_id for i, h in enumerate(handles) if i != 7
    ]


# -- the wrapper a callable job runs in (fray_ray._worker) -----------------------------------


def print_and_return(value: object) -> object:
    print("a line")
    print("no newline at the end", end="")
    return value


def identity_in_a_subprocess() -> dict[str, str | None]:
    import json
    import subprocess

    from fray import current_job_id

    code = (
        "import json, os; print(json.dumps({k: os.environ.get(k) for k in "
        "('FRAY_JOB_ID', 'FRAY_TASK_INDEX', 'FRAY_NUM_TASKS', 'JAX_PLATFORMS')}))"
    )
    seen = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True).stdout)
    return {**seen, "current_job_id": current_job_id()}


def raise_value_error() -> None:
    raise ValueError("boom")


def test_each_job_sees_its_own_identity_and_the_worker_gets_its_env_back(
    client: RayClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The wrapper as a worker runs it, called here in the test process: FRAY_JOB_ID,
    # FRAY_TASK_INDEX, FRAY_NUM_TASKS and the device defaults are set in os.environ (and
    # so in a subprocess) for the job's duration, then the worker's own values come back.
    # The value comes back as it is (with the lines, where it printed); the user's own
    # exception is raised, carrying the lines; sys.exit becomes JobExit with its code.
    import pickle

    import cloudpickle

    from fray_ray._client import job_client
    from fray_ray._worker import JobExit, Printed, printed_lines, runner

    monkeypatch.setenv("JAX_PLATFORMS", "tpu")  # the worker's own value comes back after
    monkeypatch.delenv("FRAY_JOB_ID", raising=False)
    before = dict(os.environ)
    _one, execute = runner(job_client)

    def run(job_id: str, fn: Callable[..., object], *args: object) -> Any:
        call = cloudpickle.dumps((fn, args, {}))
        env = (("JAX_PLATFORMS", "cpu"),)
        where = (client.namespace, client.registry.name, False, env, None, call)
        return execute(pickle.dumps((job_id, 2, *where)), 1)

    for job_id in ("wrap-1", "wrap-2"):
        assert run(job_id, identity_in_a_subprocess) == {
            "FRAY_JOB_ID": job_id,
            "FRAY_TASK_INDEX": "1",
            "FRAY_NUM_TASKS": "2",
            "JAX_PLATFORMS": "cpu",
            "current_job_id": job_id,
        }
        assert dict(os.environ) == before
    printed = run("wrap-3", print_and_return, 7)
    assert isinstance(printed, Printed)
    assert (printed.value, printed.lines) == (7, ["a line", "no newline at the end"])
    with pytest.raises(ValueError, match="boom") as raised:
        run("wrap-4", raise_value_error)
    assert any("ValueError: boom" in line for line in printed_lines(raised.value))
    with pytest.raises(JobExit) as exited:
        run("wrap-5", sys.exit, 3)
    assert exited.value.code == 3
    assert dict(os.environ) == before


def test_a_command_job_waits_for_a_job_agent_that_is_not_up_yet(client: RayClient) -> None:
    # A Ray that has just started answers submissions with a 500 until its dashboard agent
    # is up; the submission is tried again instead of failing the job.
    real = client.jobs_api()
    refusals = []

    class AgentNotUpYet:
        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        def submit_job(self, **kwargs: object) -> object:
            if len(refusals) < 2:
                refusals.append(kwargs["submission_id"])
                raise RuntimeError(
                    "Request failed with status code 500: No available agent to submit job, "
                    "please try again later.."
                )
            return real.submit_job(**kwargs)

    client.session._jobs_api = AgentNotUpYet()  # pyright: ignore[reportPrivateUsage]
    job = client.submit(
        JobRequest(
            name="agent-late",
            entrypoint=Entrypoint.from_command(sys.executable, "-c", "print('submitted')"),
            resources=ResourceConfig(cpu=0.5, ram="64m"),
        )
    )
    assert job.wait(timeout=120) is JobStatus.SUCCEEDED
    assert len(refusals) == 2
    assert "submitted" in list(job.logs())
    assert job.info().attempts == 1


def test_command_jobs_beyond_the_cap_wait_in_the_driver_and_all_finish(
    cluster: LocalRayCluster,
) -> None:
    # Each command job is a Ray job with a supervisor on the head node: a client keeps at
    # most max_command_jobs of them in Ray's Jobs API; the others are queued in the driver
    # (their pending reason names the cap). All submitted at once finish, and Ray's own job
    # list shows that never more than the cap were in Ray at once (each from its submission,
    # Ray's start_time, to its end_time). Six times the cap here; the 200 with
    # FRAY_TEST_COMMAND_JOBS=200 (about 10 minutes on 2 cores: ~3 s of Ray per job and slot).
    import time

    from fray import wait_all

    cap, count = 4, int(os.environ.get("FRAY_TEST_COMMAND_JOBS", "24"))
    with RayClient(namespace="capped", echo_logs=False, max_command_jobs=cap) as client:
        handles = [
            client.submit(
                JobRequest(
                    name=f"cmd-{i}",
                    entrypoint=Entrypoint.from_command("true"),
                    resources=ResourceConfig(cpu=0.1, ram="0"),
                )
            )
            for i in range(count)
        ]
        deadline = time.monotonic() + 60
        while f"max_command_jobs={cap}" not in (handles[-1].info().pending_reason or ""):
            assert time.monotonic() < deadline, handles[-1].info()
            time.sleep(0.05)  # bounded poll: the client's polling thread queues it
        assert wait_all(handles, timeout=1200) == [JobStatus.SUCCEEDED] * count
        ours = {handle.job_id for handle in handles}
        in_ray = [
            details
            for details in client.jobs_api().list_jobs()
            if (details.metadata or {}).get("fray_job_id") in ours
        ]
    assert len(in_ray) == count
    # At the same millisecond an end comes before a start: the driver submits the next job
    # once it has seen one end.
    edges = sorted([(d.start_time, 1) for d in in_ray] + [(d.end_time, -1) for d in in_ray])
    running = most = 0
    for _when, step in edges:
        running += step
        most = max(most, running)
    assert most == cap


def test_a_failed_command_job_runs_its_next_attempt(client: RayClient) -> None:
    # A command job's attempt that fails is charged to its failure budget and the next one
    # is submitted to Ray's Jobs API (the poller once forgot the job after its first attempt,
    # and the handle stayed RUNNING for ever).
    job = client.submit(
        JobRequest(
            name="cmd-retried",
            entrypoint=Entrypoint.from_command(sys.executable, "-c", "raise SystemExit(3)"),
            resources=ResourceConfig(cpu=0.1, ram="0"),
            max_retries_failure=1,
        )
    )
    assert job.wait(timeout=300, raise_on_failure=False) is JobStatus.FAILED
    info = job.info()
    assert (info.attempts, info.failures, info.exit_code) == (2, 2, 3)
