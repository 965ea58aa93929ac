"""Faults on LocalClient: each ends in its documented state, leaves no process, never hangs.

Documented states (``fray.local``): a job process killed by a signal other than terminate()'s
is a preemption, retried under ``max_retries_preemption`` and FAILED once it is spent; a stopped
actor raises ``ActorDiedError`` on every later call; ``shutdown()`` and ``terminate()`` stop
whole process trees, children first; nothing outlives the driver.
"""

from __future__ import annotations

import linecache
import os
import pickle
import queue
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from conftest import pid_alive, wait_dead
from fray import (
    ActorDiedError,
    Entrypoint,
    EnvironmentConfig,
    JobFailedError,
    JobRequest,
    JobStatus,
    LocalClient,
    current_client,
)

pytestmark = pytest.mark.integration

DEADLINE_S = 30.0


@pytest.fixture(autouse=True)
def _no_leftover_processes() -> Iterator[None]:
    yield
    children = psutil.Process().children(recursive=True)
    _gone, alive = psutil.wait_procs(children, timeout=10)
    assert [p.pid for p in alive] == [], "processes left behind"


def first_lines(job: Any, count: int, prefix: str) -> list[str]:
    """The first ``count`` log lines starting with ``prefix`` (follows the log, bounded by the
    job's own end)."""
    found: list[str] = []
    for line in job.logs(follow=True):
        if line.startswith(prefix):
            found.append(line)
            if len(found) == count:
                break
    assert len(found) == count, f"job ended after {found}"
    return found


def guardian_of(pid: int) -> psutil.Process:
    """The ``_reaper.py`` guardian above ``pid``."""
    for parent in psutil.Process(pid).parents():
        if any("_reaper.py" in part for part in parent.cmdline()):
            return parent
    raise AssertionError(f"no guardian above {pid}")


def cmd(script: str, name: str = "cmd", **kw: Any) -> JobRequest:
    return JobRequest(name=name, entrypoint=Entrypoint.from_shell(script), **kw)


# ---------------------------------------------------------------------------------------------
# A job's process killed with SIGKILL


def die_once_then_answer(marker: str) -> str:
    if not os.path.exists(marker):
        Path(marker).write_text("killed once")
        os.kill(os.getpid(), signal.SIGKILL)
    return f"answered in {os.getpid()}"


def test_sigkilled_process_callable_is_a_failure_retried_on_the_failure_budget(
    client: LocalClient, tmp_path: Path
) -> None:
    """On one machine a SIGKILL that Fray did not send is the out-of-memory killer (or a
    user), not a lost node: a failure, not a preemption."""
    job = client.submit(
        JobRequest(
            name="victim",
            entrypoint=Entrypoint.from_callable(die_once_then_answer, [str(tmp_path / "m")]),
            isolation="process",
            max_retries_failure=1,
        )
    )
    assert job.result(timeout=DEADLINE_S).startswith("answered in ")
    info = job.info()
    assert (info.status, info.attempts, info.preemptions, info.failures) == (
        JobStatus.SUCCEEDED,
        2,
        0,
        1,
    )
    assert any("attempt 1 failed" in line and "SIGKILL" in line for line in job.logs())


def test_sigkilled_process_callable_without_budget_fails_saying_why(
    client: LocalClient, tmp_path: Path
) -> None:
    job = client.submit(
        JobRequest(
            name="victim",
            entrypoint=Entrypoint.from_callable(die_once_then_answer, [str(tmp_path / "m")]),
            isolation="process",
            max_retries_preemption=5,
        )
    )
    with pytest.raises(JobFailedError, match="killed by SIGKILL, not by Fray.*out-of-memory"):
        job.wait(timeout=DEADLINE_S)
    info = job.info()
    assert (info.attempts, info.preemptions, info.failures) == (1, 0, 1)
    assert info.exit_code == 128 + signal.SIGKILL


