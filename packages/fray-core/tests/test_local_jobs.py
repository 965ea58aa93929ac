"""LocalClient jobs: callables, commands, failures, terminate, nesting, logs, results, retries."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
from typing import Any

import psutil
import pytest

import fray
from conftest import pid_alive, wait_dead
from fray import (
    Entrypoint,
    EnvironmentConfig,
    FrayError,
    InvalidRequestError,
    JobFailedError,
    JobNotFoundError,
    JobRequest,
    JobStatus,
    JobTimeoutError,
    LocalClient,
    ResourceConfig,
    current_client,
    wait_all,
)


def add(a: int, b: int) -> int:
    print(f"adding {a} and {b}")
    return a + b


def raise_value_error() -> None:
    print("about to fail")
    raise ValueError("the data is bad")


def read_env(name: str) -> str | None:
    return os.environ.get(name)


def req(fn: Any, *args: Any, name: str = "job", **kw: Any) -> JobRequest:
    return JobRequest(name=name, entrypoint=Entrypoint.from_callable(fn, args), **kw)


def cmd(script: str, name: str = "cmd", **kw: Any) -> JobRequest:
    return JobRequest(name=name, entrypoint=Entrypoint.from_shell(script), **kw)


def test_callable_result_logs_and_info(client: LocalClient) -> None:
    job = client.submit(req(add, 2, 3, name="adder"))
    assert job.result(timeout=30) == 5
    assert job.status() is JobStatus.SUCCEEDED
    assert list(job.logs()) == ["adding 2 and 3"]
    info = job.info()
    assert info.job_id == job.job_id and job.job_id.startswith("adder-")
    assert (info.attempts, info.failures, info.preemptions) == (1, 0, 0)
    assert info.started_at and info.finished_at and info.finished_at >= info.started_at


def test_failure_chains_the_users_exception(client: LocalClient) -> None:
    job = client.submit(req(raise_value_error, name="bad"))
    with pytest.raises(JobFailedError) as info:
        job.wait(timeout=30)
    err = info.value
    assert isinstance(err.__cause__, ValueError) and str(err.__cause__) == "the data is bad"
    assert "ValueError: the data is bad" in str(err)
    assert isinstance(err, RuntimeError) and err.job_id == job.job_id
    assert err.status is JobStatus.FAILED
    assert job.wait(timeout=30, raise_on_failure=False) is JobStatus.FAILED
    assert job.info().error == "ValueError: the data is bad"
    with pytest.raises(JobFailedError):
        job.result()
    assert fray.errors.JobFailed is JobFailedError


def test_command_job_logs_every_line_including_the_last(client: LocalClient) -> None:
    job = client.submit(cmd("for i in 1 2 3; do echo line $i; done; echo err >&2; printf tail"))
    assert job.wait(timeout=30) is JobStatus.SUCCEEDED
    assert list(job.logs()) == ["line 1", "line 2", "line 3", "err", "tail"]
    assert job.info().exit_code == 0
    with pytest.raises(JobFailedError, match="no return value"):
        job.result()


def two_writers(first: threading.Barrier, second: threading.Barrier) -> None:
    """Replica 0 starts a line, replica 1 prints a whole one, then replica 0 ends its line."""
    if fray.task_index() == 0:
        print("zero-start", end="")
        first.wait(30)
        second.wait(30)
        print(" zero-end")
    else:
        first.wait(30)
        print("one")
        second.wait(30)


def test_lines_of_replicas_writing_at_once_stay_whole(client: LocalClient) -> None:
    first, second = threading.Barrier(2), threading.Barrier(2)
    threads = client.submit(req(two_writers, first, second, replicas=2))
    assert threads.wait(timeout=30) is JobStatus.SUCCEEDED
    # Each replica's lines carry its index.
    assert list(threads.logs()) == ["[1] one", "[0] zero-start zero-end"]
    # Each process's last line has no newline: it is a line of its own all the same.
    procs = client.submit(cmd('printf "tail $FRAY_TASK_INDEX"', replicas=2))
    assert procs.wait(timeout=30) is JobStatus.SUCCEEDED
    assert sorted(procs.logs()) == ["[0] tail 0", "[1] tail 1"]


def print_after(go: threading.Event) -> None:
    print("early")
    go.wait(30)
    print("late")


def test_a_timed_out_streaming_wait_prints_nothing_more(
    client: LocalClient, capsys: pytest.CaptureFixture[str]
) -> None:
    go = threading.Event()
    job = client.submit(req(print_after, go))
    with pytest.raises(JobTimeoutError):
        job.wait(timeout=0.2, stream_logs=True)
    go.set()
    assert job.wait(timeout=30, stream_logs=True) is JobStatus.SUCCEEDED
    for thread in threading.enumerate():  # the printers, the timed-out wait's too
        if thread.name == job.job_id:
            thread.join(30)
    printed = capsys.readouterr().out.splitlines()
    assert printed.count("late") == 1  # by the second wait alone
    assert printed[-2:] == ["early", "late"]


_ECHO_DRIVER = """
import sys
from pathlib import Path
import fray

