"""A job's record and how an attempt ends: the state machine every backend shares.

A record's status moves PENDING → RUNNING → SUCCEEDED | FAILED | STOPPED and never leaves a
final status. Its current attempt is in one :class:`Phase` at a time::

    IDLE ─begin─▶ PLACING ─placed─▶ RUNNING ─report─▶ IDLE (another attempt) or ENDED
                     └───────┴── stop (terminate, timeout) ─▶ STOPPING ─report─▶ ENDED

Every change goes through a method that takes the record's lock. :meth:`JobRecord.settle`
is the one decision whether another attempt follows: a failed attempt is charged to
``max_retries_failure``, a preempted one to ``max_retries_preemption``, with the same
messages on every backend. An error a backend reports (a command's last output among it)
is kept with the values of secret-looking env vars masked.
"""

from __future__ import annotations

import enum
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fray._secrets import masker
from fray._types import AttemptInfo, JobInfo, JobRequest, JobStatus
from fray.backend._outcome import Observed, Outcome, OutcomeKind
from fray.backend._output import LogBuffer

if TYPE_CHECKING:
    from fray.backend._client import BaseClient

logger = logging.getLogger("fray")


def job_id_part(name: str) -> str:
    """``name`` as one part of a job id: ``/`` separates a parent's id from its children's,
    so ``%`` becomes ``%25`` and ``/`` becomes ``%2F`` (Marin names jobs after paths)."""
    return name.replace("%", "%25").replace("/", "%2F")


class Phase(enum.Enum):
    """Where a job's current attempt is."""

    IDLE = "idle"  # no attempt under way: before the first, or between two
    PLACING = "placing"  # started; waits for a place to run
    RUNNING = "running"
    STOPPING = "stopping"  # asked to stop; ends once the backend reports the attempt over
    ENDED = "ended"  # the final status is recorded


# The record's attributes that a JobInfo shows as they are.
_INFO_FIELDS = (
    *("job_id", "name", "status", "attempts", "preemptions", "failures", "error", "exit_code"),
    *("parent", "replicas", "submitted_at", "started_at", "finished_at"),
)