def test_sigkilled_guardian_takes_the_whole_tree_and_counts_as_a_failure(
    client: LocalClient,
) -> None:
    """SIGKILL to the job's top process (its guardian) while the job has a background child:
    the child must not outlive it (it would also hold the log pipe open and hang the job)."""
    job = client.submit(cmd("sleep 300 & echo pid $!; wait", name="tree", max_retries_failure=1))
    lines = job.logs(follow=True)
    orphans: list[int] = []
    for _attempt in range(2):
        pid = next(int(line.split()[1]) for line in lines if line.startswith("pid"))
        orphans.append(pid)
        guardian_of(pid).send_signal(signal.SIGKILL)
    with pytest.raises(JobFailedError, match="SIGKILL"):
        job.wait(timeout=DEADLINE_S)
    info = job.info()
    assert (info.attempts, info.preemptions, info.failures) == (2, 0, 2)
    assert wait_dead(orphans) == []


# ---------------------------------------------------------------------------------------------
# Actors stopped between calls


class Tally:
    def __init__(self) -> None:
        self.calls = 0

    def bump(self) -> int:
        self.calls += 1
        return self.calls


def test_calls_after_a_group_shutdown_raise_actor_died(client: LocalClient) -> None:
    group = client.create_actor_group(Tally, name="tally", count=2)
    first, second = group.wait_ready(timeout=DEADLINE_S)
    assert (first.bump(), second.bump.remote().result(timeout=DEADLINE_S)) == (1, 1)
    revived = pickle.loads(pickle.dumps(first))
    group.shutdown()
    assert group.statuses() == [JobStatus.STOPPED, JobStatus.STOPPED]
    assert group.ready_count == 0
    for handle in (first, second, revived):
        with pytest.raises(ActorDiedError):
            handle.bump()
        with pytest.raises(ActorDiedError):
            handle.bump.remote()
    # A handle unpickled after the stop (e.g. shipped to a job later) knows it too.
    with pytest.raises(ActorDiedError, match="shut down"):
        pickle.loads(pickle.dumps(first)).bump()


def test_calls_after_client_shutdown_raise_actor_died() -> None:
    client = LocalClient(echo_logs=False)
    actor = client.create_actor(Tally, name="solo")
    assert actor.bump() == 1
    client.shutdown()
    with pytest.raises(ActorDiedError):
        actor.bump()
    with pytest.raises(ActorDiedError):
        actor.bump.remote()


# ---------------------------------------------------------------------------------------------
# shutdown() while jobs and actors run


class Blocker:
    def hold(self, gate: threading.Event, entered: threading.Event) -> str:
        entered.set()
        gate.wait()  # blocked in C, as user code blocked on I/O would be
        return "released"

    def ping(self) -> str:
        return "pong"


def process_sleeper() -> None:
    print(f"pid {os.getpid()}", flush=True)
    time.sleep(300)


def parent_of_a_process_child(gate: threading.Event) -> None:
    child = current_client().submit(cmd("echo pid $$; sleep 300", name="kid"))
    print(first_lines(child, 1, "pid")[0], flush=True)
    while not gate.wait(0.05):
        pass


def test_shutdown_mid_run_stops_everything_in_bounded_time() -> None:
    client = LocalClient(echo_logs=False)
    gate = threading.Event()
    sleeper = client.submit(
        JobRequest(
            name="sleeper",
            entrypoint=Entrypoint.from_callable(process_sleeper),
            isolation="process",
        )
    )
    tree = client.submit(cmd("sleep 300 & echo pid $!; echo pid $$; wait", name="tree"))
    parent = client.submit(
        JobRequest(
            name="parent", entrypoint=Entrypoint.from_callable(parent_of_a_process_child, [gate])
        )
    )
    pids = [int(first_lines(sleeper, 1, "pid")[0].split()[1])]
    pids += [int(line.split()[1]) for line in first_lines(tree, 2, "pid")]
    pids += [int(first_lines(parent, 1, "pid")[0].split()[1])]
    assert all(pid_alive(p) for p in pids)

    actor = client.create_actor(Blocker, name="blocker")
    actor_gate, entered = threading.Event(), threading.Event()
    in_flight = actor.hold.remote(actor_gate, entered)
    assert entered.wait(DEADLINE_S)
    queued = [actor.ping.remote() for _ in range(3)]

    start = time.monotonic()
    client.shutdown()
    took = time.monotonic() - start
    # Grace for the processes (2 s in tests) plus the wait for the blocked actor call (5 s).
    assert took < 20, f"shutdown took {took:.1f}s"
    jobs = [sleeper, tree, parent, *(client.get_job(c) for c in parent.info().children)]
    assert [j.status() for j in jobs] == [JobStatus.STOPPED] * 4
    assert wait_dead(pids) == []
    for future in queued:
        with pytest.raises(ActorDiedError):
            future.result(timeout=DEADLINE_S)
    with pytest.raises(ActorDiedError):
        actor.ping()
    # No future stays pending after shutdown: the call that was running (its code cannot be
    # cut off, and goes on to its end) is answered ActorDiedError at once.
    with pytest.raises(ActorDiedError):
        in_flight.result(timeout=0)
    actor_gate.set()


