"""IrisClient on the in-process Iris cluster: TPU gangs, placement, worker loss, nested jobs,
actor handles passed to jobs, hosted actors as endpoints of their job, actors whose process
is killed, client specs and auto-detection inside a job."""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import queue
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from iris.cluster.types import JobName

import fray
import fray.backend
from fray import ActorConfig, Entrypoint, JobRequest, JobStatus, ResourceConfig
from fray.errors import ActorDiedError, ActorError, InvalidRequestError, JobNotFoundError
from fray_iris import IrisClient
from fray_iris._convert import line
from fray_iris._job import LOGS_GRACE_S
from fray_iris._views import END_OF_OUTPUT
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance import host_in_job

pytestmark = pytest.mark.integration

TIMEOUT = 120.0


def _eventually(predicate: Any, what: str, timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)  # polling interval of a bounded wait


def _workers(client: IrisClient) -> dict[str, dict[str, str]]:
    """Worker id -> its attributes, as strings."""
    out: dict[str, dict[str, str]] = {}
    for worker in client.iris.list_workers():
        attrs: dict[str, str] = {}
        for key, value in worker.metadata.attributes.items():
            kind = value.WhichOneof("value")
            attrs[key] = str(getattr(value, kind)) if kind else ""
        out[worker.worker_id] = attrs
    return out


def _task_workers(client: IrisClient, job: Any) -> list[str]:
    return [task.worker_id for task in client.iris.list_tasks(JobName.from_wire(job.iris_job_id))]


def tpu_host_identity() -> dict[str, str | None]:
    """What a TPU host sees."""
    return {
        "worker": os.environ.get("TPU_WORKER_ID"),
        "type": os.environ.get("TPU_ACCELERATOR_TYPE"),
        "index": os.environ.get("FRAY_TASK_INDEX"),
    }


def test_multi_vm_tpu_job_runs_one_task_per_vm(iris_client: IrisClient) -> None:
    request = JobRequest(
        name=f"tpu16-{os.urandom(3).hex()}",
        entrypoint=Entrypoint.from_callable(tpu_host_identity),
        resources=ResourceConfig.with_tpu("v5litepod-16"),
    )
    assert request.replicas == 4
    job = iris_client.submit(request)
    hosts = job.result(timeout=TIMEOUT)
    assert sorted(h["worker"] or "" for h in hosts) == ["0", "1", "2", "3"]
    assert {h["type"] for h in hosts} == {"v5litepod-16"}
    assert job.info().replicas == 4
    workers = _task_workers(iris_client, job)
    assert len(set(workers)) == 4  # one fake VM per task
    attrs = _workers(iris_client)
    assert sorted(attrs[w]["tpu-worker-id"] for w in workers) == ["0", "1", "2", "3"]
    assert {attrs[w]["device-variant"] for w in workers} == {"v5litepod-16"}


def test_single_vm_tpu_replicas_are_not_coscheduled(iris_client: IrisClient) -> None:
    from fray_iris._convert import to_iris_request

    request = JobRequest(
        name=f"tpu4-{os.urandom(3).hex()}",
        entrypoint=Entrypoint.from_callable(ep.echo, ["host"]),
        resources=ResourceConfig.with_tpu("v5litepod-4"),
        replicas=2,
    )
    assert to_iris_request(request).get("coscheduling") is None
    assert iris_client.submit(request).result(timeout=TIMEOUT) == ["host", "host"]


def test_non_preemptible_job_lands_on_an_on_demand_group(iris_client: IrisClient) -> None:
    from fray_iris._convert import to_iris_request

    request = JobRequest(
        name=f"ondemand-{os.urandom(3).hex()}",
        entrypoint=Entrypoint.from_callable(ep.add, [1, 2]),
        resources=ResourceConfig(cpu=0.5, ram="256m", preemptible=False),
    )
    [constraint] = to_iris_request(request)["constraints"]
    assert constraint.key == "preemptible"
    job = iris_client.submit(request)
    assert job.result(timeout=TIMEOUT) == 3
    [worker] = _task_workers(iris_client, job)
    assert _workers(iris_client)[worker]["preemptible"] == "false"


