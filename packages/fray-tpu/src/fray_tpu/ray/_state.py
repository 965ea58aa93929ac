# pyright: standard
"""The job's bookkeeping: one small actor per TPU job, next to the driver.

It holds what must outlive a supervisor run (the supervisor is re-run when its node dies):
the attempt counters and the two budgets, the first and last problem, the status, the stop
request, the hosts' preemption reports and the job's output lines. Every decision to retry
or give up is taken here, so a budget of N retries means N+1 attempts whatever process
happens to ask.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

import ray

__all__ = ["JobState"]

_MAX_LOG_LINES = 200_000


class _JobStateImpl:
    def __init__(
        self,
        job_id: str,
        name: str,
        replicas: int,
        max_retries_preemption: int,
        max_retries_failure: int,
    ) -> None:
        self._cond = threading.Condition()
        self.job_id = job_id
        self.name = name
        self.replicas = replicas
        self.max_p = max_retries_preemption
        self.max_f = max_retries_failure
        self.status = "pending"
        self.attempts = 0
        self.preemptions = 0
        self.failures = 0
        self.in_flight = False
        self.supervisor_runs = 0
        self.stop_requested = False
        self.error: str | None = None
        self.reason: str | None = None
        self.first_error: str | None = None
        self.first_cause: bytes | None = None
        self.submitted_at = time.time()
        self.started_at: float | None = None
        self.finished_at: float | None = None
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
            if self.supervisor_runs > 1 and not self._finished():
                # The supervisor (and with it the gang it owned) died with its node.
                lost = f"attempt {self.attempts}" if self.in_flight else "slice acquisition"
                self._count("preemption", f"the TPU supervisor's node was lost during {lost}", None)
                self._emit(f"[fray-tpu] supervisor restarted (run {self.supervisor_runs})")
            return self._snapshot()

    def begin_attempt(self, placement: list[dict[str, Any]]) -> dict[str, Any]:
        """A gang was claimed and is about to launch; returns the snapshot (``go`` or not)."""
        with self._cond:
            if self._finished() or self.stop_requested:
                return {**self._snapshot(), "go": False}
            self.attempts += 1
            self.in_flight = True
            self.status = "running"
            self.placement = placement
            if self.started_at is None:
                self.started_at = time.time()
            self.history.append({"attempt": self.attempts, "placement": placement})
            self._emit(
                f"[fray-tpu] attempt {self.attempts} on "
                + ", ".join(sorted({p["slice"] for p in placement}))
            )
            self._cond.notify_all()
            return {**self._snapshot(), "go": True}

    def end_attempt(self, kind: str, error: str, cause: bytes | None) -> dict[str, Any]:
        """Counts a lost attempt against one budget; the snapshot says whether to retry."""
        with self._cond:
            if not self._finished():
                self.in_flight = False
                self._count(kind, error, cause)
            self.preempted.clear()  # reports about the ended attempt's gang no longer matter
            self._cond.notify_all()
            return self._snapshot()

    def finish(self, status: str, error: str | None = None, reason: str | None = None) -> None:
        """Records the final status (first call wins)."""
        with self._cond:
            if self._finished():
                return
            self.in_flight = False
            self.status = status
            if error is not None:
                self.error = error
            if reason is not None:
                self.reason = reason
            self.finished_at = time.time()
            self._cond.notify_all()

    def stop_is_requested(self) -> bool:
        with self._cond:
            return self.stop_requested

    def watch(self, gang_token: str) -> dict[str, Any]:
        """What the supervisor checks while a gang runs: the stop request, and which host
        (if any) of gang ``gang_token`` said its VM is being preempted."""
        with self._cond:
            return {
                "stop_requested": self.stop_requested,
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
            self.stop_requested = True
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
            while self.attempts < attempt and not self._finished():
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
        """Lines from absolute index ``start``; waits up to ``wait_s`` for new ones."""
        deadline = time.monotonic() + wait_s
        with self._cond:
            while self.dropped + len(self.lines) <= start and not self._finished():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            first = max(start - self.dropped, 0)
            batch = list(self.lines)[first:]
            return batch, self.dropped + len(self.lines), self._finished()

    # -- internals -------------------------------------------------------------------------

    def _emit(self, line: str) -> None:
        if len(self.lines) == self.lines.maxlen:
            self.dropped += 1
        self.lines.append(line)

    def _finished(self) -> bool:
        return self.status in ("succeeded", "failed", "stopped")

    def _count(self, kind: str, error: str, cause: bytes | None) -> None:
        if self.first_error is None:
            self.first_error = error
            self.first_cause = cause
        self.error = error
        if kind == "preemption":
            self.preemptions += 1
            over = self.preemptions > self.max_p
        else:
            self.failures += 1
            over = self.failures > self.max_f
        self._emit(f"[fray-tpu] attempt {self.attempts}: {kind}: {error}")
        if not over:
            return
        self.status = "failed"
        self.reason = kind
        self.finished_at = time.time()
        counts = (
            f"{self.attempts} attempt(s): {self.preemptions} preemption(s), "
            f"{self.failures} failure(s)"
        )
        if kind == "preemption":
            head = (
                f"preempted {self.preemptions} time(s), more than max_retries_preemption="
                f"{self.max_p}"
            )
        elif self.max_f == 0:
            head = "failed (max_retries_failure=0)"
        else:
            head = f"failed {self.failures} time(s), more than max_retries_failure={self.max_f}"
        message = f"{head} ({counts}); first problem: {self.first_error}"
        if error != self.first_error:
            message += f"; last: {error}"
        self.error = message
        self._emit(f"[fray-tpu] giving up: {message}")

    def _snapshot(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "name": self.name,
            "status": self.status,
            "attempts": self.attempts,
            "preemptions": self.preemptions,
            "failures": self.failures,
            "error": self.error,
            "reason": self.reason,
            "in_flight": self.in_flight,
            "stop_requested": self.stop_requested,
            "supervisor_runs": self.supervisor_runs,
            "replicas": self.replicas,
            "submitted_at": self.submitted_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "placement": list(self.placement),
            "history": list(self.history),
        }


JobState = ray.remote(num_cpus=0, max_concurrency=64, max_restarts=0)(_JobStateImpl)  # pyright: ignore[reportCallIssue]
