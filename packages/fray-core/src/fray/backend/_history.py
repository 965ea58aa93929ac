"""The jobs a client answers for in ``list_jobs()`` and ``get_job()``: every unfinished job,
and the most recent finished ones up to a limit (``FRAY_JOB_HISTORY``, default 10,000).

A driver that runs jobs for days must not keep every finished job's return value, output
and exception for its whole life. A handle keeps its own job: dropping a finished job from
the history only ends ``get_job()`` and ``list_jobs()`` for it.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator
from typing import Generic, TypeVar

from fray.environment_variables import FRAY_JOB_HISTORY
from fray.errors import InvalidRequestError

__all__ = ["DEFAULT_JOB_HISTORY", "JobHistory", "job_history_limit"]

DEFAULT_JOB_HISTORY = 10_000

J = TypeVar("J")


def job_history_limit() -> int:
    """How many finished jobs a client keeps: ``FRAY_JOB_HISTORY``, else the default.

    Raises:
        InvalidRequestError: The variable is set to something other than a whole number
            >= 0.
    """
    text = os.environ.get(FRAY_JOB_HISTORY, "").strip()
    if not text:
        return DEFAULT_JOB_HISTORY
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise InvalidRequestError.for_field(
            FRAY_JOB_HISTORY,
            text,
            "a whole number >= 0: how many finished jobs a client keeps for list_jobs() and "
            f"get_job() (default {DEFAULT_JOB_HISTORY})",
        )
    return value


class JobHistory(Generic[J]):
    """Jobs by id, in submission order: all unfinished ones (:attr:`running`) and the last
    ``limit`` to finish; older finished ones are dropped as newer ones finish.

    Not locked: its owner calls it under its own lock.
    """

    __slots__ = ("_finished", "jobs", "limit", "running")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = job_history_limit() if limit is None else limit
        self.jobs: dict[str, J] = {}
        self.running: dict[str, J] = {}
        # Finished ids, oldest first: an id is here at most once, and never while it runs.
        self._finished: collections.OrderedDict[str, None] = collections.OrderedDict()

    def add(self, job_id: str, job: J) -> None:
        """A new job (unfinished). An id may come back (Iris reuses a finished job's name):
        it runs again, so it is no longer among the finished ones to drop."""
        self.jobs[job_id] = job
        self.running[job_id] = job
        self._finished.pop(job_id, None)

    def finished(self, job_id: str) -> None:
        """Records that a job finished (once; later calls change nothing), dropping the
        oldest finished jobs beyond the limit."""
        if self.running.pop(job_id, None) is None:
            return
        finished = self._finished
        finished[job_id] = None
        jobs = self.jobs
        while len(finished) > self.limit:
            jobs.pop(finished.popitem(last=False)[0], None)

    def get(self, job_id: str) -> J | None:
        return self.jobs.get(job_id)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self.jobs

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[str]:
        return iter(self.jobs)

    def values(self) -> list[J]:
        """Every job kept, in submission order (a copy)."""
        return list(self.jobs.values())

    def not_found(self, job_id: str, client: str) -> str:
        """The message for an id this history does not hold."""
        return (
            f"no job with id {job_id!r} in this {client} (it keeps every unfinished job and "
            f"the last {self.limit:,} finished ones; {FRAY_JOB_HISTORY} sets how many)"
        )
