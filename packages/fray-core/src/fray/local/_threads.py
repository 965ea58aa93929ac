"""Thread jobs: a callable run in threads of the driver, its ``print`` routed to its log,
stopped by an exception injected into its threads; and the pool that gives every local
attempt its turn."""

from __future__ import annotations

import collections
import contextvars
import ctypes
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from fray import _bound
from fray.backend import JobRecord, Outcome, Phase, PrefixedSink
from fray.backend._output import restore_output, route_output

if TYPE_CHECKING:
    from fray.local._client import LocalClient


class Terminated(BaseException):
    """Raised inside a thread job that was stopped (a BaseException, so ``except
    Exception`` in user code does not swallow it)."""


_STOPPED = Outcome.stopped()  # an Outcome is immutable: one serves every stopped replica


def _deliver_pending() -> None:
    """A Python call: an exception injected into the calling thread is raised here."""


class JobThreads:
    """Runs local attempts on at most ``size`` reused daemon threads (a job blocked for good
    does not keep the driver from exiting); more wait their turn (PENDING). A process attempt
    keeps its thread until its processes have exited, and threads are never retired while
    the client is open: a job's processes die with their thread (``PR_SET_PDEATHSIG``).
    Jobs go through a ``SimpleQueue`` (benchmark row "trivial job submit(...).wait()"), and
    a thread runs ``run(job)`` for each: a function, not a client's bound method, as a
    thread that waits for work must not keep its client alive.
    """

    def __init__(self, size: int, run: Callable[[JobRecord], None]) -> None:
        self._size = size
        self._run_attempt = run
        self._work: queue.SimpleQueue[JobRecord | None] = queue.SimpleQueue()
        self._idle: collections.deque[None] = collections.deque()  # a token per idle thread
        self._threads = 0
        self._lock = threading.Lock()

    def submit(self, job: JobRecord) -> None:
        self._work.put(job)
        try:
            self._idle.pop()  # an idle thread takes it
        except IndexError:
            with self._lock:
                if self._threads < self._size:
                    self._threads += 1
                    threading.Thread(target=self._run, name="fray-job", daemon=True).start()

    def _run(self) -> None:
        run = self._run_attempt
        while (job := self._work.get()) is not None:
            run(job)  # records its own outcome and never raises
            del job  # an idle thread must not keep its last job alive
            self._idle.append(None)

    def close(self) -> None:
        """Idle threads exit; busy ones after their attempt."""
        with self._lock:
            threads, self._threads = self._threads, self._size  # no new thread from now on
        for _ in range(threads):
            self._work.put(None)


# The threads running a job's code now (by thread id), with the job: what a stop interrupts.
# Changed and read under that job's lock, so a stop finds every thread of the job that is in
# its code, and only those.
_in_user_code: dict[int, JobRecord] = {}


def stop_threads(job: JobRecord) -> None:
    """Under the job's lock: raises :class:`Terminated` in every thread running the job's
    code, at its next check of the interpreter's eval breaker (a Python call or loop); a
    thread blocked in C (a lock, a socket, ``time.sleep``) sees it only when it returns."""
    for thread_id, running in list(_in_user_code.items()):
        if running is job:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(thread_id), ctypes.py_object(Terminated)
            )


def run_threads(client: LocalClient, job: JobRecord) -> Outcome:
    """Runs one attempt of a callable job in this thread and one more per extra replica;
    returns its outcome."""
    count = job.replicas
    outcomes = [_STOPPED] * count
    threads = [
        threading.Thread(
            target=contextvars.Context().run,
            args=(_run_replica, client, job, index, outcomes),
            name=f"fray-{job.job_id}",
            daemon=True,
        )
        for index in range(1, count)
    ]
    for thread in threads:
        thread.start()
    # Each replica in a fresh context: what the job's code sets does not outlive it.
    contextvars.Context().run(_run_replica, client, job, 0, outcomes)
    for thread in threads:
        thread.join()
    if count == 1:
        return outcomes[0]
    if _STOPPED in outcomes:
        return _STOPPED
    failed = [outcome.cause for outcome in outcomes if outcome.kind == "failed"]
    if failed:
        return Outcome.failed(failed[0], failed_tasks=len(failed))
    return Outcome.succeeded([outcome.value for outcome in outcomes])


def _run_replica(client: LocalClient, job: JobRecord, index: int, outcomes: list[Outcome]) -> None:
    """Runs replica ``index`` in this thread; its outcome goes to ``outcomes[index]``. Its
    output goes through the record, so a job that prints nothing has no log made."""
    entry = job.request.entrypoint  # pyright: ignore[reportOptionalMemberAccess]
    assert entry.callable is not None
    _bound.bound.set((client, None))
    _bound.job.set((job.job_id, index, job))
    previous = route_output(
        job if job.replicas == 1 else PrefixedSink(job, index), client.echo_logs
    )
    me = threading.get_ident()
    try:
        with job.lock:
            if job.phase is not Phase.RUNNING:
                raise Terminated
            _in_user_code[me] = job
        try:
            outcome = Outcome.succeeded(entry.callable(*entry.args, **entry.kwargs))
        finally:
            with job.lock:
                del _in_user_code[me]
                stopping = job.phase is not Phase.RUNNING
            if stopping:
                # The user code may have returned before a stop injected into it arrived:
                # take it here, where it changes nothing. (Clearing it with
                # PyThreadState_SetAsyncExc(id, NULL) instead leaves CPython 3.11's eval
                # breaker set for good: every thread then slows down, and a traced one
                # spins forever.) Not contextlib.suppress: its __enter__ is a Python call,
                # where the stop would be raised outside the suppression.
                try:  # noqa: SIM105
                    _deliver_pending()
                except Terminated:
                    pass
    except Terminated:
        outcome = _STOPPED
    except BaseException as exc:
        outcome = Outcome.failed(exc) if job.phase is Phase.RUNNING else _STOPPED
    finally:
        restore_output(previous)
    outcomes[index] = outcome
