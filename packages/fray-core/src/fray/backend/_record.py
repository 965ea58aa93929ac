"""The job record: one job's bookkeeping and its state machine, the same on every backend.

A record moves PENDING → RUNNING → SUCCEEDED | FAILED | STOPPED and never leaves a final
status. Attempts are counted as they start; each failed or preempted attempt is charged to
its own budget (``max_retries_failure``, ``max_retries_preemption``), and the record alone
decides whether another attempt follows, with the same messages on every backend.

Records are slotted and hold no container they do not need: a driver keeps thousands
(see ``fray.backend.JobHistory``). ``done`` is one shared object until a thread blocks on the job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from fray._types import JobInfo, JobRequest, JobStatus

__all__ = ["JobRecord"]

logger = logging.getLogger("fray.backend")


class _Done:
    """That a job has ended, for threads that block on it: ``flag`` is read without a lock.

    Each waiter blocks on a lock of its own that :meth:`set` releases (what
    ``threading.Event`` does beneath its ``Condition``, without building one per job).
    """

    __slots__ = ("_waiters", "flag")
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.flag = False
        self._waiters: list[threading.Lock] = []

    def set(self) -> None:
        with self._lock:
            self.flag = True
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.release()

    def wait(self, timeout: float | None = None) -> bool:
        if self.flag:
            return True
        waiter = threading.Lock()
        waiter.acquire()
        with self._lock:
            if self.flag:
                return True
            self._waiters.append(waiter)
        if timeout is None:
            woken = waiter.acquire()
        elif timeout > 0:
            woken = waiter.acquire(True, timeout)
        else:
            woken = waiter.acquire(False)
        if not woken:
            with self._lock:  # unless set() has just taken it to release it
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        return woken or self.flag


class _Pending:
    """A job's ``done`` until it ends or a thread blocks on it: one shared object."""

    __slots__ = ()
    flag = False


_PENDING = _Pending()
_FINISHED = _Done()
_FINISHED.flag = True


