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
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fray._secrets import masker
from fray._types import AttemptInfo, JobInfo, JobRequest, JobStatus
from fray.backend._outcome import Observed, Outcome, OutcomeKind

if TYPE_CHECKING:
    from fray.backend._client import BaseClient

logger = logging.getLogger("fray")


def job_id_part(name: str) -> str:
    """``name`` as one part of a job id: ``/`` separates a parent's id from its children's,
    so ``%`` becomes ``%25`` and ``/`` becomes ``%2F`` (Marin names jobs after paths)."""
    return name.replace("%", "%25").replace("/", "%2F")


_last_stamp = 0.0


def _stamp() -> float:
    """The time now, later than every stamp before it: lines of a job and of its children,
    written one after another, interleave in that order."""
    global _last_stamp
    now = time.time()
    _last_stamp = now = now if now > _last_stamp else _last_stamp + 1e-6
    return now


class LogBuffer:
    """An append-only list of timestamped lines that can be read while it grows.

    Partial writes are joined until a newline, per writing thread: the replicas of a job (and
    the readers of its processes) write at once, and one's unfinished line must not take in
    another's. :meth:`close` keeps last lines that have no newline, so nothing a job printed
    is lost. A closed buffer keeps its last :data:`KEEP_LINES` lines in memory and the rest
    in a private temporary file (removed with the buffer), so a client's history of
    finished jobs costs little memory however much they printed.
    """

    KEEP_LINES = 1_000

    __slots__ = ("__weakref__", "_lines", "_lock", "_older", "_partial", "_waiting", "closed")

    def __init__(self) -> None:
        self._lines: list[tuple[float, str]] = []
        # By thread: what it wrote after its last newline, and the prefix of its lines.
        self._partial: dict[int, tuple[str, str]] = {}
        self._lock = threading.Lock()
        # Made by the first reader that waits: most jobs' output is never followed, and a
        # Condition per job costs a job a tenth of its time in the benchmark row "trivial
        # job submit(...).wait(), one at a time".
        self._waiting: threading.Condition | None = None
        self.closed = False
        # Once closed with more than KEEP_LINES lines: the file holding the older ones, and
        # how many.
        self._older: tuple[str, int] | None = None

    def __len__(self) -> int:
        return len(self._lines) + (self._older[1] if self._older else 0)

    def write(self, text: str, prefix: str = "") -> None:
        """Adds ``text``; each line it completes becomes a line, with ``prefix`` first (a
        replica's ``[i] `` where a job has several)."""
        if not text:
            return
        me = threading.get_ident()
        with self._lock:
            pending = self._partial.pop(me, None)
            if pending:
                text = pending[0] + text
            *complete, rest = text.split("\n")
            if rest:
                self._partial[me] = (rest, prefix)
            if complete:
                now = _stamp()
                self._lines.extend((now, prefix + line) for line in complete)
                if self._waiting is not None:
                    self._waiting.notify_all()

    def close(self) -> None:
        """No more output: unfinished last lines become lines."""
        with self._lock:
            if self._partial:
                now = _stamp()
                self._lines.extend((now, prefix + rest) for rest, prefix in self._partial.values())
                self._partial.clear()
            self.closed = True
            if self._waiting is not None:
                self._waiting.notify_all()
            if len(self._lines) > self.KEEP_LINES:
                self._spill()

    def _spill(self) -> None:
        """Under the lock: moves all but the last lines to a file only this user can read."""
        older = self._lines[: -self.KEEP_LINES]
        fd, path = tempfile.mkstemp(prefix="fray-log-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape", newline="\n") as out:
            out.writelines(f"{stamp!r} {line}\n" for stamp, line in older)
        del self._lines[: -self.KEEP_LINES]
        self._older = (path, len(older))
        weakref.finalize(self, os.unlink, path)

    def snapshot(self) -> list[tuple[float, str]]:
        """The ``(time, line)`` pairs so far (read back from the file where spilled)."""
        with self._lock:
            lines, older = list(self._lines), self._older
        if older is None:
            return lines
        with open(older[0], encoding="utf-8", errors="surrogateescape", newline="\n") as spilled:
            kept = [text.rstrip("\n").split(" ", 1) for text in spilled]
        return [(float(stamp), line) for stamp, line in kept] + lines

    def wait_for_more(self, count: int, timeout: float) -> None:
        """Waits up to ``timeout`` for the buffer to hold more than ``count`` lines."""
        with self._lock:
            if len(self._lines) <= count and not self.closed:
                if self._waiting is None:
                    self._waiting = threading.Condition(self._lock)
                self._waiting.wait(timeout)


