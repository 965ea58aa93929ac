"""Thread jobs: a callable run in threads of the driver, its ``print`` routed to its log,
stopped by an exception injected into its threads; and the pool that gives every local
attempt its turn."""

from __future__ import annotations

import collections
import contextvars
import ctypes
import dataclasses
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fray import _bound
from fray.backend import JobRecord, Outcome, Phase, PrefixedSink
from fray.backend._output import restore_output, route_output

if TYPE_CHECKING:
    from fray.local._client import LocalClient


class Terminated(BaseException):
    """Raised inside a thread job that was stopped (a BaseException, so ``except
    Exception`` in user code does not swallow it)."""


def _deliver_pending() -> None:
    """A Python call: an exception injected into the calling thread is raised here."""


class JobThreads:
    """Runs local attempts on at most ``size`` reused daemon threads (a job blocked for good
    does not keep the driver from exiting); more wait their turn (PENDING). A process attempt
    keeps its thread until its processes have exited, and threads are never retired while
    the client is open: a job's processes die with their thread (``PR_SET_PDEATHSIG``).
    Work goes through a ``SimpleQueue`` (benchmark row "trivial job submit(...).wait()").
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._work: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]] | None]
        self._work = queue.SimpleQueue()
        self._idle: collections.deque[None] = collections.deque()  # a token per idle thread
        self._threads = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        self._work.put((fn, args))
        try:
            self._idle.pop()  # an idle thread takes it
        except IndexError:
            with self._lock:
                if self._threads < self._size:
                    self._threads += 1
                    threading.Thread(target=self._run, name="fray-job", daemon=True).start()

    def _run(self) -> None:
        while (item := self._work.get()) is not None:
            item[0](*item[1])  # records its own outcome and never raises
            del item  # an idle thread must not keep its last job alive
            self._idle.append(None)

    def close(self) -> None:
        """Idle threads exit; busy ones after their attempt."""
        with self._lock:
            threads, self._threads = self._threads, self._size  # no new thread from now on
        for _ in range(threads):
            self._work.put(None)


@dataclasses.dataclass(slots=True)
class _Replica:
    """One thread of a thread attempt."""

    index: int
    thread_id: int | None = None
    in_user_code: bool = False


def stop_threads(replicas: list[Any]) -> None:
    """Under the job's lock: raises :class:`Terminated` in every replica running user code,
    at its thread's next check of the interpreter's eval breaker (a Python call or loop); a
    thread blocked in C (a lock, a socket, ``time.sleep``) sees it only when it returns."""
    for replica in replicas:
        if replica.in_user_code and replica.thread_id is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(replica.thread_id), ctypes.py_object(Terminated)
            )


def run_threads(client: LocalClient, job: JobRecord) -> Outcome:
    """Runs one attempt of a callable job in this thread and one more per extra replica;
    returns its outcome."""
    count = job.replicas
    replicas = [_Replica(i) for i in range(count)]
    job.data.replicas = replicas  # read by a stop under the job's lock, set before any runs
    results: list[Any] = [None] * count
    errors: list[BaseException | None] = [None] * count

    def run(replica: _Replica) -> None:
        try:  # a fresh context: what the job's code sets does not outlive it
            results[replica.index] = contextvars.Context().run(_run_replica, client, job, replica)
        except BaseException as exc:
            errors[replica.index] = exc

    threads = [
        threading.Thread(target=run, args=(r,), name=f"fray-{job.job_id}", daemon=True)
        for r in replicas[1:]
    ]
    for thread in threads:
        thread.start()
    run(replicas[0])
    for thread in threads:
        thread.join()
    if any(isinstance(error, Terminated) for error in errors):
        return Outcome.stopped()
    failed = [error for error in errors if error is not None]
    if failed:
        return Outcome.failed(failed[0], failed_tasks=len(failed))
    return Outcome.succeeded(results if count > 1 else results[0])


def _run_replica(client: LocalClient, job: JobRecord, replica: _Replica) -> Any:
    entry = job.request.entrypoint  # pyright: ignore[reportOptionalMemberAccess]
    assert entry.callable is not None
    _bound.bound.set((client, None))
    _bound.job.set((job.job_id, replica.index, job))
    sink = job.log if job.replicas == 1 else PrefixedSink(job.log, replica.index)
    previous = route_output(sink, client.echo_logs)
    replica.thread_id = threading.get_ident()
    try:
        with job.lock:
            if job.phase is not Phase.RUNNING:
                raise Terminated
            replica.in_user_code = True
        try:
            return entry.callable(*entry.args, **entry.kwargs)
        finally:
            with job.lock:
                replica.in_user_code = False
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
        raise
    except BaseException:
        if job.phase is not Phase.RUNNING:
            raise Terminated from None
        raise
    finally:
        restore_output(previous)
