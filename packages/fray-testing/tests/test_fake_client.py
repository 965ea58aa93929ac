"""FakeClient's own features: recording, scripting, actors, spec, fixtures."""

from __future__ import annotations

import time
from typing import Any

import pytest

import fray
import fray.backend
from fray import (
    ActorGroup,
    Entrypoint,
    JobHandle,
    JobRequest,
    JobStatus,
    ResourceConfig,
    current_client,
    wait_all,
)
from fray.errors import (
    ActorDiedError,
    FrayError,
    InvalidRequestError,
    JobFailedError,
    JobTimeoutError,
)
from fray_testing import (
    ActorCall,
    ActorCreation,
    Delay,
    Fail,
    FakeClient,
    Hang,
    JobSubmission,
    Preempt,
    RealBackendError,
    Run,
    SimulatedPreemption,
    Succeed,
    forbid_real_backends,
)

pytest_plugins = ["pytester"]

calls: list[Any] = []


def record(value: Any) -> Any:
    calls.append(value)
    return value


def preempt_once_then(value: Any) -> Any:
    calls.append(value)
    if len(calls) == 1:
        raise SimulatedPreemption("node lost")
    return value


def submit_child(name: str) -> str:
    return current_client().submit(job(name, record, "child")).job_id


def job(name: str, fn: Any = record, *args: Any, **fields: Any) -> JobRequest:
    return JobRequest(name=name, entrypoint=Entrypoint.from_callable(fn, args or ("x",)), **fields)


class Worker:
    def __init__(self, base: int) -> None:
        self.base = base

    def add(self, n: int) -> int:
        return self.base + n


