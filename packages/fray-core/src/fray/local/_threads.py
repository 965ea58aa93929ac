"""Thread jobs: a callable run in threads of the driver, its ``print`` routed to its log,
stopped by an exception injected into its threads."""

from __future__ import annotations

import collections
import contextlib
import contextvars
import ctypes
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fray.backend import PrefixedSink, bind_client, restore_output, route_output
from fray.local._jobs import LocalJob, Replica, current_job, current_task_index

if TYPE_CHECKING:
    from fray.local._client import LocalClient

__all__ = ["JobThreads", "Reserved", "Terminated", "attempt_thread", "inject_stop"]


class Terminated(BaseException):
    """Raised inside a thread job that was terminated (a BaseException, so ``except
    Exception`` in user code does not swallow it)."""


def inject_stop(thread_id: int) -> None:
    """Raises :class:`Terminated` in the thread ``thread_id`` at its next check of the
    interpreter's eval breaker (a Python call or loop)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(Terminated)
    )


def _deliver_pending() -> None:
    """A Python call: an exception injected into the calling thread is raised here."""


class Reserved:
    """A thread's turn whose work is given after the turn was queued (see
    :meth:`JobThreads.reserve`)."""

    __slots__ = ("_given", "_work")

    def __init__(self) -> None:
        self._work: tuple[Callable[..., None], tuple[Any, ...]] | None = None
        self._given = threading.Lock()
        self._given.acquire()

    def give(self, fn: Callable[..., None] | None, *args: Any) -> None:
        """The work for the turn (``None``: nothing, the caller gave up)."""
        if fn is not None:
            self._work = (fn, args)
        self._given.release()

    def run(self) -> None:
        self._given.acquire()  # at once unless the caller is still preparing the work
        work, self._work = self._work, None
        if work is not None:
            work[0](*work[1])


class JobThreads:
    """Runs jobs on at most ``size`` reused threads; more wait their turn (PENDING).

    Unlike ``ThreadPoolExecutor``'s, the threads are daemons: a thread job blocked for good
    must not keep the driver from exiting (the interpreter joins non-daemon threads first),
    and when the driver exits its process jobs go too (see ``_reaper.py``). Threads are never
    retired while the client is open: a job's processes are tied to the thread that started
    them (``PR_SET_PDEATHSIG`` fires when that thread ends).
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._work: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]] | None]
        self._work = queue.SimpleQueue()
        # One token per thread that has finished a job and is waiting for work: taking one is
        # a C call (a Semaphore's acquire and release each run a Condition in Python).
        self._idle: collections.deque[None] = collections.deque()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        self._work.put((fn, args))
        try:
            self._idle.pop()
        except IndexError:
            pass
        else:
            return  # an idle thread takes it
        with self._lock:
            if len(self._threads) < self._size:
                thread = threading.Thread(
                    target=self._run, name=f"fray-job-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def reserve(self) -> Reserved:
        """Wakes a thread (or queues a turn) for work given later with
        :meth:`Reserved.give`: the thread's wake-up, tens of microseconds, overlaps the
        caller's remaining bookkeeping. The work must always be given (``None``: none)."""
        reserved = Reserved()
        self.submit(reserved.run)
        return reserved

    def _run(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            fn, args = item
            # The job records its own outcome; nothing may end the thread early.
            with contextlib.suppress(BaseException):
                fn(*args)
            # An idle thread must not keep its last job (and so its value and output) alive
            # until it takes another one.
            del item, fn, args
            self._idle.append(None)

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            threads = list(self._threads)
        for _ in threads:
            self._work.put(None)
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():  # shutdown() from inside a job
                    thread.join()


def attempt_thread(client: LocalClient, job: LocalJob) -> tuple[Any, ...]:
    """Runs one attempt of a callable job in threads (one per replica); returns its
    outcome: ``("ok", value)``, ``("failed", exc, error, None, failed replicas)`` or
    ``("stopped",)``."""
    count = job.request.replica_count
    if count == 1:  # the common case, without the bookkeeping of several threads
        replica = Replica(0)
        job.replicas = [replica]
        try:
            value = contextvars.Context().run(_run_replica, client, job, replica)
        except Terminated:
            return ("stopped",)
        except BaseException as error:
            return ("failed", error, f"{type(error).__name__}: {error}", None, 1)
        return ("ok", value)
    replicas = [Replica(i) for i in range(count)]
    job.replicas = replicas
    results: list[Any] = [None] * count
    errors: list[BaseException | None] = [None] * count

    def run(replica: Replica) -> None:
        try:
            ctx = contextvars.Context()
            results[replica.index] = ctx.run(_run_replica, client, job, replica)
        except BaseException as exc:
            errors[replica.index] = exc

    threads: list[threading.Thread] = []
    for replica in replicas[1:]:
        thread = threading.Thread(
            target=run, args=(replica,), name=f"fray-{job.job_id}", daemon=True
        )
        threads.append(thread)
        thread.start()
    run(replicas[0])
    for thread in threads:
        thread.join()
    for error in errors:
        if isinstance(error, Terminated):
            return ("stopped",)
    failed = [error for error in errors if error is not None]
    if failed:
        error = failed[0]
        return ("failed", error, f"{type(error).__name__}: {error}", None, len(failed))
    return ("ok", results[0] if count == 1 else results)


def _run_replica(client: LocalClient, job: LocalJob, replica: Replica) -> Any:
    entry = job.request.entrypoint
    assert entry.callable is not None
    bind_client(client)
    current_job.set(job)
    current_task_index.set(replica.index)
    replica.thread_id = threading.get_ident()
    try:
        sink = job.log if job.request.replica_count == 1 else PrefixedSink(job.log, replica.index)
        previous = route_output(sink, client.echo_logs)
        try:
            with job.lock:
                if job.stop_requested or job.timed_out == job.attempts:
                    raise Terminated
                replica.in_user_code = True
            try:
                return entry.callable(*entry.args, **entry.kwargs)
            finally:
                with job.lock:
                    replica.in_user_code = False
                    signalled = job.signalled
                if signalled:
                    # The user code may have returned before a stop injected into it
                    # arrived: take it here, where it changes nothing. (Clearing it with
                    # PyThreadState_SetAsyncExc(id, NULL) instead leaves CPython 3.11's
                    # eval breaker set for good: every thread then slows down, and a
                    # traced one, e.g. under a debugger or hypothesis, spins forever.)
                    # Not contextlib.suppress: its __enter__ is a Python call, where
                    # the stop would be raised outside the suppression.
                    try:  # noqa: SIM105
                        _deliver_pending()
                    except Terminated:
                        pass
        finally:
            restore_output(previous)
    except Terminated:
        raise
    except BaseException:
        if job.stop_requested:
            raise Terminated from None
        raise