class _Done:
    """That a job has ended, for threads that block on it: a lock held until then (a
    ``threading.Event`` builds a Condition per job: a tenth of a job's time in the benchmark
    row "trivial job submit(...).wait(), one at a time")."""

    __slots__ = ("_lock", "flag")

    def __init__(self) -> None:
        self.flag = False
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        self.flag = True
        self._lock.release()

    def wait(self, timeout: float | None) -> bool:
        if self.flag:
            return True
        if self._lock.acquire(True, -1 if timeout is None else max(timeout, 0.0)):
            self._lock.release()  # the next waiter's turn
            return True
        return self.flag


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
        log: The job's output lines (where the backend keeps them in this process).
        children: Records of the jobs submitted from this one in this process.
        data: What the backend keeps for the job, given when the record is made and of one
            type for its whole life (its attempts change what it holds, not what it is).
        deadlines: The engine's timers for the current attempt.
        lock: Guards every field; held only briefly, never while a backend hook runs.
    """

    __slots__ = (
        "_callbacks",
        "_done",
        "_final_info",
        "_history",
        "_placed_at",
        "_stop_as",
        "_task_failures",
        "attempts",
        "begun",
        "cause",
        "children",
        "client",
        "data",
        "deadlines",
        "error",
        "exit_code",
        "failures",
        "finished_at",
        "job_id",
        "lock",
        "log",
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
        self.log = LogBuffer()
        self.children: list[JobRecord] = []
        self.data: Any = data
        self.deadlines: list[Any] = []
        self.lock = threading.Lock()
        self._done = _Done()
        self._callbacks: list[Callable[[], None]] = []
        self._stop_as: Outcome | None = None
        self.submitted_at = time.time()
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self._placed_at: float | None = None
        # One (attempt, outcome kind, placed at, ended at, error, exit code) per attempt ended.
        self._final_info: JobInfo | None = None  # built once the job has ended
        self._history: list[
            tuple[int, OutcomeKind, float | None, float, str | None, int | None]
        ] = []

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
            self._history.append(
                (self.begun, kind, self._placed_at, time.time(), reported, outcome.exit_code)
            )
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
        self.log.write(f"[fray] attempt {self.attempts} {what}; retrying\n")
        return True

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
        self.log.close()
        client = self.client
        client._job_ended(self)  # pyright: ignore[reportPrivateUsage]
        self._done.set()
        with self.lock:
            callbacks, self._callbacks = self._callbacks, []
        client._after_end(self)  # pyright: ignore[reportPrivateUsage]
        for callback in callbacks:
            try:
                callback()
            except Exception:
                logger.exception("a done-callback of %s raised", self.job_id)

    # -- waiting and reading -----------------------------------------------------------------

    @property
    def is_done(self) -> bool:
        """Whether the job has ended and everything about its end is recorded."""
        return self._done.flag

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the job has ended (or ``timeout`` passed); returns whether it has."""
        return self._done.wait(timeout)

    def add_done_callback(self, callback: Callable[[], None]) -> bool:
        """Registers ``callback`` for the job's end; ``False`` if it has already ended."""
        with self.lock:
            if self.phase is Phase.ENDED:
                return False
            self._callbacks.append(callback)
            return True

    def add_child(self, child: JobRecord) -> None:
        """Records a job submitted from this one."""
        with self.lock:
            self.children.append(child)

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
            history = list(self._history)
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
