# pyright: standard
"""The driver's side of a TPU gang job: its record, fed by the job's state actor, and the
handle users hold (``fray.JobHandle``, on :class:`fray.backend.BaseJobHandle`).

While the supervisor runs, the record is refreshed from the state actor when the handle is
asked (status, info, output). Once the supervisor has returned, the record takes the state's
final copy (counters, output lines, first cause) in one call, the state actor is released, and
the record is finished: a finished job leaves no process behind however long the driver runs,
and everything the handle answers after that comes from the record.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
from typing import Any

import cloudpickle
import ray

from fray import JobRequest, JobStatus
from fray.backend import BaseJobHandle, JobRecord
from fray_tpu._errors import TpuJobFailedError, TpuSchedulingError
from fray_tpu.ray._util import rget
from fray_tpu.ray.errors import actor_error

__all__ = ["TpuJobHandle", "TpuJobRecord"]

logger = logging.getLogger("fray_tpu.ray")

_TERMINATE_GRACE_S = 30.0
_STATE_CALL_TIMEOUT_S = 30.0


class TpuJobRecord(JobRecord):
    """A TPU gang job as the driver knows it: the state actor's snapshots while it runs,
    then its final copy, plus the per-host results.

    Attributes:
        reason: What ended a failed job: ``"failure"``, ``"preemption"``, ``"scheduling"``
            or ``"internal"``.
        results: Every host's return value, slice by slice, once SUCCEEDED.
        placement: Where the current (or last) attempt runs.
        lines: The job's output lines read so far (the state actor holds the rest).
        next_line: The state's index of the line after ``lines`` (it counts dropped lines).
        first_cause: The first problem's exception, pickled, until it is loaded.
        settled: The final copy is taken; snapshots no longer apply.
    """

    __slots__ = ("first_cause", "lines", "next_line", "placement", "reason", "results", "settled")

    def __init__(self, job_id: str, request: JobRequest) -> None:
        super().__init__(job_id, request)
        self.reason: str | None = None
        self.results: list[Any] = []
        self.placement: list[dict[str, Any]] = []
        self.lines: list[str] = []
        self.next_line = 0
        self.first_cause: bytes | None = None
        self.settled = False

    def apply(self, snap: dict[str, Any]) -> None:
        """Takes a snapshot of the running job (ignored once the final copy is taken)."""
        with self.lock:
            if self.settled:
                return
            self._copy(snap)
            if self.status.is_finished:  # recorded, but the supervisor is still tearing down
                self.status = JobStatus.RUNNING

    def _copy(self, snap: dict[str, Any]) -> None:
        if not snap:
            return
        self.status = JobStatus(snap["status"])
        self.attempts = snap["attempts"]
        self.failures = snap["failures"]
        self.preemptions = snap["preemptions"]
        self.error = snap["error"]
        self.exit_code = snap["exit_code"]
        self.reason = snap["reason"]
        self.started_at = snap["started_at"]
        self.placement = snap["placement"]

    def take_lines(self, batch: list[str], end: int) -> None:
        """Adds the lines ``batch`` that end at the state's index ``end`` (those not read
        yet)."""
        with self.lock:
            fresh = min(len(batch), end - self.next_line)
            if fresh > 0:
                self.lines = [*self.lines, *batch[len(batch) - fresh :]]
            self.next_line = max(self.next_line, end)

    def settle(self, kept: dict[str, Any], answer: dict[str, Any]) -> JobStatus:
        """Takes the state's final copy (``kept``) and the supervisor's answer; returns the
        final status (not recorded yet: :meth:`finish` does that)."""
        snap = kept.get("snapshot") or {}
        status = JobStatus(answer.get("status", "failed"))
        if snap.get("stop_requested") and status is not JobStatus.SUCCEEDED:
            status = JobStatus.STOPPED
        with self.lock:
            self.settled = True
            self._copy(snap)
            self.results = list(answer.get("results") or [])
            self.first_cause = kept.get("first_cause")
        lines = list(kept.get("lines") or [])
        self.take_lines(lines, int(kept.get("dropped") or 0) + len(lines))
        crash = answer.get("crash")
        cause = _load_exception(self.first_cause)
        if isinstance(crash, BaseException):
            cause = cause or crash
            if not self.error:
                self.error = f"the TPU supervisor task failed: {crash}"
                self.reason = "internal"
        self.cause = cause
        return status


def _load_exception(data: bytes | None) -> BaseException | None:
    if data is None:
        return None
    try:
        loaded = cloudpickle.loads(data)
    except Exception as exc:  # its class cannot be imported here
        logger.debug("cannot load a TPU job's first problem: %s", exc)
        return None
    return loaded if isinstance(loaded, BaseException) else None


class TpuJobHandle(BaseJobHandle):
    """Handle to a TPU gang job on Ray; implements ``fray.JobHandle``.

    ``result()`` is the list of per-host return values ordered slice by slice, then by
    worker id within a slice (a single value when the job has one replica). A job that
    ends without success raises :class:`~fray_tpu.TpuJobFailedError` (its attempts,
    preemptions, failures and reason; the first problem chained as ``__cause__``).

    Once the supervisor has returned, the handle copies the job's state from the job's state
    actor and releases that actor (see the module docstring).
    """

    __slots__ = ("_future", "_record", "_ref", "_settle_lock", "_state")

    def __init__(self, record: TpuJobRecord, state: Any, ref: Any) -> None:
        super().__init__(record)
        self._record = record
        self._state = state
        self._ref = ref
        self._settle_lock = threading.Lock()
        self._future: concurrent.futures.Future[Any] = ref.future()
        # Nobody may ever wait on this handle: the copy is taken when the supervisor returns.
        self._future.add_done_callback(lambda _future: self._settle_soon())

    # -- settling ------------------------------------------------------------------------

    def _settle_soon(self) -> None:
        """From Ray's completion callback, which must not block: settles in a thread."""
        threading.Thread(
            target=self._settle, name=f"fray-tpu-settle-{self.job_id}", daemon=True
        ).start()

    def _settle(self) -> None:
        """Once the supervisor has returned (blocks until it has): copies the job's state,
        releases the state actor and finishes the record. Runs once; later calls wait for
        the first."""
        record = self._record
        if record.is_done:
            return
        with self._settle_lock:
            if record.ended:
                return
            try:
                answer = self._future.result()
            except Exception as exc:
                # The supervisor task itself failed or was cancelled (terminate's last resort).
                answer = {"status": "stopped" if _is_cancelled(exc) else "failed", "crash": exc}
            status = JobStatus.FAILED
            try:
                try:
                    kept = rget(self._state.final.remote(), timeout=_STATE_CALL_TIMEOUT_S)
                except Exception:  # the state actor is gone: only the supervisor's answer is left
                    kept = {}
                status = record.settle(kept, answer)
            finally:
                with contextlib.suppress(Exception):  # already gone is just as good
                    ray.kill(self._state, no_restart=True)
                record.finish(status)

    # -- the hooks of BaseJobHandle ------------------------------------------------------

    def _refresh(self) -> None:
        record = self._record
        if record.is_done:
            return
        if self._future.done():  # ended (its state may be released): take the copy
            self._settle()
            return
        try:
            snap = rget(self._state.snapshot.remote(), timeout=_STATE_CALL_TIMEOUT_S)
        except Exception:
            if self._future.done():
                self._settle()
            return  # the state actor could not be reached: the record stays as it was
        record.apply(snap)

    def _read_lines(self, wait_s: float) -> None:
        """Reads new output lines from the state actor, waiting up to ``wait_s`` for some;
        after the job's end, from the final copy."""
        record = self._record
        if record.is_done:
            return
        if self._future.done():
            self._settle()
            return
        try:
            batch, end, ended = rget(
                self._state.read_logs.remote(record.next_line, wait_s),
                timeout=wait_s + _STATE_CALL_TIMEOUT_S,
            )
        except Exception:
            if self._future.done():
                self._settle()
            elif wait_s:
                record.wait_done(wait_s)  # unreachable for now: wait as asked, then try again
            return
        record.take_lines(batch, end)
        if ended and not batch and wait_s:
            # Recorded as ended; the supervisor is still tearing down, then settles.
            record.wait_done(wait_s)

    def _lines(self, include_children: bool) -> list[str]:
        # TPU jobs submitted from inside the gang are jobs of their own, not followed here.
        self._read_lines(0.0)
        return self._record.lines

    def _await_output(self, seen: int, include_children: bool, timeout: float) -> None:
        if len(self._record.lines) <= seen:
            self._read_lines(timeout)

    def _terminate(self) -> None:
        if self._record.is_done:
            return
        if not self._future.done():
            with contextlib.suppress(Exception):
                rget(self._state.request_stop.remote(), timeout=_STATE_CALL_TIMEOUT_S)
            try:
                self._future.result(timeout=_TERMINATE_GRACE_S)
            except concurrent.futures.TimeoutError:
                with contextlib.suppress(Exception):
                    ray.cancel(self._ref, force=True, recursive=True)
                with contextlib.suppress(Exception):
                    self._future.result(timeout=_TERMINATE_GRACE_S)
            except Exception:
                pass  # reported when settling
        self._settle()

    def _value(self) -> Any:
        results = self._record.results
        single = self._record.request.replica_count == 1 and len(results) == 1
        return results[0] if single else list(results)

    # -- what differs from the base: TPU errors --------------------------------------------

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished; see ``fray.JobHandle.wait``.

        Raises:
            TpuJobFailedError: The job FAILED (``TpuSchedulingError`` if its slices could
                not be gathered in time) and ``raise_on_failure`` is set.
            JobTimeoutError: ``timeout`` passed first.
        """
        status = super().wait(timeout, raise_on_failure=False)
        if status is JobStatus.FAILED and raise_on_failure:
            raise self._failure()
        return status

    def result(self, timeout: float | None = None) -> Any:
        """Per-host return values, slice by slice (one value for a one-replica job).

        Raises:
            TpuJobFailedError: The job did not succeed, or it ran a command (no value).
        """
        status = self.wait(timeout)
        record = self._record
        if status is not JobStatus.SUCCEEDED:
            raise TpuJobFailedError(self.job_id, status, record.error or "the job was stopped")
        if not record.request.entrypoint.is_callable:
            raise TpuJobFailedError(
                self.job_id, status, "a command job has no return value; read its logs()"
            )
        return self._value()

    def _failure(self) -> TpuJobFailedError:
        record = self._record
        reason = record.reason or "failure"
        cls = TpuSchedulingError if reason == "scheduling" else TpuJobFailedError
        error = cls(
            self.job_id,
            record.status,
            record.error,
            attempts=record.attempts,
            preemptions=record.preemptions,
            failures=record.failures,
            reason=reason,
        )
        error.__cause__ = record.cause
        return error

    # -- TPU specifics ---------------------------------------------------------------------

    def host_results(self, timeout: float | None = None) -> list[Any]:
        """Every host's return value as a list, slice by slice (also for one host).

        Raises:
            TpuJobFailedError: The job did not succeed.
        """
        self.result(timeout)
        return list(self._record.results)

    def placement(self) -> list[dict[str, Any]]:
        """Where the current (or last) attempt runs: slice, worker, node id and IP per host."""
        record = self._record
        if not record.is_done:
            try:
                snap = rget(self._state.snapshot.remote(), timeout=_STATE_CALL_TIMEOUT_S)
            except Exception as exc:
                self._state_lost(exc)
            else:
                record.apply(snap)
                return list(snap.get("placement") or [])
        return list(record.placement)

    def wait_for_attempt(self, attempt: int, timeout: float) -> bool:
        """Blocks until attempt ``attempt`` has started; ``False`` on timeout or job end."""
        record = self._record
        if not record.is_done:
            try:
                snap = rget(
                    self._state.wait_for_attempt.remote(attempt, timeout),
                    timeout=timeout + _STATE_CALL_TIMEOUT_S,
                )
            except Exception as exc:
                self._state_lost(exc)
            else:
                record.apply(snap)
                return bool(snap.get("attempts", 0) >= attempt)
        return record.attempts >= attempt

    def _state_lost(self, exc: BaseException) -> None:
        """The state actor did not answer: fine if the job has ended (the record has the
        copy), a Fray error if it still runs."""
        if not self._future.done():
            raise actor_error(exc, f"the state of TPU job {self.job_id}") from exc
        self._settle()


def _is_cancelled(exc: BaseException) -> bool:
    from ray import exceptions as rx

    return isinstance(exc, rx.TaskCancelledError)