gate = Path(sys.argv[1])
client = fray.LocalClient()  # echo_logs: job output is copied to this process's stdout
job = client.submit(fray.JobRequest(name="chatty", entrypoint=fray.Entrypoint.from_shell(
    f"echo job-1; while [ ! -e {gate} ]; do sleep 0.01; done; echo job-2")))
next(iter(job.logs(follow=True)))  # the job's output is being echoed
print("main-start", end="")  # print() writes this and its newline in two calls
gate.touch()
job.wait(timeout=60)  # job-2 was echoed meanwhile
print(" main-end")
client.shutdown()
"""


def test_echoed_job_output_never_lands_inside_a_printed_line(tmp_path: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _ECHO_DRIVER, str(tmp_path / "gate")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "job-1\njob-2\nmain-start main-end\n"


def test_command_exit_code_is_failure(client: LocalClient) -> None:
    job = client.submit(cmd("echo giving up; exit 3"))
    with pytest.raises(JobFailedError, match="exited with code 3; last output: giving up"):
        job.wait(timeout=30)
    assert job.info().exit_code == 3


def test_process_callable_result_and_failure(client: LocalClient) -> None:
    job = client.submit(req(add, 4, 5, isolation="process"))
    assert job.result(timeout=60) == 9
    assert "adding 4 and 5" in list(job.logs())
    bad = client.submit(req(raise_value_error, isolation="process"))
    with pytest.raises(JobFailedError) as info:
        bad.wait(timeout=60)
    assert isinstance(info.value.__cause__, ValueError)
    lines = list(bad.logs())
    assert lines[0] == "about to fail" and "ValueError: the data is bad" in lines


def test_env_vars_reach_the_job_in_its_own_process(client: LocalClient) -> None:
    env = EnvironmentConfig(env_vars={"FRAY_TEST_VALUE": "42"})
    job = client.submit(req(read_env, "FRAY_TEST_VALUE", environment=env))
    assert job.result(timeout=60) == "42"
    assert os.environ.get("FRAY_TEST_VALUE") is None  # the driver is untouched
    shell = client.submit(cmd("echo value=$FRAY_TEST_VALUE", environment=env))
    shell.wait(timeout=30)
    assert list(shell.logs()) == ["value=42"]


def process_id() -> int:
    return os.getpid()


def test_env_vars_the_driver_already_has_keep_a_job_in_a_thread(
    client: LocalClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    same = EnvironmentConfig(env_vars={"TOKENIZERS_PARALLELISM": "false"})
    assert client.submit(req(process_id, environment=same)).result(timeout=60) == os.getpid()
    other = EnvironmentConfig(env_vars={"TOKENIZERS_PARALLELISM": "true"})
    assert client.submit(req(process_id, environment=other)).result(timeout=60) != os.getpid()


def test_unpicklable_process_job_is_rejected(client: LocalClient) -> None:
    lock = threading.Lock()
    with pytest.raises(InvalidRequestError, match="must be picklable"):
        client.submit(req(lambda: lock, isolation="process"))


def test_a_refused_submit_gives_back_the_thread_it_woke() -> None:
    """A submit wakes a job thread before it records the job; refused after that (here: the
    payload cannot be pickled), it must give the thread back, or a one-thread client would
    never run another job."""
    lock = threading.Lock()
    one = LocalClient(max_threads=1)
    try:
        for _ in range(3):
            with pytest.raises(InvalidRequestError, match="must be picklable"):
                one.submit(req(lambda: lock, isolation="process"))
        assert one.submit(req(add, 1, 2)).result(timeout=30) == 3
    finally:
        one.shutdown(wait=False)  # not joining a thread that may be stuck


def test_thread_isolation_conflicts_are_errors(client: LocalClient) -> None:
    with pytest.raises(InvalidRequestError, match="env vars need a process"):
        client.submit(
            req(add, 1, 2, isolation="thread", environment=EnvironmentConfig(env_vars={"A": "1"}))
        )
    with pytest.raises(InvalidRequestError, match="a command always runs in a process"):
        client.submit(
            JobRequest(name="c", entrypoint=Entrypoint.from_command("true"), isolation="thread")
        )


def test_missing_pip_package_and_docker_image_are_errors(client: LocalClient) -> None:
    with pytest.raises(InvalidRequestError, match="does not install packages"):
        client.submit(
            req(
                add,
                1,
                2,
                environment=EnvironmentConfig(pip_packages=["surely-not-installed-pkg>=1"]),
            )
        )
    ok = client.submit(req(add, 1, 2, environment=EnvironmentConfig(pip_packages=["pydantic"])))
    assert ok.result(timeout=30) == 3
    with pytest.raises(InvalidRequestError, match="cannot run containers"):
        client.submit(req(add, 1, 2, environment=EnvironmentConfig(docker_image="img:1")))


def test_terminate_kills_the_whole_process_tree(client: LocalClient) -> None:
    job = client.submit(cmd("sleep 300 & echo child $!; echo shell $$; wait"))
    pids: list[int] = []
    for line in job.logs(follow=True):
        pids.append(int(line.split()[1]))
        if len(pids) == 2:
            break
    assert all(pid_alive(p) for p in pids)
    job.terminate()
    assert job.status() is JobStatus.STOPPED
    assert wait_dead(pids) == []  # killed: gone once the kernel has run their exit
    assert job.wait(timeout=5) is JobStatus.STOPPED  # STOPPED is returned, not raised
    with pytest.raises(JobFailedError, match="stopped"):
        job.result()


def test_terminate_escalates_to_sigkill(client: LocalClient) -> None:
    job = client.submit(cmd("trap '' TERM; echo ready $$; while true; do sleep 0.1; done"))
    line = next(iter(job.logs(follow=True)))
    pid = int(line.split()[1])
    job.terminate()  # grace is 2 s in tests, then SIGKILL
    assert job.status() is JobStatus.STOPPED
    assert wait_dead([pid]) == []  # it ignores SIGTERM: only the SIGKILL ends it


def test_terminate_a_thread_job(client: LocalClient) -> None:
    started = threading.Event()
    finished = threading.Event()

    def spin() -> None:
        started.set()
        while True:  # pure Python: interruptible
            pass

    def guarded() -> None:
        try:
            spin()
        finally:
            finished.set()

    job = client.submit(req(guarded))
    assert started.wait(10)
    job.terminate()
    assert job.status() is JobStatus.STOPPED
    assert finished.wait(10)  # the thread really unwound


def test_a_process_terminated_from_outside_counts_as_preemption(client: LocalClient) -> None:
    job = client.submit(cmd("echo pid $$; sleep 300", max_retries_preemption=1))
    pids = (int(line.split()[1]) for line in job.logs(follow=True) if line.startswith("pid"))
    os.kill(next(pids), signal.SIGTERM)
    # Retried once under the preemption budget: the second attempt prints its own pid.
    os.kill(next(pids), signal.SIGTERM)
    with pytest.raises(JobFailedError, match="preempted 2 times"):
        job.wait(timeout=30)
    info = job.info()
    assert (info.attempts, info.preemptions, info.failures) == (2, 2, 0)
    assert info.exit_code == 128 + signal.SIGTERM


def test_a_process_sigkilled_from_outside_counts_as_failure(client: LocalClient) -> None:
    job = client.submit(cmd("echo pid $$; sleep 300", max_retries_preemption=5))
    pids = (int(line.split()[1]) for line in job.logs(follow=True) if line.startswith("pid"))
    os.kill(next(pids), signal.SIGKILL)
    with pytest.raises(JobFailedError, match="killed by SIGKILL, not by Fray"):
        job.wait(timeout=30)
    info = job.info()
    assert (info.attempts, info.preemptions, info.failures) == (1, 0, 1)
    assert info.exit_code == 128 + signal.SIGKILL


attempt_counter: dict[str, int] = {}


def flaky(key: str, fail_times: int) -> str:
    attempt_counter[key] = attempt_counter.get(key, 0) + 1
    if attempt_counter[key] <= fail_times:
        raise RuntimeError(f"attempt {attempt_counter[key]} failed")
    return f"ok after {attempt_counter[key]}"


def test_failure_budget_is_exact(client: LocalClient) -> None:
    job = client.submit(req(flaky, "a", 2, max_retries_failure=2))
    assert job.result(timeout=30) == "ok after 3"
    assert (job.info().attempts, job.info().failures) == (3, 2)
    over = client.submit(req(flaky, "b", 3, max_retries_failure=2))
    with pytest.raises(JobFailedError, match="attempt 3 failed"):
        over.wait(timeout=30)
    assert (over.info().attempts, over.info().failures) == (3, 3)
    assert "[fray] attempt 1 failed (RuntimeError: attempt 1 failed); retrying" in list(over.logs())


def parent_job(n: int) -> list[int]:
    client = current_client()
    kids = [client.submit(req(add, i, i, name=f"kid{i}")) for i in range(n)]
    wait_all(kids, timeout=30)
    print("parent done")
    return [k.result() for k in kids]


def test_nested_jobs_get_hierarchical_ids(client: LocalClient) -> None:
    parent = client.submit(req(parent_job, 3, name="parent"))
    assert parent.result(timeout=30) == [0, 2, 4]
    info = parent.info()
    assert len(info.children) == 3
    for child_id in info.children:
        assert child_id.startswith(parent.job_id + "/kid")
        child = client.get_job(child_id)
        assert child.info().parent == parent.job_id
    lines = list(parent.logs(include_children=True))
    assert "parent done" in lines
    assert any(line.startswith(f"[{info.children[0]}] adding 0 and 0") for line in lines)
    assert list(parent.logs()) == ["parent done"]


def spawn_and_block(gate: threading.Event) -> None:
    child = current_client().submit(cmd("echo child $$; sleep 300", name="grandchild"))
    for line in child.logs(follow=True):
        print(line)
        break
    while not gate.wait(0.05):
        pass


def test_terminating_a_parent_stops_its_children(client: LocalClient) -> None:
    gate = threading.Event()
    parent = client.submit(req(spawn_and_block, gate, name="parent"))
    line = next(iter(parent.logs(follow=True)))
    child_pid = int(line.split()[1])
    parent.terminate()
    (child_id,) = parent.info().children
    assert client.get_job(child_id).status() is JobStatus.STOPPED
    assert parent.status() is JobStatus.STOPPED
    assert wait_dead([child_pid]) == []


def test_children_die_with_a_finished_parent(client: LocalClient) -> None:
    def fire_and_forget() -> str:
        child = current_client().submit(cmd("echo up; sleep 300", name="orphan"))
        next(iter(child.logs(follow=True)))
        return child.job_id

    parent = client.submit(req(fire_and_forget))
    child_id = parent.result(timeout=30)
    child = client.get_job(child_id)
    assert child.wait(timeout=10) is JobStatus.STOPPED


def test_list_and_get_jobs(client: LocalClient) -> None:
    a = client.submit(req(add, 1, 1, name="a"))
    b = client.submit(req(add, 1, 1, name="a"))  # names need not be unique locally
    wait_all([a, b], timeout=30)
    assert a.job_id != b.job_id
    assert [i.job_id for i in client.list_jobs()] == [a.job_id, b.job_id]
    assert client.get_job(a.job_id).result() == 2
    with pytest.raises(JobNotFoundError, match="no job with id 'nope'"):
        client.get_job("nope")


_TRACE_AFTER_STOP = """
import sys, threading
from fray import Entrypoint, JobRequest, JobStatus, LocalClient