def test_non_preemptible_tpu_that_only_exists_preemptible_is_refused(
    iris_client: IrisClient,
) -> None:
    request = JobRequest(
        name=f"nospot-{os.urandom(3).hex()}",
        entrypoint=Entrypoint.from_callable(ep.add, [1, 2]),
        resources=ResourceConfig.with_tpu("v5litepod-4", preemptible=False),
    )
    with pytest.raises(InvalidRequestError):
        iris_client.submit(request).wait(timeout=TIMEOUT)


def test_unknown_device_in_cluster_is_an_invalid_request(iris_client: IrisClient) -> None:
    request = JobRequest(
        name=f"v6e-{os.urandom(3).hex()}",
        entrypoint=Entrypoint.from_callable(ep.add, [1, 2]),
        resources=ResourceConfig.with_tpu("v6e-8"),
    )
    with pytest.raises(InvalidRequestError) as caught:
        iris_client.submit(request)
    assert "v6e-8" in str(caught.value)


def test_gpu_job_runs_on_the_gpu_group(iris_client: IrisClient) -> None:
    job = iris_client.submit(
        JobRequest(
            name=f"gpu-{os.urandom(3).hex()}",
            entrypoint=Entrypoint.from_callable(ep.add, [2, 3]),
            resources=ResourceConfig.with_gpu("H100", 1, cpu=1, ram="1g"),
        )
    )
    assert job.result(timeout=TIMEOUT) == 5
    [worker] = _task_workers(iris_client, job)
    assert _workers(iris_client)[worker]["device-variant"].lower() == "h100"


def survive_worker_loss(counter: str, release: str) -> int:
    """Attempt 1 blocks (until released or two minutes pass); later attempts return."""
    with open(counter, "a") as f:
        f.write(".")
    attempt = os.path.getsize(counter)
    if attempt == 1:
        deadline = time.monotonic() + 120
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.1)
    return attempt


def test_worker_loss_is_retried_as_a_preemption(iris_client: IrisClient, tmp_path: Path) -> None:
    from iris.chaos import enable_chaos, reset_chaos

    counter, release = tmp_path / "attempts", tmp_path / "release"
    job = iris_client.submit(
        JobRequest(
            name=f"lost-{os.urandom(3).hex()}",
            entrypoint=Entrypoint.from_callable(survive_worker_loss, [str(counter), str(release)]),
            resources=ResourceConfig(cpu=0.5, ram="256m"),
            max_retries_preemption=3,
        )
    )
    _eventually(counter.exists, "the first attempt to start")
    # The controller cannot reach its workers: after the grace period it declares them lost.
    enable_chaos("controller.reconcile", failure_rate=1.0)
    try:
        _eventually(lambda: job.info().preemptions >= 1, "the worker loss to be noticed")
    finally:
        reset_chaos()
        release.touch()
    assert job.result(timeout=TIMEOUT) >= 2
    info = job.info()
    assert info.status is JobStatus.SUCCEEDED
    assert info.preemptions >= 1
    assert info.failures == 0


def spawn_child_with_current_client(child_name: str) -> dict[str, Any]:
    """Inside a job: the auto-detected client, and a child job submitted with it."""
    from fray_iris._context import detect

    client, reason = fray.current_client(), (detect() or ("", "", None, "no Iris context"))[3]
    print("parent says hi", flush=True)
    child = client.submit(
        JobRequest(name=child_name, entrypoint=Entrypoint.from_callable(ep.print_lines, ["kid"]))
    )
    child.wait()
    return {
        "type": type(client).__name__,
        "reason": reason,
        "child": child.job_id,
        "job": fray.current_job_id(),
    }


def test_nested_jobs_use_the_jobs_own_context(iris_client: IrisClient) -> None:
    job = iris_client.submit(
        JobRequest(
            name=f"nest-{os.urandom(3).hex()}",
            entrypoint=Entrypoint.from_callable(spawn_child_with_current_client, ["kid"]),
        )
    )
    seen = job.result(timeout=TIMEOUT)
    assert seen["type"] == "IrisClient"
    assert seen["reason"] == "running inside an Iris job"
    assert seen["job"] == job.job_id
    assert seen["child"] == f"{job.job_id}/kid"
    assert job.info().children == (seen["child"],)
    lines = list(job.logs(include_children=True))
    assert "parent says hi" in lines
    assert f"[{seen['child']}] kid" in lines
    assert not any("kid" in line for line in job.logs())
    assert iris_client.get_job(seen["child"]).info().parent == job.job_id