class JobRecord:
    """One job's bookkeeping: status, attempts, both retry budgets, timestamps, value,
    error and the callbacks to run when it ends.

    Backends subclass it to hold what only they need (replicas, Ray refs, ...) and may
    override the hooks :meth:`note`, :meth:`_on_end` and :meth:`_after_end`.

    Attributes:
        job_id: The job's id (``parent/child`` for a job submitted from a job).
        request: What was submitted.
        parent: The parent job's id, if any.
        status: The current status.
        attempts: Attempts started so far.
        failures: Attempts that failed on their own.
        preemptions: Attempts lost to preemption.
        error: The last error text.
        cause: The user's exception behind a failure, where known.
        exit_code: The last attempt's exit code, where known.
        value: The callable's return value once SUCCEEDED.
        lock: Guards every field; held only briefly.
    """

    __slots__ = (
        "attempts",
        "callbacks",
        "cause",
        "done",
        "ended",
        "error",
        "exit_code",
        "failures",
        "finished_at",
        "job_id",
        "lock",
        "parent",
        "preemptions",
        "request",
        "started_at",
        "status",
        "stop_requested",
        "submitted_at",
        "task_failures",
        "value",
    )

    def __init__(self, job_id: str, request: JobRequest, parent: str | None = None) -> None:
        self.job_id = job_id
        self.request = request
        self.parent = parent
        self.status = JobStatus.PENDING
        self.ended = False  # a final status is recorded (under ``lock``)
        self.attempts = 0
        self.failures = 0
        self.task_failures = 0
        self.preemptions = 0
        self.error: str | None = None
        self.cause: BaseException | None = None
        self.exit_code: int | None = None
        self.value: Any = None
        self.lock = threading.Lock()
        self.done: _Pending | _Done = _PENDING
        self.callbacks: Sequence[Callable[[], None]] = ()  # replaced, never mutated
        self.stop_requested = False
        self.submitted_at = time.time()
        self.started_at: float | None = None
        self.finished_at: float | None = None

    # -- the state machine -------------------------------------------------------------------

    def mark_running(self) -> bool:
        """PENDING → RUNNING (stamps ``started_at``); ``False`` if it has ended or is being
        stopped. Call it under no lock."""
        with self.lock:
            if self.ended or self.stop_requested:
                return False
            if self.started_at is None:
                self.started_at = time.time()
            self.status = JobStatus.RUNNING
            return True

    def begin_attempt(self) -> int:
        """Counts a new attempt and returns its number (from 1)."""
        self.attempts += 1
        return self.attempts

    def unplaced_error(self, reason: str | None) -> str:
        """The error of a job that was not placed within ``JobRequest.scheduling_timeout``:
        what each replica asked for and, where the backend says, why no node took it."""
        request = self.request
        res = request.resources
        asked = f"cpu={res.cpu:g}, ram={res.ram}"
        device = res.device
        if device.kind == "gpu":
            asked += f", {getattr(device, 'count', 1)}× GPU {device.variant}"
        elif device.kind == "tpu":
            asked += f", TPU {device.variant}"
        if res.regions:
            asked += f", regions={list(res.regions)}"
        if res.zone:
            asked += f", zone={res.zone}"
        if not res.preemptible:
            asked += ", preemptible=False"
        waited = request.scheduling_timeout or 0.0
        text = (
            f"not placed within scheduling_timeout={waited:g}s: each of its "
            f"{request.replica_count} replica(s) asks for {asked}"
        )
        return f"{text}; the cluster says: {reason}" if reason else text

    def timeout_error(self) -> TimeoutError:
        """What a job whose current attempt ran past ``JobRequest.timeout`` fails with."""
        timeout = self.request.timeout or 0.0
        return TimeoutError(f"attempt {self.attempts} ran longer than timeout={timeout:g}s")

    def on_timeout(self, failed_tasks: int = 1) -> None:
        """Records that the current attempt ran past ``JobRequest.timeout`` and was stopped:
        a failure that ends the job whatever retries are left (a deadline, as Iris enforces
        it: an attempt that ran out of time once would again). The caller then finishes the
        job FAILED."""
        cause = self.timeout_error()
        self.failures += 1
        self.task_failures += max(failed_tasks, 1)
        self.cause, self.error, self.exit_code = cause, f"TimeoutError: {cause}", None

    def on_failure(
        self,
        cause: BaseException | None,
        error: str,
        code: int | None = None,
        *,
        failed_tasks: int = 1,
    ) -> bool:
        """Charges a failed attempt to ``max_retries_failure`` (and its ``failed_tasks``
        failed replicas to the job-wide ``max_task_failures``); returns whether to retry."""
        self.failures += 1
        self.task_failures += max(failed_tasks, 1)
        self.cause, self.error, self.exit_code = cause, error, code
        limit = self.request.max_task_failures
        if limit and self.task_failures > limit:
            self.error = (
                f"{self.task_failures} failed task attempts, more than max_task_failures="
                f"{limit}; last: {error}"
            )
            return False
        if self.failures <= self.request.max_retries_failure:
            self.note(f"[fray] attempt {self.attempts} failed ({error}); retrying")
            return True
        return False

    def on_preemption(self, error: str, code: int | None = None) -> bool:
        """Charges a preempted attempt to ``max_retries_preemption``; returns whether to
        retry. When the budget is spent, ``error`` says so."""
        self.preemptions += 1
        self.error = error
        if code is not None:
            self.exit_code = code
        if self.preemptions <= self.request.max_retries_preemption:
            self.note(f"[fray] attempt {self.attempts} was preempted ({error}); retrying")
            return True
        self.cause = None
        self.error = (
            f"preempted {self.preemptions} times, more than max_retries_preemption="
            f"{self.request.max_retries_preemption}; last: {error}"
        )
        return False

    def finish(self, status: JobStatus) -> bool:
        """Records the final status (once: later calls change nothing and return ``False``),
        wakes waiters and runs the done-callbacks."""
        with self.lock:
            if self.ended:
                return False
            self.ended = True
            self.status = status
            self.finished_at = time.time()
            callbacks, self.callbacks = self.callbacks, ()
        self._on_end()
        with self.lock:
            done, self.done = self.done, _FINISHED
        if isinstance(done, _Done):
            done.set()
        self._after_end()
        for callback in callbacks:
            try:
                callback()
            except Exception:
                logger.exception("a done-callback of job %s raised", self.job_id)
        return True

    # -- waiting -----------------------------------------------------------------------------

    @property
    def is_done(self) -> bool:
        """Whether the job has ended and everything about its end is recorded."""
        return self.done.flag

    def wait_done(self, timeout: float | None = None) -> bool:
        """Blocks until the job has ended (or ``timeout`` passed); returns whether it has."""
        done = self.done
        if done.flag:
            return True
        with self.lock:  # against finish()'s swap: an event made here is always set
            done = self.done
            if isinstance(done, _Pending):
                done = self.done = _Done()
        return done.wait(timeout)

    def add_done_callback(self, callback: Callable[[], None]) -> bool:
        """Registers ``callback`` for the job's end; ``False`` if it has already ended."""
        with self.lock:
            if self.ended:
                return False
            self.callbacks = [*self.callbacks, callback]
            return True

    # -- reading -----------------------------------------------------------------------------

    def info(self, children: Sequence[str] = ()) -> JobInfo:
        """A snapshot of the record."""
        return JobInfo(
            job_id=self.job_id,
            name=self.request.name,
            status=self.status,
            attempts=self.attempts,
            preemptions=self.preemptions,
            failures=self.failures,
            error=self.error,
            exit_code=self.exit_code,
            parent=self.parent,
            children=tuple(children),
            replicas=self.request.replica_count,
            submitted_at=self.submitted_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
        )

    # -- hooks -------------------------------------------------------------------------------

    def note(self, line: str) -> None:
        """Adds a line of Fray's own to the job's output (retry notices); a no-op unless the
        backend keeps output in the record."""

    def _on_end(self) -> None:
        """Called once the final status is recorded, before waiters wake (e.g. to update
        the client's history, so that a woken waiter sees it)."""

    def _after_end(self) -> None:
        """Called after waiters wake and before the done-callbacks (e.g. to stop children)."""