# ---------------------------------------------------------------------------------------------
# A parent terminated while its children run


def process_parent() -> None:
    """Runs in its own process: its child is a job of the LocalClient inside that process."""
    child = current_client().submit(cmd("sleep 300 & echo pid $!; echo pid $$; wait"))
    for line in first_lines(child, 2, "pid"):
        print(line, flush=True)
    time.sleep(300)


def test_terminating_a_process_parent_kills_its_childrens_processes(client: LocalClient) -> None:
    parent = client.submit(
        JobRequest(
            name="pparent",
            entrypoint=Entrypoint.from_callable(process_parent),
            isolation="process",
        )
    )
    pids = [int(line.split()[1]) for line in first_lines(parent, 2, "pid")]
    assert all(pid_alive(p) for p in pids)
    start = time.monotonic()
    parent.terminate()
    assert time.monotonic() - start < 15
    assert parent.status() is JobStatus.STOPPED
    assert wait_dead(pids) == []


# ---------------------------------------------------------------------------------------------
# The driver ends without shutdown()

DRIVER_PRELUDE = """
import os, sys, threading, time
import fray
from fray import Entrypoint, JobRequest

def sleeper():
    print(f"pid {os.getpid()}", flush=True)
    time.sleep(300)

class Blocker:
    def hold(self, gate):
        gate.wait()

client = fray.LocalClient(echo_logs=False)
tree = client.submit(JobRequest(name="tree", entrypoint=Entrypoint.from_shell(
    "sleep 300 & echo pid $!; echo pid $$; wait")))
proc = client.submit(JobRequest(name="proc", entrypoint=Entrypoint.from_callable(sleeper),
                                isolation="process"))
pids = []
for job, count in ((tree, 2), (proc, 1)):
    lines = (line for line in job.logs(follow=True) if line.startswith("pid"))
    pids += [next(lines).split()[1] for _ in range(count)]
print(" ".join(pids), flush=True)
"""


def run_driver(tmp_path: Path, ending: str) -> tuple[subprocess.Popen[str], list[int]]:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER_PRELUDE + textwrap.dedent(ending))
    driver = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    assert driver.stdout is not None
    line = driver.stdout.readline()
    pids = [int(p) for p in line.split()]
    assert len(pids) == 3, f"driver printed {line!r}"
    return driver, pids


def test_driver_that_just_ends_exits_and_takes_its_jobs_along(tmp_path: Path) -> None:
    """The script ends (no shutdown(), exceptions or os._exit) while a thread job and an actor
    call are blocked for good and process jobs run: it must exit, and its processes with it."""
    driver, pids = run_driver(
        tmp_path,
        """
        stuck = threading.Event()
        client.submit(JobRequest(name="stuck", entrypoint=Entrypoint.from_callable(stuck.wait)))
        actor = client.create_actor(Blocker, name="blocker")
        actor.hold.remote(stuck)
        raise SystemExit(3)
        """,
    )
    try:
        assert driver.wait(timeout=DEADLINE_S) == 3
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=DEADLINE_S)
        driver.stdout.close()  # pyright: ignore[reportOptionalMemberAccess]
    assert wait_dead(pids) == []