def call_twice(handle: Any) -> list[int]:
    return [handle.incr(1), handle.incr.remote(10).result(timeout=60)]


def test_actor_created_by_driver_is_called_from_a_job(iris_client: IrisClient) -> None:
    counter = iris_client.create_actor(ep.Counter, name=f"shared-{os.urandom(3).hex()}")
    counter.incr(5)
    job = iris_client.submit(
        JobRequest(
            name=f"caller-{os.urandom(3).hex()}",
            entrypoint=Entrypoint.from_callable(call_twice, [counter]),
        )
    )
    assert job.result(timeout=TIMEOUT) == [6, 16]
    assert counter.value() == 16
    assert pickle.loads(pickle.dumps(counter)).value() == 16


class SlowStart:
    """An actor whose constructor never finishes."""

    def __init__(self) -> None:
        time.sleep(3600)


def test_wait_ready_fails_fast_when_the_hosting_job_dies(iris_client: IrisClient) -> None:
    group = iris_client.create_actor_group(SlowStart, name=f"slow-{os.urandom(3).hex()}", count=1)
    _eventually(lambda: group.job.status() is JobStatus.RUNNING, "the actor job to start")
    line.terminate(
        iris_client.iris, JobName.from_wire(group.job.iris_job_id)
    )  # killed behind Fray's back
    start = time.monotonic()
    with pytest.raises(ActorError, match="stopped"):
        group.wait_ready(timeout=TIMEOUT)
    assert time.monotonic() - start < 30
    assert group.statuses() == [JobStatus.FAILED]  # it died: the group did not stop it


# -- hosted actors ----------------------------------------------------------------------------


def test_host_actor_outside_a_job_is_a_clear_error(iris_client: IrisClient) -> None:
    with pytest.raises(InvalidRequestError, match="inside an Iris job.*Submit the code") as err:
        iris_client.host_actor(ep.Counter, name="outside")
    assert err.value.field == "host_actor"


def test_hosted_actor_is_an_endpoint_of_its_job_while_it_serves(iris_client: IrisClient) -> None:
    name = f"hosted-{os.urandom(3).hex()}"
    hosted = host_in_job(iris_client, ep.Ender, name=name, timeout=TIMEOUT)
    try:
        job = iris_client.get_job(f"{name}-host")
        endpoint = f"{job.iris_job_id}/{name}-0"
        wire = JobName.from_wire(job.iris_job_id)
        found = line.endpoint(iris_client.iris, wire, endpoint)
        host, port = hosted.handle.address
        assert [registration.url for registration in found] == [f"{host}:{port}"]
        assert host == "127.0.0.1"  # the controller is on this machine
        assert hosted.handle.end() == "ending"  # its shutdown_event: it stops serving
        _eventually(
            lambda: not line.endpoint(iris_client.iris, wire, endpoint),
            "the endpoint to be unregistered once the actor stopped serving",
        )
        assert job.status() is JobStatus.RUNNING  # the job did not remove it: it still runs
    finally:
        hosted.shutdown()
    assert job.status() is JobStatus.SUCCEEDED


# -- actors whose process is killed -------------------------------------------------------------


