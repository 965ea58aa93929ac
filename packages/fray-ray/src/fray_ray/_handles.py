"""Job handles on Ray, each a :class:`~fray.backend.BaseJobHandle` over a few hooks.

``RayJobHandle`` is a job this client started: a callable job is driven by whoever waits for
it (``_block`` fetches its Ray refs; ``wait_all`` fetches many at once through
``wait_many``), a command job is kept current by its own thread. ``RemoteJobHandle`` (a job
another client of the job tree started, read through the registry) and
``SubmittedJobHandle`` (a Fray command job found in Ray's Jobs API) are polled.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from fray import Entrypoint, JobInfo, JobRequest, JobStatus
from fray.backend import BaseJobHandle, JobRecord
from fray.errors import FrayError, JobFailedError
from fray_ray._book import JobBook
from fray_ray._callable import CallableJob
from fray_ray._command import api_job_info
from fray_ray._drive import BATCH_LIMIT, drive_jobs
from fray_ray._record import RayJob

__all__ = ["RayJobHandle", "RemoteJobHandle", "SubmittedJobHandle"]


class RayJobHandle(BaseJobHandle):
    """Handle to a job this client started."""

    __slots__ = ()
    _job: RayJob

    def _refresh(self) -> None:
        self._job.poll()

    def _block(self, timeout: float | None) -> None:
        self._job.block(timeout)

    def _await_end(self, timeout: float | None) -> bool:
        # Blocking keeps the record current (a callable job's outcome is fetched by the
        # waiting thread) and returns only once the job has ended or the time is up, so
        # waiting is that one call, with no poll first: that would be a ``ray.wait`` (measured
        # at ~140 us on a busy 2-core machine, ~4% of a trivial job's submit -> result).
        job = self._job
        if not job.done.flag:
            self._block(timeout)
        return job.done.flag

    def _terminate(self) -> None:
        self._job.terminate()

    def _lines(self, include_children: bool) -> list[str]:
        job = self._job
        lines = job.live_lines()
        if include_children:
            registry = job.book.registry
            for child in registry.descendants(job.job_id):
                lines.extend(f"[{child}] {line}" for line in registry.logs(child))
        return lines

    def _children(self) -> Sequence[str]:
        return self._job.book.children_of(self._job.job_id)

    def info(self) -> JobInfo:
        """The record's snapshot; while the job waits for a node, with why
        (``JobInfo.pending_reason``, read from the cluster at most once a second)."""
        info = super().info()
        if not info.status.is_finished:
            reason = self._job.pending_reason()
            if reason is not None:
                return info.model_copy(update={"pending_reason": reason})
        return info

    @staticmethod
    def wait_many(handles: list[Any], timeout: float | None) -> list[int] | None:
        """For ``fray.wait_all``: fetches outcomes in the calling thread, batched, until all
        of ``handles`` are finished, one has failed or ``timeout`` passed; returns the
        positions of the finished ones. ``None`` (nothing done) when these handles are not
        all callable jobs of one client, or too many to batch."""
        if not handles:
            return []
        if len(handles) > BATCH_LIMIT or {type(h) for h in handles} != {RayJobHandle}:
            return None
        jobs: list[Any] = [h._job for h in handles]
        if {type(j) for j in jobs} != {CallableJob} or len({j.book for j in jobs}) != 1:
            return None
        deadline = None if timeout is None else time.monotonic() + timeout
        drive_jobs(jobs, jobs[0].book.progress, deadline, until_all=True, fail_fast=True)
        return [i for i, job in enumerate(jobs) if job.done.flag]


# ---------------------------------------------------------------------------------------------
# Jobs this client did not start


def _not_submitted_here() -> None:
    """Stands for the callable of a job this client did not submit (found by id)."""


# What a job found by id asked for is unknown here: its name, replicas and counts come from
# where it is recorded, never from these requests.
_FOUND_CALLABLE = JobRequest(
    name="found-by-id", entrypoint=Entrypoint.from_callable(_not_submitted_here)
)
_FOUND_COMMAND = JobRequest(name="found-by-id", entrypoint=Entrypoint.from_command("true"))


class FoundJob(JobRecord):
    """A job another client runs, as last read from where it is recorded: :meth:`apply`
    brings it up to date, and ``info()`` is what was read."""

    __slots__ = ("delay", "last", "max_delay")

    def __init__(self, job_id: str, request: JobRequest, *, first: float, most: float) -> None:
        super().__init__(job_id, request)
        self.last = JobInfo(job_id=job_id, name=job_id, status=JobStatus.PENDING)
        self.delay = first
        self.max_delay = most

    def apply(self, info: JobInfo) -> None:
        """Takes what was read (once the job has ended, nothing changes any more)."""
        if self.ended:
            return
        self.last = info
        self.parent = info.parent
        self.attempts, self.preemptions, self.failures = (
            info.attempts,
            info.preemptions,
            info.failures,
        )
        self.error, self.exit_code = info.error, info.exit_code
        self.started_at = info.started_at
        if not info.status.is_finished:
            self.status = info.status
            return
        self.finish(info.status)
        self.finished_at = info.finished_at or self.finished_at

    def poll_interval(self) -> float:
        """How long until the next look: growing, up to ``max_delay``."""
        delay = self.delay
        self.delay = min(delay * 2, self.max_delay)
        return delay

    def info(self, children: Sequence[str] = ()) -> JobInfo:
        return self.last.model_copy(update={"children": tuple(children)})


class RemoteJobHandle(BaseJobHandle):
    """Handle to a job another client started (a job submitted from inside a job), read
    through the registry."""

    __slots__ = ("_book",)
    _job: FoundJob

    def __init__(self, book: JobBook, job_id: str) -> None:
        super().__init__(FoundJob(job_id, _FOUND_CALLABLE, first=0.01, most=0.2))
        self._book = book

    def _refresh(self) -> None:
        job = self._job
        if job.is_done:
            return
        record = self._book.registry.get(job.job_id)
        if record is None:
            raise FrayError(f"job {job.job_id} is no longer known to the cluster")
        job.apply(JobInfo(**{k: v for k, v in record.items() if k in JobInfo.model_fields}))

    def _poll_interval(self) -> float | None:
        return self._job.poll_interval()

    def _terminate(self) -> None:
        """Stops the job and its children (their owners see the stop request)."""
        self._book.stop_descendants(self._job.job_id, include_self=True)

    def _lines(self, include_children: bool) -> list[str]:
        registry = self._book.registry
        job_id = self._job.job_id
        lines = registry.logs(job_id)
        if include_children:
            for child in registry.descendants(job_id):
                lines.extend(f"[{child}] {line}" for line in registry.logs(child))
        return lines

    def _children(self) -> Sequence[str]:
        return self._job.last.children

    def _value(self) -> Any:
        known, value = self._book.registry.result(self._job.job_id)
        if not known:
            raise JobFailedError(
                self._job.job_id, JobStatus.SUCCEEDED, "the job's return value was not recorded"
            )
        return value


class SubmittedJobHandle(BaseJobHandle):
    """Handle to a Fray command job found in Ray's Jobs API (e.g. started by another
    process: ``fray jobs status`` on Ray). Read-through: every look asks the cluster."""

    __slots__ = ("_book", "_submission_id")
    _job: FoundJob

    def __init__(self, book: JobBook, submission_id: str, job_id: str) -> None:
        super().__init__(FoundJob(job_id, _FOUND_COMMAND, first=0.2, most=0.2))
        self._book = book
        self._submission_id = submission_id

    def _refresh(self) -> None:
        if not self._job.is_done:
            details = self._book.jobs_api().get_job_info(self._submission_id)
            self._job.apply(api_job_info(details))

    def _poll_interval(self) -> float | None:
        return self._job.poll_interval()

    def _terminate(self) -> None:
        """Stops the Ray job."""
        self._book.jobs_api().stop_job(self._submission_id)
        self.wait(timeout=60, raise_on_failure=False)

    def _lines(self, include_children: bool) -> list[str]:
        return self._book.jobs_api().get_job_logs(self._submission_id).splitlines()