def test_driver_killed_with_sigkill_takes_its_jobs_along(tmp_path: Path) -> None:
    driver, pids = run_driver(tmp_path, "time.sleep(300)\n")
    assert all(pid_alive(p) for p in pids)
    driver.kill()
    driver.wait(timeout=DEADLINE_S)
    driver.stdout.close()  # pyright: ignore[reportOptionalMemberAccess]
    assert wait_dead(pids) == []


# ---------------------------------------------------------------------------------------------
# Shutdown returns within its bound, whatever the jobs and actors do


def block_on(kind: str, threads: list[int]) -> None:
    """A thread job blocked in C: on an Event, a queue or a socket, none of which a stop
    injected into its thread interrupts."""
    threads.append(threading.get_ident())
    if kind == "event":
        threading.Event().wait()
    elif kind == "queue":
        queue.Queue().get()
    else:
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen()
            server.accept()


def wait_blocked_in_c(threads: list[int]) -> None:
    """Waits until the job's thread is in the C call that blocks it: its innermost frame is
    on the line of that call (``acquire()`` or ``_accept()``), from which no Python code
    runs, so a stop injected now cannot land until the call returns."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(threads[0]) if threads else None
        if frame is not None:
            line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
            if "acquire(" in line or "_accept(" in line:
                return
        time.sleep(0.005)  # polling interval of a bounded wait, not synchronisation
    pytest.fail("the job's thread never blocked")


@pytest.mark.parametrize("kind", ["event", "queue", "socket"])
def test_shutdown_returns_though_a_thread_job_cannot_be_interrupted(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = LocalClient(echo_logs=False)
    threads: list[int] = []
    job = client.submit(
        JobRequest(name="blocked", entrypoint=Entrypoint.from_callable(block_on, [kind, threads]))
    )
    wait_blocked_in_c(threads)
    begin = time.monotonic()
    client.shutdown()  # hung for good before: it joined every job thread
    assert time.monotonic() - begin < 5
    assert job.status() is JobStatus.STOPPED
    assert "left to end on its own" in (job.info().error or "")
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert f"job {job.job_id} did not stop within" in " ".join(said)  # the log says so too


class Busy:
    def hold(self, gate: threading.Event, entered: threading.Event) -> str:
        entered.set()
        gate.wait(60)
        return "released"


def test_shutdown_with_busy_actors_is_parallel_and_answers_every_call() -> None:
    client = LocalClient(echo_logs=False)
    gate = threading.Event()
    actors = [client.create_actor(Busy, name=f"busy{i}") for i in range(8)]
    futures = []
    for actor in actors:
        entered = threading.Event()
        futures.append(actor.hold.remote(gate, entered))
        assert entered.wait(DEADLINE_S)
        futures.append(actor.hold.remote(gate, entered))  # queued behind the running one
    begin = time.monotonic()
    client.shutdown()  # 5 s per busy actor, one after another, before (40 s here)
    assert time.monotonic() - begin < 5
    for future in futures:  # none stays pending
        with pytest.raises(ActorDiedError):
            future.result(timeout=0)
    gate.set()


def test_a_failed_command_that_printed_its_token_does_not_put_it_into_the_error() -> None:
    env = EnvironmentConfig(env_vars={"MY_API_TOKEN": "s3cr3t-value"})
    with LocalClient(echo_logs=False) as client:
        job = client.submit(
            JobRequest(
                name="leaky",
                entrypoint=Entrypoint.from_shell('echo "token is $MY_API_TOKEN"; exit 3'),
                environment=env,
            )
        )
        with pytest.raises(JobFailedError) as caught:
            job.wait(timeout=DEADLINE_S)
        assert "s3cr3t-value" not in str(caught.value)
        assert "s3cr3t-value" not in (job.info().error or "")
        assert "token is ***" in (job.info().error or "")
        assert any("s3cr3t-value" in line for line in job.logs())  # the job's own output
