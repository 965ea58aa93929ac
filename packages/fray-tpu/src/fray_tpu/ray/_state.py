# pyright: standard
"""The job's bookkeeping: one small actor per TPU job, next to the driver.

It holds what must outlive a supervisor run (the supervisor is re-run when its node dies):
the job's :class:`fray.backend.JobRecord` (status, attempts and both budgets), the first
problem, the stop request, the hosts' preemption reports and the job's output lines. Every
decision to retry or give up is the record's (``on_failure``/``on_preemption``, with the
same messages as on every backend), taken here, so a budget of N retries means N+1
attempts whatever process happens to ask.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import cloudpickle
import ray

from fray import JobRequest, JobStatus
from fray.backend import JobRecord

__all__ = ["JobState"]

_MAX_LOG_LINES = 200_000


class _StateRecord(JobRecord):
    """The job's record as its state actor keeps it: Fray's retry notices go to the job's
    output, and ``reason`` says which budget (or what else) ended it."""

    __slots__ = ("_emit", "reason")

    def __init__(self, job_id: str, request: JobRequest, emit: Callable[[str], None]) -> None:
        super().__init__(job_id, request)
        self._emit = emit
        self.reason: str | None = None  # failure | preemption | scheduling | internal

    def note(self, line: str) -> None:
        self._emit(line)


class _JobStateImpl:
    def __init__(self, job_id: str, request: JobRequest) -> None:
        self._cond = threading.Condition()
        self.record = _StateRecord(job_id, request, self._emit)
        self.in_flight = False
        self.supervisor_runs = 0
        self.first_cause: bytes | None = None
        self.placement: list[dict[str, Any]] = []
        self.history: list[dict[str, Any]] = []
        self.lines: deque[str] = deque(maxlen=_MAX_LOG_LINES)
        self.dropped = 0
        # gang token -> the first host that said its VM is being preempted
        self.preempted: dict[str, str] = {}

    # -- supervisor side -------------------------------------------------------------------

    def supervisor_started(self) -> dict[str, Any]:
        """Called first by every supervisor run; a re-run means the previous one was lost."""
        with self._cond:
            self.supervisor_runs += 1
            if self.supervisor_runs > 1 and not self.record.ended:
                # The supervisor (and with it the gang it owned) died with its node.
                self._emit(f"[fray-tpu] supervisor restarted (run {self.supervisor_runs})")
                lost = f"attempt {self.record.attempts}" if self.in_flight else "slice acquisition"
                self._charge("preemption", f"the TPU supervisor's node was lost during {lost}")
            return self._snapshot()

    def begin_attempt(self, placement: list[dict[str, Any]]) -> dict[str, Any]:
        """A gang was claimed and is about to launch; returns the snapshot (``go`` or not)."""
        with self._cond:
            record = self.record
            if not record.mark_running():  # it has ended, or is being stopped
                return {**self._snapshot(), "go": False}
            attempt = record.begin_attempt()
            self.in_flight = True
            self.placement = placement
            self.history.append({"attempt": attempt, "placement": placement})
            self._emit(
                f"[fray-tpu] attempt {attempt} on "
                + ", ".join(sorted({p["slice"] for p in placement}))
            )
            self._cond.notify_all()
            return {**self._snapshot(), "go": True}

    def end_attempt(
        self, kind: str, error: str, cause: bytes | None, code: int | None = None
    ) -> dict[str, Any]:
        """Charges a lost attempt to one budget (``kind``: ``"preemption"`` or
        ``"failure"``; ``"timeout"`` ends the job); the snapshot says whether to retry.
        ``cause`` is the user's exception, pickled (kept if it is the first problem)."""
        with self._cond:
            if not self.record.ended:
                self.in_flight = False
                if self.first_cause is None:
                    self.first_cause = cause
                self._charge(kind, error, code)
            self.preempted.clear()  # reports about the ended attempt's gang no longer matter
            self._cond.notify_all()
            return self._snapshot()

    def finish(self, status: str, error: str | None = None, reason: str | None = None) -> None:
        """Records the final status (first call wins)."""
        with self._cond:
            record = self.record
            if record.ended:
                return
            self.in_flight = False
            if error is not None:
                record.error = error
            if reason is not None:
                record.reason = reason
            record.finish(JobStatus(status))
            self._cond.notify_all()

    def stop_is_requested(self) -> bool:
        with self._cond:
            return self.record.stop_requested

    def watch(self, gang_token: str) -> dict[str, Any]:
        """What the supervisor checks while a gang runs: the stop request, and which host
        (if any) of gang ``gang_token`` said its VM is being preempted."""
        with self._cond:
            return {
                "stop_requested": self.record.stop_requested,
                "preempted": self.preempted.get(gang_token),
            }

    # -- host side -------------------------------------------------------------------------

    def report_preempted(self, gang_token: str, where: str) -> None:
        """A host of gang ``gang_token`` was told by the metadata server that its VM is being
        preempted (the first report per gang is kept)."""
        with self._cond:
            self.preempted.setdefault(gang_token, where)
            self._cond.notify_all()

    # -- driver side -----------------------------------------------------------------------

    def request_stop(self) -> None:
        with self._cond:
            record = self.record
            with record.lock:  # mark_running() reads it under the record's lock
                record.stop_requested = True
            self._cond.notify_all()

    def snapshot(self) -> dict[str, Any]:
        with self._cond:
            return self._snapshot()

    def final(self) -> dict[str, Any]:
        """Everything a handle keeps once the supervisor has returned, in one call: the
        snapshot, every line still held (with how many were dropped before them) and the
        first cause. The handle then releases this actor."""
        with self._cond:
            return {
                "snapshot": self._snapshot(),
                "lines": list(self.lines),
                "dropped": self.dropped,
                "first_cause": self.first_cause,
            }

    def wait_for_attempt(self, attempt: int, timeout: float) -> dict[str, Any]:
        """Blocks until attempt ``attempt`` started or the job finished (or ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.record.attempts < attempt and not self.record.ended:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return self._snapshot()

    # -- logs ------------------------------------------------------------------------------

    def append_logs(self, lines: list[str]) -> None:
        with self._cond:
            for line in lines:
                self._emit(line)
            self._cond.notify_all()

    def read_logs(self, start: int, wait_s: float) -> tuple[list[str], int, bool]:
        """Lines from absolute index ``start`` and the index after them; waits up to
        ``wait_s`` for new ones. The flag says whether the job has ended."""
        deadline = time.monotonic() + wait_s
        with self._cond:
            while self.dropped + len(self.lines) <= start and not self.record.ended:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            first = max(start - self.dropped, 0)
            batch = list(self.lines)[first:]
            return batch, self.dropped + len(self.lines), self.record.ended

    # -- internals -------------------------------------------------------------------------

    def _emit(self, line: str) -> None:
        if len(self.lines) == self.lines.maxlen:
            self.dropped += 1
        self.lines.append(line)

    def _charge(self, kind: str, error: str, code: int | None = None) -> None:
        """The record decides: another attempt, or the end of the job (its error says why)."""
        record = self.record
        if kind == "preemption":
            retry = record.on_preemption(error, code)
        elif kind == "timeout":  # a deadline: the job ends, and its TimeoutError is the cause
            record.on_timeout(record.request.replica_count)
            self.first_cause = cloudpickle.dumps(record.cause)
            retry = False
        else:
            retry = record.on_failure(None, error, code)  # the cause stays pickled here
        if not retry:
            record.reason = kind
            record.finish(JobStatus.FAILED)
            self._emit(f"[fray-tpu] giving up: {record.error}")

    def _snapshot(self) -> dict[str, Any]:
        record = self.record
        return {
            "job_id": record.job_id,
            "status": record.status.value,
            "attempts": record.attempts,
            "preemptions": record.preemptions,
            "failures": record.failures,
            "error": record.error,
            "exit_code": record.exit_code,
            "reason": record.reason,
            "in_flight": self.in_flight,
            "stop_requested": record.stop_requested,
            "supervisor_runs": self.supervisor_runs,
            "started_at": record.started_at,
            "finished_at": record.finished_at,
            "placement": list(self.placement),
            "history": list(self.history),
        }


JobState = ray.remote(num_cpus=0, max_concurrency=64, max_restarts=0)(_JobStateImpl)  # pyright: ignore[reportCallIssue]