class DiesOnce:
    """An actor whose process is killed (SIGKILL, as by the out-of-memory killer) in the
    first ``work`` call any instance runs; a marker file records that it happened."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def work(self, value: Any) -> tuple[Any, int]:
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return value, os.getpid()
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable: the process was killed")

    def pid(self) -> int:
        return os.getpid()


def _dies_once(
    iris_client: IrisClient, tmp_path: Path, count: int, config: ActorConfig
) -> tuple[Any, list[Any], Path]:
    marker = tmp_path / "killed.pid"
    group = iris_client.create_actor_group(
        DiesOnce, str(marker), name=f"dies-{os.urandom(3).hex()}", count=count, actor_config=config
    )
    return group, group.wait_ready(timeout=TIMEOUT), marker


def test_killed_actor_restarts_and_the_call_is_retried(
    iris_client: IrisClient, tmp_path: Path
) -> None:
    group, (first, second), marker = _dies_once(
        iris_client, tmp_path, 2, ActorConfig(max_task_retries=1)
    )
    pids = [first.pid(), second.pid()]
    value, pid = first.work("kept")  # killed mid-call; sent again to the restarted actor
    assert value == "kept"
    assert marker.read_text() == str(pids[0])  # the first process really was killed
    assert pid != pids[0]
    assert second.pid() == pids[1]  # the other actor was left alone
    _eventually(
        lambda: group.statuses() == [JobStatus.RUNNING, JobStatus.RUNNING],
        "both actors RUNNING again",
    )


def test_killed_actor_without_task_retries_fails_the_call_and_restarts(
    iris_client: IrisClient, tmp_path: Path
) -> None:
    _, (actor,), _ = _dies_once(iris_client, tmp_path, 1, ActorConfig())
    before = actor.pid()
    with pytest.raises(ActorError):
        actor.work("lost")  # may have run: not sent twice
    assert actor.work("next")[1] != before  # a fresh process serves the next call


def test_killed_actor_with_no_restarts_left_is_failed(
    iris_client: IrisClient, tmp_path: Path
) -> None:
    group, (actor, other), _ = _dies_once(
        iris_client, tmp_path, 2, ActorConfig(max_restarts=0, max_task_retries=3)
    )
    start = time.monotonic()
    with pytest.raises(ActorDiedError):  # known to have ended: not waited for
        actor.work("lost")
    assert time.monotonic() - start < 30
    _eventually(
        lambda: group.statuses() == [JobStatus.FAILED, JobStatus.RUNNING],
        "the killed actor FAILED, the other one RUNNING (as on Ray: its job goes on)",
    )
    assert other.work("still here")[0] == "still here"
    assert not group.is_done()


def test_a_new_group_does_not_read_the_end_of_an_earlier_group_of_its_name(
    iris_client: IrisClient,
) -> None:
    # The first group's actor ends itself, and its end is stored; a group submitted later
    # under the same name has records of its own, and its actor serves.
    name = f"again-{os.urandom(3).hex()}"
    first = iris_client.create_actor_group(ep.Ender, name=name, count=1)
    (actor,) = first.wait_ready(timeout=TIMEOUT)
    assert actor.end() == "ending"
    _eventually(lambda: first.statuses() == [JobStatus.SUCCEEDED], "the first actor's end")
    assert first.job.wait(timeout=TIMEOUT) is JobStatus.SUCCEEDED
    second = iris_client.create_actor_group(ep.Ender, name=name, count=1)
    (again,) = second.wait_ready(timeout=TIMEOUT)
    assert again.incr() == 1
    assert second.statuses() == [JobStatus.RUNNING]
    second.shutdown()


def test_done_callbacks_of_many_jobs_share_one_watching_thread(iris_client: IrisClient) -> None:
    # Iris does not notify: one thread per connection asks about every job that has
    # callbacks, in one call per round, instead of a thread per job.
    tag = os.urandom(3).hex()
    jobs = [
        iris_client.submit(
            JobRequest(name=f"cb-{tag}-{i}", entrypoint=Entrypoint.from_callable(ep.add, [i, i]))
        )
        for i in range(4)
    ]
    before = {t.ident for t in threading.enumerate()}
    called: queue.SimpleQueue[tuple[str, JobStatus]] = queue.SimpleQueue()
    for job in jobs:
        job.add_done_callback(lambda handle: called.put((handle.job_id, handle.status())))
    # Only Fray's threads count: the in-process cluster's workers start their own (one per
    # task's log stream) whenever a task starts.
    started = [t for t in threading.enumerate() if t.ident not in before]
    assert len([t for t in started if t.name.startswith("fray")]) <= 1, started
    seen = sorted(called.get(timeout=TIMEOUT) for _ in jobs)
    assert seen == sorted((job.job_id, JobStatus.SUCCEEDED) for job in jobs)
    assert [job.result() for job in jobs] == [0, 2, 4, 6]


def test_spec_with_address_builds_an_iris_client(iris_cluster: Any) -> None:
    client = fray.backend.client_from_spec(f"iris://{iris_cluster.address}")
    try:
        assert isinstance(client, IrisClient)
        job = client.submit(
            JobRequest(
                name=f"spec-{os.urandom(3).hex()}",
                entrypoint=Entrypoint.from_callable(ep.add, [4, 4]),
            )
        )
        assert job.wait(timeout=TIMEOUT) is JobStatus.SUCCEEDED
    finally:
        client.shutdown()


def test_a_wrapped_iris_client_of_a_local_cluster_returns_values(
    iris_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Code that made its own Iris client (FrayIrisClient.from_iris_client, iris_ctx_scope)
    # gets the default results location of a controller on this machine, as IrisClient(url).
    from iris.client import IrisClient as RawIrisClient

    from fray_iris import FrayIrisClient
    from fray_iris._task import default_local_results_url

    monkeypatch.delenv("FRAY_IRIS_RESULTS_URL", raising=False)
    raw = RawIrisClient.remote(iris_cluster.url)
    client = FrayIrisClient.from_iris_client(raw)
    try:
        assert client.address == iris_cluster.url
        assert client.results_url == default_local_results_url()
        request = JobRequest(
            name=f"wrapped-{os.urandom(3).hex()}",
            entrypoint=Entrypoint.from_callable(ep.add, [2, 5]),
        )
        assert client.submit(request).result(timeout=TIMEOUT) == 7
    finally:
        client.shutdown()
        raw.shutdown()


def test_spec_rejects_unknown_parameters(iris_cluster: Any) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        fray.backend.client_from_spec(f"iris://{iris_cluster.address}?region=us")
    assert "region" in str(caught.value)


def test_spec_without_address_outside_a_job_is_a_clear_error() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        fray.backend.client_from_spec("iris")
    assert "host:port" in str(caught.value)


def test_get_job_of_unknown_id(iris_client: IrisClient) -> None:
    with pytest.raises(JobNotFoundError):
        iris_client.get_job("never-submitted-123")


def test_list_jobs_carries_iris_error_text(iris_client: IrisClient) -> None:
    job = iris_client.submit(
        JobRequest(
            name=f"err-{os.urandom(3).hex()}",
            entrypoint=Entrypoint.from_callable(ep.raise_value_error, ["kept text"]),
        )
    )
    assert job.wait(timeout=TIMEOUT, raise_on_failure=False) is JobStatus.FAILED
    [listed] = [info for info in iris_client.list_jobs() if info.job_id == job.job_id]
    assert listed.status is JobStatus.FAILED
    assert listed.error is not None and "kept text" in listed.error


def test_finished_jobs_age_out_of_the_client(
    iris_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A driver that runs jobs for days must not keep every record it ever made: the client
    # keeps its unfinished jobs and the last FRAY_JOB_HISTORY finished ones. An older job is
    # still found on the cluster, by id, without the request it was submitted with.
    monkeypatch.setenv("FRAY_JOB_HISTORY", "1")
    client = IrisClient(iris_cluster.url, results_url=iris_cluster.results_url)
    tag = os.urandom(3).hex()

    def submit(i: int) -> Any:
        return client.submit(
            JobRequest(name=f"age-{tag}-{i}", entrypoint=Entrypoint.from_callable(ep.echo, [i]))
        )

    try:
        jobs = []
        for i in range(3):  # one after another, so they finish in this order
            jobs.append(submit(i))
            assert jobs[-1].result(timeout=TIMEOUT) == i
        assert [info.job_id for info in client.list_jobs()][-3:] == [j.job_id for j in jobs]
        assert client.get_job(jobs[2].job_id) == jobs[2]  # the last to finish is kept
        again = client.get_job(jobs[0].job_id)
        assert again != jobs[0]  # aged out: found on the cluster
        assert again.status() is JobStatus.SUCCEEDED and again.result() == 0
        assert again.info().name == f"age-{tag}-0"
        assert again.info().attempts == 1
        assert client.get_job(jobs[0].job_id) == again
    finally:
        client.shutdown()


def test_priority_timeout_and_failure_budget_reach_the_controller(
    iris_client: IrisClient,
) -> None:
    from iris.rpc import controller_pb2

    job = iris_client.submit(
        JobRequest(
            name=f"mapped-{os.urandom(3).hex()}",
            entrypoint=Entrypoint.from_callable(ep.add, [1, 2]),
            replicas=2,
            max_retries_failure=3,
            priority=3,
            timeout=600,
        )
    )
    assert job.result(timeout=TIMEOUT) == [3, 3]
    from iris.rpc.controller_connect import ControllerServiceClientSync

    stub = ControllerServiceClientSync(address=iris_client.address)
    asked = stub.get_job_status(
        controller_pb2.Controller.GetJobStatusRequest(job_id=job.iris_job_id)
    ).request
    stub.close()
    assert asked.priority_band == 3  # batch
    assert asked.timeout.milliseconds == 600_000
    assert asked.max_retries_failure == 3
    if line.FAILURE_BUDGET:  # 0.2.227: each of the 2 replicas keeps its 3 retries
        assert asked.max_task_failures == 6


def test_log_tail_is_read_from_the_end(iris_client: IrisClient) -> None:
    # More lines than one of Iris's log pages (1,000): every one comes back, in order.
    lines = [f"line {i}" for i in range(2_500)]
    job = iris_client.submit(
        JobRequest(
            name=f"tail-{os.urandom(3).hex()}",
            entrypoint=Entrypoint.from_callable(ep.print_lines, lines),
        )
    )
    job.wait(timeout=TIMEOUT)
    assert list(job.logs(max_lines=5)) == lines[-5:]
    assert list(job.logs(max_lines=1_200)) == lines[-1_200:]
    assert list(job.logs()) == lines


def test_log_tail_of_a_parent_skips_its_childrens_lines(iris_client: IrisClient) -> None:
    job = iris_client.submit(
        JobRequest(
            name=f"tailp-{os.urandom(3).hex()}",
            entrypoint=Entrypoint.from_callable(
                ep.print_and_spawn, ["parent says hi", "kid", "kid says hi"]
            ),
        )
    )
    job.wait(timeout=TIMEOUT)
    [own] = [line for line in job.logs() if "says hi" in line]
    assert own == "parent says hi"
    assert list(job.logs(max_lines=1)) == list(job.logs())[-1:]
    tail = list(job.logs(max_lines=2, include_children=True))
    assert len(tail) == 2


def test_discover_new_stops_at_its_target_and_wait_streams_logs(
    iris_client: IrisClient, capfd: pytest.CaptureFixture[str]
) -> None:
    # marin-fray 0.2.227's call shapes: IrisActorGroup.discover_new(target=N) returns
    # handles until N have been returned in all; IrisJobHandle.wait(stream_logs=True)
    # prints the job's lines while it waits.
    group = iris_client.create_actor_group(ep.Counter, name=f"disc-{os.urandom(3).hex()}", count=2)
    try:
        _eventually(lambda: group.ready_count == 2, "both actors to be ready")
        first = group.discover_new(target=1)
        assert len(first) == 1
        assert group.discover_new(target=1) == []
        rest = group.discover_new()
        assert len(rest) == 1 and rest[0] != first[0]
    finally:
        group.shutdown()
    lines = [f"streamed {i}" for i in range(3)]
    job = iris_client.submit(
        JobRequest(
            name=f"stream-{os.urandom(3).hex()}",
            entrypoint=Entrypoint.from_callable(ep.print_lines, lines),
        )
    )
    assert job.wait(timeout=TIMEOUT, stream_logs=True) is JobStatus.SUCCEEDED
    # Printed before wait returns, all of them: Iris ends the job before its worker has sent
    # the last lines, which may come in more than one batch.
    assert set(lines) <= set(capfd.readouterr().out.splitlines())


@contextlib.contextmanager
def late_lines(monkeypatch: pytest.MonkeyPatch, name: str, delay: float) -> Iterator[None]:
    """Iris's workers (threads of this process) send the lines of the job ``name`` ``delay``
    seconds late, in order: as on a busy machine, they reach Iris well after the job's end."""
    from finelog.client import LogClient

    send = LogClient.write_batch
    held: queue.Queue[tuple[float, Any, str, list[Any]] | None] = queue.Queue()

    def write_batch(self: Any, key: str, messages: Any) -> None:
        if f"/{name}/" not in key:
            return send(self, key, messages)
        held.put((time.monotonic() + delay, self, key, list(messages)))

    def sender() -> None:
        while (item := held.get()) is not None:
            at, client, key, messages = item
            time.sleep(max(at - time.monotonic(), 0.0))  # the delay this test injects
            send(client, key, messages)

    thread = threading.Thread(target=sender, daemon=True)
    thread.start()
    monkeypatch.setattr(LogClient, "write_batch", write_batch)
    try:
        yield
    finally:
        monkeypatch.setattr(LogClient, "write_batch", send)
        held.put(None)
        thread.join()


