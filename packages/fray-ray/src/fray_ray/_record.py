"""A Ray job's record: the seam's :class:`~fray.backend.JobRecord` plus its output, the
book it reports to, and what keeps thousands of them cheap to hold."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from fray import JobRequest
from fray.backend import JobRecord
from fray_ray._book import JobBook

__all__ = ["RayJob"]

logger = logging.getLogger("fray.ray")

# What a job's ``lock`` becomes once it has ended. Every section under a job's lock first
# looks at ``ended`` or ``done`` (both set before the swap) and then changes nothing that
# matters for a finished job (a waiter's claim count only matters while it runs), and none
# takes a second job's lock: finished jobs can share one.
_FINISHED_LOCK = threading.Lock()


class RayJob(JobRecord):
    """Bookkeeping shared by callable and command jobs; subclasses start, stop and read
    them.

    A client keeps thousands of these (its history, see ``fray.backend.JobHistory``). Every
    object a record holds that the garbage collector tracks is one more to walk, and one
    more to promote to the oldest generation (enough promotions trigger a full collection,
    which walks everything the driver holds). So a record holds no container it does not
    need: output lines start as the shared empty tuple and are replaced, never mutated (as
    the seam does with done-callbacks and ``done``); once a job ends, its Ray refs are
    dropped and its ``lock`` becomes a shared one. A finished record is the job object
    alone.
    """

    __slots__ = ("book", "lines", "reason_read")

    def __init__(self, book: JobBook, job_id: str, request: JobRequest, parent: str | None) -> None:
        super().__init__(job_id, request, parent)
        self.book = book
        self.lines: Sequence[str] = ()  # replaced, never mutated
        self.reason_read: tuple[float, str | None] | None = None  # pending_reason's last read

    def record(self) -> dict[str, Any]:
        """The JobInfo fields, as sent to the registry."""
        return self.info().model_dump(exclude={"children"}, mode="json")

    def add_lines(self, lines: Sequence[str]) -> None:
        """Appends output lines (a new list: ``lines`` is never mutated, see above)."""
        self.lines = [*self.lines, *lines]

    def note(self, line: str) -> None:
        self.add_lines((line,))

    def _on_end(self) -> None:
        self.book.job_finished(self)

    def _after_end(self) -> None:
        self.lock = _FINISHED_LOCK
        self.book.progress.notify()

    # -- what each kind of job does ----------------------------------------------------------

    def start(self) -> None:
        """Starts the next attempt."""
        raise NotImplementedError

    def terminate(self) -> None:
        """Stops the job and its children; returns once it is STOPPED."""
        raise NotImplementedError

    def poll(self) -> None:
        """Brings the status up to date without blocking (where it is not kept so)."""

    def block(self, timeout: float | None) -> None:
        """Blocks until the job has ended, at most ``timeout`` seconds."""
        self.wait_done(timeout)

    def live_lines(self) -> list[str]:
        """Every output line so far, including what a running job streamed."""
        return list(self.lines)

    def pending_reason(self) -> str | None:
        """Why the job waits for a node (``JobInfo.pending_reason``), read from the cluster at
        most once a second; ``None`` once it has ended or where nothing says it waits."""
        if self.done.flag:
            return None
        now = time.monotonic()
        last = self.reason_read
        if last is not None and now - last[0] < 1.0:
            return last[1]
        try:
            reason = self._read_pending_reason()
        except Exception as exc:  # the reason is a courtesy: never fail a job for it
            logger.debug("reading why job %s waits failed: %s", self.job_id, exc)
            reason = None
        self.reason_read = (now, reason)
        return reason

    def _read_pending_reason(self) -> str | None:
        """:meth:`pending_reason`, read now (none by default)."""
        return None
