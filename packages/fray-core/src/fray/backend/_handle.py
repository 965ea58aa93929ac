"""The job handle, written once over a few hooks each backend fills in."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from fray._types import JobInfo, JobStatus
from fray.backend._record import JobRecord
from fray.errors import InvalidRequestError, JobFailedError, JobTimeoutError

__all__ = ["BaseJobHandle", "check_max_lines", "check_result"]

_FOLLOW_POLL_S = 0.2


def check_result(job_id: str, status: JobStatus, error: str | None, *, is_callable: bool) -> None:
    """Raises what ``JobHandle.result()`` raises for a finished job with no value to return:
    it did not succeed, or it is a command job."""
    if status is not JobStatus.SUCCEEDED:
        raise JobFailedError(job_id, status, error or "the job was stopped")
    if not is_callable:
        raise JobFailedError(job_id, status, "a command job has no return value; read its logs()")


def check_max_lines(max_lines: Any) -> int | None:
    """Validates ``logs(max_lines=...)``: a whole number >= 0 (0, as ``None``, means every
    line, as the predecessor's 0 did).

    Raises:
        InvalidRequestError: Anything else.
    """
    if max_lines is None:
        return None
    if isinstance(max_lines, bool) or not isinstance(max_lines, int) or max_lines < 0:
        raise InvalidRequestError.for_field(
            "logs.max_lines",
            max_lines,
            "must be a whole number: N > 0 for the last N lines, 0 or None for all of them",
        )
    return max_lines or None


class BaseJobHandle:
    """A handle over a :class:`JobRecord`: ``status``, ``wait``, ``result``, ``logs``,
    ``info``, ``terminate`` and ``add_done_callback``, the same on every backend.

    A backend writes :meth:`_terminate` and :meth:`_lines`, and where its record is not
    kept current by events, :meth:`_refresh` (and :meth:`_poll_interval`); where waiting
    means more than blocking on the record (driving Ray refs), :meth:`_block`.
    """

    __slots__ = ("_job",)

    def __init__(self, job: JobRecord) -> None:
        self._job = job

    # -- hooks -------------------------------------------------------------------------------

    def _refresh(self) -> None:
        """Brings the record up to date (polls the backend); a no-op where events do."""

    def _poll_interval(self) -> float | None:
        """How long to block before :meth:`_refresh` must run again; ``None``: no need."""
        return None

    def _block(self, timeout: float | None) -> None:
        """Blocks until the job may have ended, at most ``timeout`` seconds."""
        self._job.wait_done(timeout)

    def _terminate(self) -> None:
        """Stops the job and its children; returns once they are STOPPED."""
        raise NotImplementedError

    def _lines(self, include_children: bool) -> list[str]:
        """Every output line so far; children's prefixed with ``[child-id]``."""
        raise NotImplementedError

    def _output_done(self, include_children: bool) -> bool:
        """Whether no more lines will come (the job, and its children if asked, ended)."""
        return self._job.is_done

    def _await_output(self, seen: int, include_children: bool, timeout: float) -> None:
        """Blocks until there may be more than ``seen`` lines, at most ``timeout``."""
        self._block(timeout)

    def _children(self) -> Sequence[str]:
        """Ids of the jobs submitted from this one."""
        return ()

    def _value(self) -> Any:
        """The return value of a SUCCEEDED callable job."""
        return self._job.value

    # -- the handle --------------------------------------------------------------------------

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self._job.job_id

    def status(self) -> JobStatus:
        """The job's current status."""
        self._refresh()
        return self._job.status

    def _await_end(self, timeout: float | None) -> bool:
        job = self._job
        self._refresh()
        if job.is_done:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = self._poll_interval()
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return job.is_done
                step = remaining if step is None else min(step, remaining)
            self._block(step)
            self._refresh()
            if job.is_done:
                return True

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished; see ``fray.JobHandle.wait``."""
        job = self._job
        if not self._await_end(timeout):
            raise JobTimeoutError(f"job {job.job_id} is still {job.status.value} after {timeout}s")
        if job.status is JobStatus.FAILED and raise_on_failure:
            raise JobFailedError(job.job_id, job.status, job.error) from job.cause
        return job.status

    def result(self, timeout: float | None = None) -> Any:
        """The callable's return value; see ``fray.JobHandle.result``."""
        status = self.wait(timeout)
        job = self._job
        check_result(job.job_id, status, job.error, is_callable=job.request.entrypoint.is_callable)
        return self._value()

    def terminate(self) -> None:
        """Stops the job and its children; returns once they are STOPPED."""
        self._terminate()

    def logs(
        self, max_lines: int | None = None, *, follow: bool = False, include_children: bool = False
    ) -> Iterator[str]:
        """The job's output lines; see ``fray.JobHandle.logs``.

        Args:
            max_lines: Start with only the last ``max_lines`` lines so far (a tail); 0 or
                ``None``: every line.
            follow: Keep yielding new lines until the job (and its children, if included)
                has finished.
            include_children: Interleave child jobs' lines, prefixed ``[child-id]``.
        """
        tail = check_max_lines(max_lines)
        return self._iter_logs(follow, include_children, tail)

    def _iter_logs(self, follow: bool, include_children: bool, tail: int | None) -> Iterator[str]:
        self._refresh()
        lines = self._lines(include_children)
        seen = len(lines)
        yield from lines if tail is None else lines[len(lines) - tail :] if tail else ()
        if not follow:
            return
        while True:
            finished = self._output_done(include_children)
            lines = self._lines(include_children)
            if len(lines) > seen:
                yield from lines[seen:]
                seen = len(lines)
                continue
            if finished:
                return
            self._await_output(seen, include_children, _FOLLOW_POLL_S)
            self._refresh()

    def info(self) -> JobInfo:
        """Attempts, preemptions, failures, error, parent and children."""
        self._refresh()
        return self._job.info(self._children())

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Calls ``callback(handle)`` once the job is finished (at once if it already is)."""
        if not self._job.add_done_callback(lambda: callback(self)):
            callback(self)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._job is self._job  # pyright: ignore

    def __hash__(self) -> int:
        return hash(self._job.job_id)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._job.job_id!r}, {self._job.status.value})"