def print_on_both_streams(lines: list[str]) -> None:
    """Prints each line to stdout and to stderr, right before the task exits."""
    for text in lines:
        print(text)
        print(f"{text} on stderr", file=sys.stderr)


def test_wait_streams_every_line_when_iris_sends_them_after_the_end(
    iris_client: IrisClient, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each of Fray's tasks ends its output with a marker on both streams: an ended job's lines
    # are whole once every task showed it, however late Iris gets them (here twice the grace
    # a task without a marker is given), and the marker is never shown.
    name = f"late-{os.urandom(3).hex()}"
    lines = [f"late {i}" for i in range(3)]
    expected = sorted([*lines, *(f"{text} on stderr" for text in lines)])
    with late_lines(monkeypatch, name, delay=2 * LOGS_GRACE_S):
        job = iris_client.submit(
            JobRequest(
                name=name, entrypoint=Entrypoint.from_callable(print_on_both_streams, [lines])
            )
        )
        assert job.wait(timeout=TIMEOUT, stream_logs=True) is JobStatus.SUCCEEDED
        printed = capfd.readouterr().out.splitlines()
    assert sorted(text for text in printed if text.startswith("late ")) == expected
    assert not any(END_OF_OUTPUT in text for text in printed)
    assert sorted(job.logs()) == expected


def test_a_failed_jobs_lines_end_with_its_traceback_and_no_marker(
    iris_client: IrisClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"latefail-{os.urandom(3).hex()}"
    with late_lines(monkeypatch, name, delay=2 * LOGS_GRACE_S):
        job = iris_client.submit(
            JobRequest(
                name=name,
                entrypoint=Entrypoint.from_callable(ep.print_then_fail, ["before", "it broke"]),
            )
        )
        assert job.wait(timeout=TIMEOUT, raise_on_failure=False) is JobStatus.FAILED
        lines = list(job.logs())
    assert lines[0] == "before"
    assert lines[-1].endswith("ConformanceError: it broke")  # the traceback's last line
    assert not any(END_OF_OUTPUT in text for text in lines)
    error = line.tasks(iris_client.iris, JobName.from_wire(job.iris_job_id))[0].error
    assert error.endswith(". stderr: ConformanceError: it broke")  # Iris's, without the marker


def test_lines_without_an_end_marker_are_waited_for_briefly_and_said_so(
    iris_client: IrisClient, caplog: pytest.LogCaptureFixture
) -> None:
    # A command job writes no marker: its lines are read LOGS_GRACE_S after its end, and a
    # warning names the job, once.
    job = iris_client.submit(
        JobRequest(
            name=f"nomark-{os.urandom(3).hex()}",
            entrypoint=Entrypoint.from_command(sys.executable, "-c", "print('from a command')"),
        )
    )
    assert job.wait(timeout=TIMEOUT) is JobStatus.SUCCEEDED
    with caplog.at_level(logging.WARNING, logger="fray.iris"):
        assert list(job.logs()) == ["from a command"]
        assert list(job.logs()) == ["from a command"]
    warned = [r.getMessage() for r in caplog.records if job.job_id in r.getMessage()]
    assert len(warned) == 1 and "no end-of-output marker from task(s) 0" in warned[0]
