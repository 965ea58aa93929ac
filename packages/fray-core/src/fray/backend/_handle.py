"""The job handle: one class over a :class:`JobRecord`, the same on every backend (what
differs is asked of the record's client: refresh, lines, value)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal, overload

from fray._model import whole
from fray._types import JobInfo, JobStatus
from fray.backend._record import JobRecord
from fray.errors import FrayError, InvalidRequestError, JobFailedError, JobTimeoutError

logger = logging.getLogger("fray")

_FOLLOW_POLL_S = 0.2
#: How long ``wait(stream_logs=True)`` waits for an ended job's last lines to be printed.
_LAST_LINES_S = 60.0
#: How long a wait lasts before the backend is first asked (``_refresh``) how often to look.
_FIRST_LOOK_S = 0.1


class BaseJobHandle:
    """A handle to a job: ``status``, ``wait``, ``result``, ``logs``, ``info``,
    ``terminate`` and ``add_done_callback``; see ``fray.JobHandle``."""

    __slots__ = ("_job",)

    def __init__(self, job: JobRecord) -> None:
        self._job = job

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self._job.job_id

    def status(self) -> JobStatus:
        """The job's current status."""
        job = self._job
        job.client._refresh(job)  # pyright: ignore[reportPrivateUsage]
        return job.status

    def _await_end(self, timeout: float | None) -> bool:
        """Waits through the client's ``_await`` first (where a backend learns ends in the
        caller's thread, it learns this one there) and asks ``_refresh`` after each wait, as
        often as it says; ``False`` once ``timeout`` passed (after one look at least)."""
        job = self._job
        client = job.client
        deadline = None if timeout is None else time.monotonic() + timeout
        step: float | None = _FIRST_LOOK_S
        while not job.is_done:
            wait = step
            if deadline is not None:
                left = max(deadline - time.monotonic(), 0.0)
                wait = left if step is None else min(step, left)
            if client._await((job,), wait, job):  # pyright: ignore[reportPrivateUsage]
                return True
            step = client._refresh(job)  # pyright: ignore[reportPrivateUsage]
            if deadline is not None and time.monotonic() >= deadline:
                return job.is_done
        return True

    def wait(
        self,
        timeout: float | None = None,
        *,
        raise_on_failure: bool = True,
        stream_logs: bool = False,
    ) -> JobStatus:
        """Blocks until the job is finished; see ``fray.JobHandle.wait``. ``stream_logs``
        prints its lines (its children's too) as they come; once the job ended, every one
        before it returns (as the backend's ``_lines`` says they are whole)."""
        job = self._job
        printer = done = None
        if stream_logs:  # ``done``: set once this wait returns, so a timed-out wait prints no more
            done = threading.Event()
            printer = threading.Thread(
                target=self._print_lines, args=(done,), name=job.job_id, daemon=True
            )
            printer.start()
        ended = self._await_end(timeout)
        if printer and done:
            printer.join(_LAST_LINES_S if ended else 0.0)
            done.set()
        if not ended:
            why = None
            if job.status is JobStatus.PENDING:  # what it waits for, where the backend can say
                why = job.client._pending_reason(job)  # pyright: ignore[reportPrivateUsage]
            raise JobTimeoutError(
                f"job {job.job_id} is still {job.status.value} after {timeout}s"
                + (f": {why}" if why else "")
            )
        if job.status is JobStatus.FAILED and raise_on_failure:
            raise JobFailedError(job.job_id, job.status, job.error) from job.cause
        return job.status

    def result(self, timeout: float | None = None) -> Any:
        """The callable's return value; see ``fray.JobHandle.result``."""
        status = self.wait(timeout)
        job = self._job
        if status is not JobStatus.SUCCEEDED:
            raise JobFailedError(job.job_id, status, job.error or "the job was stopped")
        if job.request is not None and not job.request.entrypoint.is_callable:
            raise JobFailedError(
                job.job_id, status, "a command job has no return value; read its logs()"
            )
        return job.client._result(job)  # pyright: ignore[reportPrivateUsage]

    def terminate(self) -> None:
        """Stops the job and the jobs submitted from it; returns once they are finished."""
        self._job.client._terminate([self._job])  # pyright: ignore[reportPrivateUsage]

    @overload
    def logs(
        self,
        max_lines: int | None = 0,
        *,
        follow: Literal[False] = False,
        include_children: bool = False,
    ) -> tuple[str, ...]: ...

    @overload
    def logs(
        self, max_lines: int | None = 0, *, follow: Literal[True], include_children: bool = False
    ) -> Iterator[str]: ...

    def logs(
        self, max_lines: int | None = 0, *, follow: bool = False, include_children: bool = False
    ) -> tuple[str, ...] | Iterator[str]:
        """The job's output lines, a tuple (with ``follow``, an iterator); see
        ``fray.JobHandle.logs``."""
        if max_lines is not None and not whole(max_lines, 0):
            raise InvalidRequestError.for_field(
                "logs.max_lines",
                max_lines,
                "must be a whole number: N > 0 for the last N lines, 0 or None for all of them",
            )
        tail = max_lines or None
        job = self._job
        client = job.client
        client._refresh(job)  # pyright: ignore[reportPrivateUsage]
        if not follow:
            return tuple(client._lines(job, include_children, tail))  # pyright: ignore[reportPrivateUsage]
        return self._follow(tail, include_children)

    def _follow(self, tail: int | None, include_children: bool) -> Iterator[str]:
        job = self._job
        client = job.client
        lines = client._lines(job, include_children, None)  # pyright: ignore[reportPrivateUsage]
        yield from lines if tail is None else lines[len(lines) - tail :]
        seen = len(lines)
        while True:
            own = len(job.log)
            step = client._refresh(job)  # pyright: ignore[reportPrivateUsage]
            done = job.is_done and (
                not include_children or all(child.is_done for child in job.descendants())
            )
            lines = client._lines(job, include_children, None)  # pyright: ignore[reportPrivateUsage]
            if len(lines) > seen:
                yield from lines[seen:]
                seen = len(lines)
            elif done:
                return
            elif job.is_done:  # its children still run: look again in a while
                time.sleep(step or _FOLLOW_POLL_S)
            else:  # woken by its own new lines, or looks again in a while
                job.log.wait_for_more(own, step or _FOLLOW_POLL_S)

    def _print_lines(self, done: threading.Event) -> None:
        """Prints the job's lines, its children's too, as they come (``wait(stream_logs=True)``),
        until the job ends or the wait that started it returns (``done``)."""
        try:
            for text in self.logs(follow=True, include_children=True):
                if done.is_set():
                    return
                print(text, flush=True)
        except FrayError as exc:
            logger.warning("stopped printing the lines of %s: %s", self.job_id, exc)

    def info(self) -> JobInfo:
        """Attempts, preemptions, failures, error, parent and children."""
        job = self._job
        job.client._refresh(job)  # pyright: ignore[reportPrivateUsage]
        return job.client._info(job)  # pyright: ignore[reportPrivateUsage]

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Calls ``callback(handle)`` once the job is finished (at once if it already is)."""
        if not self._job.add_done_callback(lambda: callback(self)):
            callback(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BaseJobHandle) and other._job is self._job

    def __hash__(self) -> int:
        return hash(self._job.job_id)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._job.job_id!r}, {self._job.status.value})"