running = threading.Event()

def spin():
    running.set()
    while True:
        running.wait(0.01)

with LocalClient(echo_logs=False) as client:
    job = client.submit(JobRequest(name="spin", entrypoint=Entrypoint.from_callable(spin)))
    running.wait(30)
    job.terminate()
    assert job.status() is JobStatus.STOPPED
# shutdown() joined the job's thread: the stop was delivered and handled there.
sys.settrace(lambda *args: None)
value = sum(range(10))
print("traced", (lambda: value)())
"""


def test_stopping_a_thread_job_leaves_the_interpreter_traceable() -> None:
    # Clearing a stop with PyThreadState_SetAsyncExc(id, NULL) left CPython 3.11's eval
    # breaker set for good: the process slowed down, and the first traced call (a debugger,
    # coverage, hypothesis) spun forever.
    done = subprocess.run(
        [sys.executable, "-c", _TRACE_AFTER_STOP], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "traced 45\n"


def test_wait_timeout_does_not_kill(client: LocalClient) -> None:
    gate = threading.Event()

    def hold() -> int:
        while not gate.wait(0.05):
            pass
        return 1

    job = client.submit(req(hold))
    with pytest.raises(JobTimeoutError, match="still running after 0.1s"):
        job.wait(timeout=0.1)
    with pytest.raises(JobTimeoutError):
        job.result(timeout=0.1)
    gate.set()
    assert job.result(timeout=30) == 1


def test_replicas_return_one_value_each(client: LocalClient) -> None:
    job = client.submit(req(fray.task_index, resources=ResourceConfig(replicas=3)))
    assert job.result(timeout=30) == [0, 1, 2]
    proc = client.submit(req(read_env, "FRAY_TASK_INDEX", replicas=2, isolation="process"))
    assert proc.result(timeout=60) == ["0", "1"]


def tpu_env() -> dict[str, str | None]:
    keys = [
        "TPU_WORKER_ID",
        "TPU_NAME",
        "MEGASCALE_SLICE_ID",
        "MEGASCALE_NUM_SLICES",
        "MEGASCALE_COORDINATOR_ADDRESS",
        "JAX_PLATFORMS",
        "LIBTPU_INIT_ARGS",
    ]
    return {k: os.environ.get(k) for k in keys}


def test_tpu_job_runs_one_process_per_vm_with_slice_env(client: LocalClient) -> None:
    job = client.submit(req(tpu_env, resources=ResourceConfig.with_tpu("v5p-16", slice_count=2)))
    hosts = job.result(timeout=60)
    assert len(hosts) == 4
    assert [(h["MEGASCALE_SLICE_ID"], h["TPU_WORKER_ID"]) for h in hosts] == [
        ("0", "0"),
        ("0", "1"),
        ("1", "0"),
        ("1", "1"),
    ]
    assert {h["MEGASCALE_NUM_SLICES"] for h in hosts} == {"2"}
    assert len({h["MEGASCALE_COORDINATOR_ADDRESS"] for h in hosts}) == 1
    assert hosts[0]["TPU_NAME"] != hosts[2]["TPU_NAME"]
    assert {h["JAX_PLATFORMS"] for h in hosts} == {"cpu"}
    assert hosts[0]["LIBTPU_INIT_ARGS"] == "--xla_tpu_scoped_vmem_limit_kib=50000"
    single = client.submit(req(tpu_env, resources=ResourceConfig.with_tpu("v4-8")))
    host = single.result(timeout=60)  # one VM: one replica, so a single value
    assert host["MEGASCALE_SLICE_ID"] is None and host["TPU_WORKER_ID"] == "0"


def test_gang_failure_takes_the_attempt_down(client: LocalClient) -> None:
    script = 'if [ "$FRAY_TASK_INDEX" = 1 ]; then exit 7; fi; echo waiting $$; sleep 300'
    job = client.submit(
        JobRequest(name="gang", entrypoint=Entrypoint.from_shell(script), replicas=3)
    )
    with pytest.raises(JobFailedError, match="replica 1 exited with code 7"):
        job.wait(timeout=30)


def test_submit_type_errors_and_closed_client() -> None:
    client = LocalClient()
    with pytest.raises(InvalidRequestError, match="must be a fray.JobRequest"):
        client.submit("not a request")  # type: ignore[arg-type]
    client.shutdown()
    with pytest.raises(FrayError, match="shut down"):
        client.submit(req(add, 1, 2))
    with pytest.raises(InvalidRequestError, match="LocalClient.max_threads"):
        LocalClient(max_threads=0)


def test_max_threads_queues_jobs_as_pending() -> None:
    gate = threading.Event()

    def hold() -> None:
        while not gate.wait(0.05):
            pass

    with LocalClient(max_threads=1, echo_logs=False) as client:
        first = client.submit(req(hold))
        second = client.submit(req(add, 1, 1))
        assert second.status() is JobStatus.PENDING
        gate.set()
        assert wait_all([first, second], timeout=30) == [JobStatus.SUCCEEDED] * 2


def test_shutdown_leaves_no_process_or_thread() -> None:
    before = set(threading.enumerate())
    client = LocalClient(echo_logs=False)
    jobs = [client.submit(cmd("echo pid $$; sleep 300", name=f"s{i}")) for i in range(3)]
    pids = [int(next(iter(j.logs(follow=True))).split()[1]) for j in jobs]
    gate = threading.Event()

    def hold() -> None:
        while not gate.wait(0.05):
            pass

    thread_job = client.submit(req(hold))
    actor = client.create_actor(dict, name="d")
    del actor
    client.shutdown()
    assert all(j.status() is JobStatus.STOPPED for j in [*jobs, thread_job])
    assert wait_dead(pids) == []
    assert not psutil.Process().children(recursive=True)
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    for t in leftover:
        t.join(timeout=5)
    assert [t.name for t in threading.enumerate() if t not in before and t.is_alive()] == []


def test_driver_exit_kills_subprocess_jobs(tmp_path: Any) -> None:
    script = tmp_path / "driver.py"
    script.write_text(
        "import sys, fray\n"
        "c = fray.LocalClient(echo_logs=False)\n"
        "j = c.submit(fray.JobRequest(name='s', entrypoint=fray.Entrypoint.from_shell("
        "'sleep 300 & echo pid $!; wait')))\n"
        "print(next(iter(j.logs(follow=True))).split()[1], flush=True)\n"
        "import os; os._exit(0)  # no shutdown, no atexit\n"
    )
    import subprocess

    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True
    )
    pid = int(out.stdout.strip())
    assert wait_dead([pid]) == []  # killed by its guardian once the driver is gone


def test_handles_are_not_silently_pickled_across_clients(client: LocalClient) -> None:
    job = client.submit(req(add, 1, 2))
    job.wait(timeout=30)
    with pytest.raises(Exception):  # noqa: B017 - job handles hold locks; not meant to travel
        pickle.dumps(job)


def test_temporary_files_go_at_exit_without_shutdown(tmp_path: Any) -> None:
    """A script that never calls shutdown() leaves no fray-local-* folder behind."""
    script = (
        "import fray\n"
        "client = fray.LocalClient(echo_logs=False)\n"
        "job = client.submit(fray.JobRequest(name='p', isolation='process',\n"
        "    entrypoint=fray.Entrypoint.from_callable(abs, [-3])))\n"
        "assert job.result(timeout=60) == 3\n"
        "import glob, os, tempfile\n"
        "print(len(glob.glob(os.path.join(tempfile.gettempdir(), 'fray-local-*'))))\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "1"  # the job's files were there while the client lived
    assert list(tmp_path.glob("fray-local-*")) == []


def test_a_handle_over_a_future_of_ones_own_is_a_real_job_handle() -> None:
    """The predecessor's ``LocalJobHandle(job_id, future)``, as Marin's step runner makes
    it over its own thread pool."""
    from concurrent.futures import ThreadPoolExecutor

    from fray.local import LocalJobHandle

    gate = threading.Event()

    def step(fail: bool) -> str:
        gate.wait(30)
        if fail:
            raise ValueError("the step broke")
        return "done"

    with ThreadPoolExecutor(2) as pool:
        good = LocalJobHandle("local-good", pool.submit(step, False))
        bad = LocalJobHandle("local-bad", pool.submit(step, True))
        assert good.job_id == "local-good" and good.status() is JobStatus.RUNNING
        gate.set()
        assert wait_all([good], timeout=30) == [JobStatus.SUCCEEDED]
        assert good.result() == "done"
        with pytest.raises(JobFailedError, match="the step broke") as caught:
            bad.wait(timeout=30, raise_on_failure=True)
        assert isinstance(caught.value.__cause__, ValueError)
        assert bad.info().status is JobStatus.FAILED
    with pytest.raises(InvalidRequestError, match="LocalJobHandle"):
        LocalJobHandle("no-future")