@pytest.fixture(autouse=True)
def _clean_slate(monkeypatch: pytest.MonkeyPatch) -> None:
    """No backend chosen by the environment, no enclosing job, no calls recorded."""
    for name in ("FRAY_CLIENT_SPEC", "FRAY_JOB_ID", "RAY_ADDRESS", "IRIS_CONTROLLER_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    calls.clear()


@pytest.fixture
def client() -> Any:
    with FakeClient() as client:
        yield client


# -- recording ---------------------------------------------------------------------------------


def test_requests_are_recorded_in_order(client: FakeClient) -> None:
    first = job("prep")
    second = job("train", resources=ResourceConfig.with_tpu("v4-8"))
    client.submit(first)
    client.submit(second)
    client.submit(job("train"))
    assert client.requests[:2] == [first, second]
    assert [r.name for r in client.requests_named("train")] == ["train", "train"]
    assert client.requests_named("missing") == []


def test_submissions_carry_job_ids_and_parents(client: FakeClient) -> None:
    parent = client.submit(job("parent", submit_child, "kid"))
    child_id = parent.result()
    assert child_id == f"{parent.job_id}/kid-2"
    assert client.submissions == [
        JobSubmission(client.requests[0], parent.job_id, None),
        JobSubmission(client.requests[1], child_id, parent.job_id),
    ]
    assert client.submissions[1].name == "kid"


def test_job_ids_are_name_and_sequence(client: FakeClient) -> None:
    assert [client.submit(job(n)).job_id for n in ("a", "b", "a")] == ["a-1", "b-2", "a-3"]


def test_events_interleave_jobs_and_actors(client: FakeClient) -> None:
    client.submit(job("before"))
    worker = client.create_actor(Worker, 1, name="worker")
    worker.add(2)
    client.submit(job("after"))
    kinds = [type(event).__name__ for event in client.events]
    assert kinds == ["JobSubmission", "ActorCreation", "ActorCall", "JobSubmission"]


def test_actor_creations_and_calls_are_recorded(client: FakeClient) -> None:
    config = fray.ActorConfig(max_concurrency=2)
    worker = client.create_actor(Worker, 10, name="worker", actor_config=config)
    group = client.create_actor_group(Worker, base=0, name="pool", count=2)
    assert worker.add(5) == 15
    assert worker.add.remote(n=1).result() == 11
    first, _second = group.wait_ready()
    first.add(3)
    assert client.actor_creations == [
        ActorCreation("worker", Worker, (10,), {}, 1, None, config, False),
        ActorCreation("pool", Worker, (), {"base": 0}, 2, None, None, True),
    ]
    assert client.actor_calls == [
        ActorCall("worker-0", "add", (5,), {}),
        ActorCall("worker-0", "add", (), {"n": 1}),
        ActorCall("pool-0", "add", (3,), {}),
    ]
    assert client.calls_to("pool") == [ActorCall("pool-0", "add", (3,), {})]
    assert client.calls_to("worker-0", "missing") == []


# -- default outcomes --------------------------------------------------------------------------


def test_callable_runs_in_process_inside_submit(client: FakeClient) -> None:
    handle = client.submit(job("run", record, 42))
    assert calls == [42]
    assert handle.status() is JobStatus.SUCCEEDED
    assert handle.result() == 42


def test_run_callables_false_records_without_running() -> None:
    with FakeClient(run_callables=False) as client:
        handle = client.submit(job("skip", record, 1))
        assert handle.result() is None
        client.script("forced", Run())
        assert client.submit(job("forced", record, 2)).result() == 2
    assert calls == [2]


def test_command_jobs_succeed_without_running(client: FakeClient) -> None:
    request = JobRequest(name="cmd", entrypoint=Entrypoint.from_command("rm", "-rf", "/nowhere"))
    handle = client.submit(request)
    assert handle.wait() is JobStatus.SUCCEEDED
    assert list(handle.logs()) == []
    with pytest.raises(JobFailedError, match="command job has no return value"):
        handle.result()


# -- scripted outcomes -------------------------------------------------------------------------


def test_succeed_returns_value_without_running(client: FakeClient) -> None:
    client.script("train", Succeed({"loss": 0.1}, logs=("step 1", "step 2")))
    handle = client.submit(job("train"))
    assert handle.result() == {"loss": 0.1}
    assert list(handle.logs()) == ["step 1", "step 2"]
    assert calls == []


def test_fail_chains_the_scripted_exception(client: FakeClient) -> None:
    error = ValueError("out of memory")
    client.script("train", Fail(error))
    handle = client.submit(job("train"))
    with pytest.raises(JobFailedError, match="ValueError: out of memory") as caught:
        handle.wait()
    assert caught.value.__cause__ is error
    assert handle.info().error == "ValueError: out of memory"
    assert calls == []


def test_fail_accepts_a_class_or_a_message(client: FakeClient) -> None:
    client.script("by-class", Fail(KeyError))
    client.script("by-text", Fail("disk full"))
    by_class = client.submit(job("by-class"))
    by_text = client.submit(job("by-text"))
    with pytest.raises(JobFailedError) as caught:
        by_class.wait()
    assert type(caught.value.__cause__) is KeyError
    with pytest.raises(JobFailedError, match="RuntimeError: disk full"):
        by_text.wait()


def test_failures_use_the_failure_budget(client: FakeClient) -> None:
    client.script("flaky", Fail(OSError("io"), times=2, then=Succeed("ok")))
    handle = client.submit(job("flaky", max_retries_failure=2))
    assert handle.result() == "ok"
    info = handle.info()
    assert (info.attempts, info.failures, info.preemptions) == (3, 2, 0)
    retry_lines = [line for line in handle.logs() if line.startswith("[fray]")]
    assert len(retry_lines) == 2


def test_failure_budget_exhausted(client: FakeClient) -> None:
    client.script("flaky", Fail(OSError("io"), times=2, then=Succeed("ok")))
    handle = client.submit(job("flaky", max_retries_failure=1))
    assert handle.wait(raise_on_failure=False) is JobStatus.FAILED
    assert (handle.info().attempts, handle.info().failures) == (2, 2)


def test_preempted_then_runs_the_callable(client: FakeClient) -> None:
    client.script("train", Preempt(2))
    handle = client.submit(job("train", record, 7))
    assert handle.result() == 7
    assert calls == [7]
    info = handle.info()
    assert (info.attempts, info.preemptions, info.failures) == (3, 2, 0)


def test_preemption_budget_exhausted(client: FakeClient) -> None:
    client.script("train", Preempt(3))
    handle = client.submit(job("train", max_retries_preemption=2))
    with pytest.raises(JobFailedError, match="preempted 3 times") as caught:
        handle.wait()
    assert caught.value.__cause__ is None
    assert handle.info().attempts == 3
    assert calls == []


def test_preempt_forever_uses_up_the_whole_budget(client: FakeClient) -> None:
    client.script("train", Preempt(None))
    handle = client.submit(job("train", max_retries_preemption=4))
    assert handle.wait(raise_on_failure=False) is JobStatus.FAILED
    assert (handle.info().attempts, handle.info().preemptions) == (5, 5)


def test_simulated_preemption_from_the_callable(client: FakeClient) -> None:
    handle = client.submit(job("train", preempt_once_then, "done"))
    assert handle.result() == "done"
    assert (handle.info().attempts, handle.info().preemptions) == (2, 1)


def test_hang_runs_until_terminated(client: FakeClient) -> None:
    client.script("serve", Hang())
    handle = client.submit(job("serve"))
    assert handle.status() is JobStatus.RUNNING
    assert handle.info().attempts == 1
    with pytest.raises(JobTimeoutError):
        handle.wait(timeout=0.01)
    handle.terminate()
    assert handle.wait() is JobStatus.STOPPED
    assert calls == []


def test_hang_pending_never_starts(client: FakeClient) -> None:
    client.script("queued", Hang(pending=True))
    handle = client.submit(job("queued"))
    assert handle.status() is JobStatus.PENDING
    info = handle.info()
    assert (info.attempts, info.started_at) == (0, None)
    with pytest.raises(JobTimeoutError, match=r"still pending after 0s: FakeClient: scripted"):
        handle.wait(timeout=0)  # the error says what the job waits for
    handle.terminate()
    assert handle.status() is JobStatus.STOPPED


def test_delay_finishes_when_waited_on(client: FakeClient) -> None:
    client.script("slow", Delay(0.05, then=Succeed(3)))
    start = time.monotonic()
    handle = client.submit(job("slow"))
    assert handle.status() is JobStatus.RUNNING
    assert handle.result(timeout=5) == 3
    assert time.monotonic() - start >= 0.05
    assert handle.info().attempts == 1


def test_delay_times_out_a_shorter_wait(client: FakeClient) -> None:
    client.script("slow", Delay(30))
    handle = client.submit(job("slow"))
    with pytest.raises(JobTimeoutError):
        handle.wait(timeout=0.01)
    assert calls == []
    handle.terminate()


def test_delay_then_runs_the_callable_when_polled(client: FakeClient) -> None:
    client.script("slow", Delay(0.02))
    handle = client.submit(job("slow", record, 5))
    deadline = time.monotonic() + 5
    while handle.status() is not JobStatus.SUCCEEDED and time.monotonic() < deadline:
        time.sleep(0.005)  # polling interval of a bounded wait: the timer moves it on
    assert calls == [5]


def test_wait_all_on_a_delayed_job_needs_no_polling(client: FakeClient) -> None:
    client.script("slow", Delay(0.05, then=Fail(ValueError("late"))))
    handle = client.submit(job("slow"))
    with pytest.raises(JobFailedError, match="late"):
        wait_all([handle], timeout=5)


def test_successive_submissions_take_scripts_in_turn(client: FakeClient) -> None:
    client.script("train", Fail("first try"), Succeed(1), Succeed(2))
    results = [client.submit(job("train")).wait(raise_on_failure=False) for _ in range(4)]
    assert results == [JobStatus.FAILED] + [JobStatus.SUCCEEDED] * 3
    assert client.submit(job("train")).result() == 2


def test_script_by_callable(client: FakeClient) -> None:
    client.script(record, Succeed("scripted"))
    assert client.submit(job("any-name", record, 1)).result() == "scripted"
    assert calls == []


def test_handler_comes_first_and_may_defer() -> None:
    def handler(request: JobRequest) -> Fail | None:
        return Fail("from handler") if request.name.startswith("bad") else None

    with FakeClient(handler, outcomes={"bad-eval": Succeed(), "ok": Succeed(9)}) as client:
        assert client.submit(job("bad-eval")).wait(raise_on_failure=False) is JobStatus.FAILED
        assert client.submit(job("ok")).result() == 9


def test_script_rejects_non_outcomes(client: FakeClient) -> None:
    with pytest.raises(InvalidRequestError):
        client.script("train", "fail")  # pyright: ignore[reportArgumentType]
    with pytest.raises(InvalidRequestError):
        client.script("train")
    with pytest.raises(InvalidRequestError, match=r"Preempt\.times"):
        Preempt(0)
    with pytest.raises(InvalidRequestError, match=r"Delay\.seconds"):
        Delay(-1)


# -- handles, logs, nesting --------------------------------------------------------------------


def test_done_callbacks_run_on_finish(client: FakeClient) -> None:
    client.script("serve", Hang())
    handle = client.submit(job("serve"))
    seen: list[JobHandle] = []
    handle.add_done_callback(seen.append)
    assert seen == []
    handle.terminate()
    assert seen == [handle]
    handle.add_done_callback(seen.append)
    assert seen == [handle, handle]


def test_printed_lines_become_logs(client: FakeClient) -> None:
    handle = client.submit(job("talk", print, "hello\nworld"))
    assert list(handle.logs()) == ["hello", "world"]


def test_children_are_stopped_with_their_parent(client: FakeClient) -> None:
    client.script("child", Hang())
    parent = client.submit(job("parent", submit_child, "child"))
    child = client.get_job(parent.result())
    assert child.status() is JobStatus.STOPPED


def test_handles_satisfy_the_protocols(client: FakeClient) -> None:
    assert isinstance(client, fray.Client)
    assert isinstance(client.submit(job("p")), JobHandle)
    group = client.create_actor_group(Worker, 1, name="g", count=1)
    assert isinstance(group, ActorGroup)
    assert isinstance(group.wait_ready()[0], fray.ActorHandle)


def test_shutdown_stops_jobs_and_actors() -> None:
    client = FakeClient()
    client.script("serve", Hang())
    handle = client.submit(job("serve"))
    worker = client.create_actor(Worker, 1, name="w")
    client.shutdown()
    assert handle.status() is JobStatus.STOPPED
    with pytest.raises(ActorDiedError):
        worker.add(1)
    with pytest.raises(FrayError, match="shut down"):
        client.submit(job("late"))


# -- scripted actor failures -------------------------------------------------------------------


def test_scripted_actor_death_kills_the_actor(client: FakeClient) -> None:
    group = client.create_actor_group(Worker, 0, name="pool", count=2)
    first, second = group.wait_ready()
    client.fail_actor_call("pool-0", "add")
    with pytest.raises(ActorDiedError):
        first.add(1)
    with pytest.raises(ActorDiedError):
        first.add(1)
    assert second.add(1) == 1
    assert group.statuses() == [JobStatus.FAILED, JobStatus.RUNNING]
    assert group.ready_count == 1


def test_scripted_call_error_leaves_the_actor_alive(client: FakeClient) -> None:
    worker = client.create_actor(Worker, 0, name="w")
    client.fail_actor_call("w", error=TimeoutError("slow disk"), times=1)
    future = worker.add.remote(1)
    with pytest.raises(TimeoutError, match="slow disk"):
        future.result()
    assert worker.add(1) == 1


def test_kill_actor(client: FakeClient) -> None:
    group = client.create_actor_group(Worker, 0, name="pool", count=3)
    handles = group.wait_ready()
    client.kill_actor("pool-1")
    with pytest.raises(ActorDiedError):
        handles[1].add(1)
    assert group.wait_ready(2) == [handles[0], handles[2]]
    client.kill_actor("pool")
    assert group.is_done()
    with pytest.raises(InvalidRequestError):
        client.kill_actor("nobody")


# -- specs and fixtures ------------------------------------------------------------------------


def test_fake_spec_builds_a_fake_client(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(fray.backend.client_from_spec("fake"), FakeClient)
    with pytest.raises(InvalidRequestError):
        fray.backend.client_from_spec("fake?threads=2")
    monkeypatch.setenv("FRAY_CLIENT_SPEC", "fake")
    with forbid_real_backends():
        assert isinstance(current_client(), FakeClient)


def test_fake_client_fixture_is_the_current_client(fake_client: FakeClient) -> None:
    assert current_client() is fake_client
    fake_client.submit(job("via-current"))
    assert fake_client.requests_named("via-current")


def test_no_real_backends_fixture(no_real_backends: None) -> None:
    del no_real_backends
    with pytest.raises(RealBackendError, match="real 'local' backend"):
        current_client()
    for spec in ("local", "ray", "iris://127.0.0.1:1"):
        with pytest.raises(RealBackendError):
            fray.backend.client_from_spec(spec)
    assert isinstance(fray.backend.client_from_spec("fake"), FakeClient)


def test_forbid_real_backends_restores_the_registry() -> None:
    with forbid_real_backends(), pytest.raises(RealBackendError):
        fray.backend.client_from_spec("local")
    local = fray.backend.client_from_spec("local")
    try:
        assert isinstance(local, fray.LocalClient)
    finally:
        local.shutdown()


def test_fixtures_install_and_remove_the_client(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import fray, pytest
        from fray_testing import FakeClient, RealBackendError

        seen = []

        def test_uses_fake(fake_client):
            seen.append(fake_client)
            assert fray.current_client() is fake_client

        def test_fake_is_gone_afterwards(no_real_backends):
            assert seen and seen[0].is_shutdown
            with pytest.raises(RealBackendError):
                fray.current_client()
        """
    )
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)


# -- history -------------------------------------------------------------------------------------


def test_keeps_unfinished_jobs_and_the_last_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FRAY_JOB_HISTORY", "1")
    with FakeClient(outcomes={"held": Hang()}) as client:
        held = client.submit(job("held"))
        done = [client.submit(job(f"done{i}")) for i in range(3)]
        assert [info.job_id for info in client.list_jobs()] == [held.job_id, done[2].job_id]
        with pytest.raises(fray.JobNotFoundError, match="FRAY_JOB_HISTORY"):
            client.get_job(done[0].job_id)
        assert done[0].result() == "x"  # the handle keeps its job
        assert len(client.submissions) == 4  # the record of what was asked stays whole
        held.terminate()
        assert [info.job_id for info in client.list_jobs()] == [held.job_id]


class _Tripler:
    def __call__(self, x: int) -> int:
        return 3 * x


def test_a_fake_actor_is_called_through_its_dunder_call() -> None:
    with FakeClient() as client:
        handle = client.create_actor(_Tripler, name="tripler")
        assert handle(2) == 6
        futures = [handle.__call__.remote(i) for i in range(3)]
        assert fray.wait_all(futures, timeout=5) == [0, 3, 6]
        assert [c.method for c in client.calls_to("tripler")] == ["__call__"] * 4


# -- deadlines: JobRequest.timeout and scheduling_timeout, as the real backends enforce them --


def _timed(name: str, **fields: Any) -> JobRequest:
    return JobRequest(name=name, entrypoint=Entrypoint.from_callable(_noop), **fields)


def _noop() -> None:
    return None


def _slow(seconds: float) -> str:
    time.sleep(seconds)  # the job's own work: it runs past its timeout
    return "finished late"


@pytest.mark.parametrize("outcome", [Hang(), Delay(30.0, then=Succeed())])
def test_an_attempt_past_its_timeout_fails_without_retry(outcome: Any) -> None:
    with FakeClient(outcomes={"slow": outcome}) as client:
        job = client.submit(_timed("slow", timeout=0.2, max_retries_failure=2))
        with pytest.raises(JobFailedError, match=r"attempt 1 ran longer than timeout=0.2s") as err:
            job.wait(timeout=30)
        assert isinstance(err.value.__cause__, TimeoutError)
        info = job.info()
        assert (info.attempts, info.failures, info.preemptions) == (1, 1, 0)


def test_a_callable_that_ran_past_its_timeout_times_out_instead_of_succeeding() -> None:
    request = JobRequest(
        name="late", entrypoint=Entrypoint.from_callable(_slow, (0.3,)), timeout=0.05
    )
    with FakeClient() as client:
        job = client.submit(request)
        with pytest.raises(JobFailedError, match="ran longer than timeout=0.05s"):
            job.result(timeout=30)


def test_a_job_within_its_timeout_is_untouched() -> None:
    with FakeClient(outcomes={"quick": Delay(0.01, then=Succeed("v"))}) as client:
        assert client.submit(_timed("quick", timeout=30)).result(timeout=30) == "v"


def test_a_job_never_placed_fails_at_its_scheduling_timeout_saying_what_it_asked() -> None:
    with FakeClient(outcomes={"stuck": Hang(pending=True)}) as client:
        job = client.submit(
            _timed("stuck", scheduling_timeout=0.2, resources=ResourceConfig(cpu=3, ram="5g"))
        )
        with pytest.raises(JobFailedError, match="not placed within scheduling_timeout=0.2s"):
            job.wait(timeout=30)
        assert "cpu=3, ram=5g" in (job.info().error or "")
        assert job.info().attempts == 0


def test_wait_all_wakes_for_a_fake_timeout() -> None:
    with FakeClient(outcomes={"slow": Hang()}) as client:
        jobs = [client.submit(_timed("slow", timeout=0.1)) for _ in range(3)]
        statuses = wait_all(jobs, timeout=30, raise_on_failure=False)
        assert statuses == [JobStatus.FAILED] * 3