class JobRecord:
    """One job's bookkeeping: status, attempts, both retry budgets, output, value, children
    and the callbacks to run when it ends (the fields of :class:`~fray.JobInfo`, and more).

    Attributes:
        client: The client that runs it (its backend's hooks act on the record).
        request: What was submitted; ``None`` for a job this client found by id.
        phase: Where the current attempt is.
        begun: Attempts begun so far, placed or not (what tells the current one apart).
        cause: The user's exception behind a failure, where known.
        data: What the backend keeps for the job, given when the record is made and of one
            type for its whole life (its attempts change what it holds, not what it is).
        deadlines: The engine's timers for the current attempt.
        lock: Guards every field; held only briefly, never while a backend hook runs.
        is_done: Whether the job has ended and everything about its end is recorded.

    A client keeps its last 10,000 finished records, and each object the garbage collector
    tracks is looked at again by every full collection: a finished trivial job holds two
    (the record and its lock). Its log, its children's list, its done-callbacks and the lock
    a waiter blocks on are made when first needed; its attempts are kept as tuples (the
    benchmark row "fake: 10,000 jobs submitted + wait_all, per job").
    """

    __slots__ = (
        "_callbacks",
        "_children",
        "_final_info",
        "_history",
        "_log",
        "_placed_at",
        "_stop_as",
        "_task_failures",
        "_waiter",
        "attempts",
        "begun",
        "cause",
        "client",
        "data",
        "deadlines",
        "error",
        "exit_code",
        "failures",
        "finished_at",
        "is_done",
        "job_id",
        "lock",
        "name",
        "parent",
        "phase",
        "preemptions",
        "replicas",
        "request",
        "started_at",
        "status",
        "submitted_at",
        "value",
    )

    def __init__(
        self,
        client: BaseClient,
        job_id: str,
        request: JobRequest | None = None,
        *,
        parent: str | None = None,
        name: str | None = None,
        replicas: int | None = None,
        data: Any = None,
    ) -> None:
        self.client = client
        self.job_id = job_id
        self.request = request
        self.name = name if name is not None else request.name if request is not None else job_id
        self.parent = parent
        if replicas is None:
            replicas = request.replica_count if request is not None else 1
        self.replicas = replicas
        self.status = JobStatus.PENDING
        self.phase = Phase.IDLE
        self.attempts = self.begun = self.failures = self.preemptions = self._task_failures = 0
        self.error: str | None = None
        self.cause: BaseException | None = None
        self.exit_code: int | None = None
        self.value: Any = None
        self._log: LogBuffer | None = None
        self._children: list[JobRecord] | None = None
        self.data: Any = data
        self.deadlines: tuple[Any, ...] = ()
        self.lock = threading.Lock()
        self.is_done = False
        # Held from when the first thread waits for the job's end until the end.
        self._waiter: threading.Lock | None = None
        self._callbacks: list[Callable[[], None]] | None = None
        self._stop_as: Outcome | None = None
        self.submitted_at = time.time()
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self._placed_at: float | None = None
        # One (attempt, outcome kind, placed at, ended at, error, exit code) per attempt ended.
        self._final_info: JobInfo | None = None  # built once the job has ended
        self._history: tuple[
            tuple[int, OutcomeKind, float | None, float, str | None, int | None], ...
        ] = ()

    @property
    def log(self) -> LogBuffer:
        """The job's output lines (where the backend keeps them in this process); made on
        first use, closed if the job has ended."""
        log = self._log
        if log is None:
            with self.lock:
                log = self._output()
        return log

    def write(self, text: str, prefix: str = "") -> None:
        """Adds ``text`` to :attr:`log` (see :meth:`LogBuffer.write`): where a job's code
        writes through the record, a job that prints nothing has no log made."""
        if text:
            self.log.write(text, prefix)

    @property
    def children(self) -> Sequence[JobRecord]:
        """Records of the jobs submitted from this one in this process."""
        return self._children or ()

    # -- an attempt's life: the engine calls begin and stop, the backend placed and report --

    def begin(self) -> int | None:
        """IDLE → PLACING: begins a new attempt and returns its number (from 1); ``None``
        once the job is ending."""
        with self.lock:
            if self.phase is not Phase.IDLE:
                return None
            self.begun += 1
            self.phase = Phase.PLACING
            return self.begun

    def placed(self) -> bool:
        """The backend placed the current attempt: PLACING → RUNNING (status RUNNING);
        ``False`` if the attempt is no longer waiting to be placed."""
        with self.lock:
            if self.phase is not Phase.PLACING:
                return False
            self.phase = Phase.RUNNING
            self.status = JobStatus.RUNNING
            self.attempts += 1
            self._placed_at = now = time.time()
            if self.started_at is None:
                self.started_at = now
        self.client._placed(self)  # pyright: ignore[reportPrivateUsage]
        return True

    def report(self, outcome: Outcome) -> None:
        """The backend's one report that the current attempt is over (from any thread):
        the engine records it and starts another attempt if the budgets allow."""
        self.client._run_attempts(self, outcome)  # pyright: ignore[reportPrivateUsage]

    def stop(self, outcome: Outcome, *, attempt: int | None = None, placing: bool = False) -> bool:
        """Asks the job to end as ``outcome`` (stopped, timed out, not placed); returns
        whether an attempt is under way that the backend must now cancel. With no attempt
        under way the job ends at once. ``attempt``: only if that attempt is the current
        one; ``placing``: only while it waits to be placed."""
        with self.lock:
            if attempt is not None and attempt != self.begun:
                return False
            phase = self.phase
            if phase is Phase.ENDED or (placing and phase is not Phase.PLACING):
                return False
            if phase is Phase.STOPPING:
                if outcome.kind == "stopped":  # a stop asked for overrides a deadline
                    self._stop_as = outcome
                return False
            self._stop_as = outcome
            self.phase = Phase.STOPPING
        if phase is Phase.IDLE:
            self.settle(outcome)
            return False
        return True

    def settle(self, outcome: Outcome) -> bool:
        """Records how the current attempt ended and decides: ``True`` when another attempt
        follows, else the job is finished. The only place where the budgets are applied."""
        reported = self._masked(outcome.error) if outcome.error else None
        with self.lock:
            if self.phase is Phase.ENDED:
                return False
            if self.phase is Phase.STOPPING and self._stop_as is not None:
                outcome = self._stop_as  # made by the engine: nothing to mask
                reported = outcome.error
            kind = outcome.kind
            attempt = (self.begun, kind, self._placed_at, time.time(), reported, outcome.exit_code)
            self._history = (*self._history, attempt)
            self._placed_at = None
            if kind in ("succeeded", "failed", "preempted"):
                self.exit_code = outcome.exit_code
                if self.phase is Phase.PLACING:  # it ran, though never reported placed
                    self.attempts += 1
            status = JobStatus.FAILED
            if kind == "succeeded":
                self.value, status = outcome.value, JobStatus.SUCCEEDED
            elif kind == "stopped":
                status = JobStatus.STOPPED
            elif kind == "timed_out":
                timeout = self.request.timeout if self.request is not None else None
                cause = TimeoutError(
                    f"attempt {self.attempts} ran longer than timeout={timeout:g}s"
                )
                self._charge_failure(cause, f"TimeoutError: {cause}", self.replicas, retry=False)
            elif kind == "unplaced":
                self.cause, self.error = None, self._unplaced_error(reported)
            elif kind == "failed":
                error = reported or "failed"
                if self._charge_failure(outcome.cause, error, outcome.failed_tasks, retry=True):
                    return self._retry(f"failed ({error})")
            else:
                self.preemptions += 1
                self.error = reason = reported or "preempted"
                request = self.request
                budget = request.max_retries_preemption if request is not None else 0
                if self.preemptions <= budget:
                    return self._retry(f"was preempted ({reason})")
                self.cause = None
                self.error = (
                    f"preempted {self.preemptions} times, more than max_retries_preemption="
                    f"{budget}; last: {reason}"
                )
            self._finishing(status)
        self._finished()
        return False

    def end(self, status: JobStatus, error: str | None = None) -> bool:
        """Records a final status the backend decided itself (a cluster that retries on
        its own, a stop that did not take); ``False`` if the job had already ended."""
        with self.lock:
            if self.phase is Phase.ENDED:
                return False
            if error is not None:
                self.error = self._masked(error)
            self._finishing(status)
        self._finished()
        return True

    def observe(self, seen: Observed) -> bool:
        """Records what the cluster says of a job whose attempts it runs itself (see
        ``BaseClient.cluster_runs_attempts``, or a job found by id): counts only grow, a
        final status ends the job. Returns whether this ended it."""
        if self.request is not None and not self.client.cluster_runs_attempts:
            raise RuntimeError(
                f"{self.job_id}: its attempts are run by Fray's engine (begin, placed, report), "
                "not observed"
            )
        error = self._masked(seen.error) if seen.error else None
        with self.lock:
            if self.phase is Phase.ENDED:
                return False
            self.attempts = max(self.attempts, seen.attempts or 0)
            self.failures = max(self.failures, seen.failures or 0)
            self.preemptions = max(self.preemptions, seen.preemptions or 0)
            for field in ("replicas", "started_at", "exit_code", "cause", "name", "parent"):
                value = getattr(seen, field)
                if value is not None:
                    setattr(self, field, value)
            if error is not None:
                self.error = error
            status = seen.status
            if status is None or not status.is_finished:
                self.status = status or self.status
                return False
            self._finishing(status)
            self.finished_at = seen.finished_at or self.finished_at
        self._finished()
        return True

    def _masked(self, error: str) -> str:
        """``error`` without the values of the secret-looking env vars of the job's request
        and of this process (a command that printed its token fails with it as last output)."""
        env = self.request.environment if self.request is not None else None
        return masker([os.environ, env.env_vars if env is not None else {}])(error)

    def _charge_failure(
        self, cause: BaseException | None, error: str, tasks: int, *, retry: bool
    ) -> bool:
        """Under the lock: charges a failed attempt; returns whether the budgets allow a
        retry (never without ``retry``: a timed-out attempt ran into a deadline, as Iris
        enforces it, and would again)."""
        self.failures += 1
        self._task_failures += max(tasks, 1)
        self.cause, self.error = cause, error
        request = self.request
        if request is None or not retry:
            return False
        limit = request.max_task_failures
        if limit and self._task_failures > limit:
            self.error = (
                f"{self._task_failures} failed task attempts, more than max_task_failures="
                f"{limit}; last: {error}"
            )
            return False
        return self.failures <= request.max_retries_failure

    def _retry(self, what: str) -> bool:
        """Under the lock: the attempt is over and another follows."""
        self.phase = Phase.IDLE
        self._output().write(f"[fray] attempt {self.attempts} {what}; retrying\n")
        return True

    def _output(self) -> LogBuffer:
        """Under the lock: :attr:`log`."""
        if self._log is None:
            self._log = LogBuffer()
            self._log.closed = self.phase is Phase.ENDED
        return self._log

    def _unplaced_error(self, reason: str | None) -> str:
        """What a job not placed within ``scheduling_timeout`` fails with: what each replica
        asked for and, where the backend says, why no node took it."""
        request = self.request
        if request is None:
            return reason or "not placed"
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
        text = (
            f"not placed within scheduling_timeout={request.scheduling_timeout or 0:g}s: each "
            f"of its {self.replicas} replica(s) asks for {asked}"
        )
        return f"{text}; the cluster says: {reason}" if reason else text

    def _finishing(self, status: JobStatus) -> None:
        """Under the lock: records the final status."""
        self.phase = Phase.ENDED
        self.status = status
        self.finished_at = time.time()
        self._stop_as = None

    def _finished(self) -> None:
        """After the final status: the client's bookkeeping, then waiters, then callbacks."""
        if self._log is not None:  # one made from now on is made closed
            self._log.close()
        client = self.client
        client._job_ended(self)  # pyright: ignore[reportPrivateUsage]
        with self.lock:
            self.is_done = True
            waiter, self._waiter = self._waiter, None
            callbacks, self._callbacks = self._callbacks or [], None
        if waiter is not None:
            waiter.release()
        client._after_end(self)  # pyright: ignore[reportPrivateUsage]
        for callback in callbacks:
            try:
                callback()
            except Exception:
                logger.exception("a done-callback of %s raised", self.job_id)

    # -- waiting and reading -----------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the job has ended (or ``timeout`` passed); returns whether it has."""
        if self.is_done:
            return True
        with self.lock:
            if self.is_done:
                return True
            if self._waiter is None:  # a lock held until the end (an Event makes a Condition)
                self._waiter = threading.Lock()
                self._waiter.acquire()
            waiter = self._waiter
        if waiter.acquire(True, -1 if timeout is None else max(timeout, 0.0)):
            waiter.release()  # the next waiter's turn
            return True
        return self.is_done

    def add_done_callback(self, callback: Callable[[], None]) -> bool:
        """Registers ``callback`` for the job's end; ``False`` if it has already ended."""
        with self.lock:
            if self.phase is Phase.ENDED:
                return False
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append(callback)
            return True

    def add_child(self, child: JobRecord) -> None:
        """Records a job submitted from this one."""
        with self.lock:
            if self._children is None:
                self._children = []
            self._children.append(child)

    def lines(self, include_children: bool, tail: int | None) -> list[str]:
        """The output lines so far (the last ``tail``), with those of the jobs submitted from
        this one (``include_children``) prefixed ``[child-id]`` and interleaved by time."""
        if not include_children:
            lines = [line for _ts, line in self.log.snapshot()]
        else:
            logs = [("", self)] + [(f"[{c.job_id}] ", c) for c in self.descendants()]
            merged = [
                (ts, order, i, tag + line)
                for order, (tag, record) in enumerate(logs)
                for i, (ts, line) in enumerate(record.log.snapshot())
            ]
            lines = [line for *_key, line in sorted(merged)]
        return lines if tail is None else lines[len(lines) - tail :] if tail else []

    def descendants(self) -> list[JobRecord]:
        """Every job submitted from this one in this process, at any depth, parents first."""
        found: list[JobRecord] = []
        with self.lock:
            stack = list(self.children)
        while stack:
            child = stack.pop(0)
            found.append(child)
            with child.lock:
                stack.extend(child.children)
        return found

    def info(self, **update: Any) -> JobInfo:
        """A snapshot of the record (``update`` overrides fields, e.g. a pending reason).
        An ended job's is built once and kept: a history of 10,000 finished jobs is listed
        without building 10,000 models each time."""
        with self.lock:
            if self._final_info is not None and not update:
                return self._final_info
            ended = self.phase is Phase.ENDED
            fields = {name: getattr(self, name) for name in _INFO_FIELDS}
            fields["children"] = tuple(child.job_id for child in self.children)
            history = self._history
        fields["attempt_history"] = tuple(
            AttemptInfo(
                attempt=attempt,
                outcome=kind,
                started_at=started,
                finished_at=finished,
                error=error,
                exit_code=code,
            )
            for attempt, kind, started, finished, error, code in history
        )
        info = JobInfo(**(fields | update))
        if ended and not update:
            self._final_info = info
        return info

    def __repr__(self) -> str:
        return f"JobRecord({self.job_id!r}, {self.status.value}, {self.phase.value})"
