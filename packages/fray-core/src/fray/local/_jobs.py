"""A local job: its record (on the seam's :class:`~fray.backend.JobRecord`), its handle, and
what code running inside it can ask (its id, its replica index)."""

from __future__ import annotations

import contextvars
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from fray._types import JobRequest
from fray.backend import BaseJobHandle, JobRecord, LogBuffer, follow_many, merge_logs
from fray.environment_variables import FRAY_JOB_ID, FRAY_TASK_INDEX, FRAY_TERMINATE_GRACE_S
from fray.errors import InvalidRequestError

if TYPE_CHECKING:
    from fray.local._client import LocalClient

__all__ = ["LocalJob", "LocalJobHandle", "Replica", "current_job_id", "grace_seconds", "task_index"]

current_job: contextvars.ContextVar[LocalJob | None] = contextvars.ContextVar(
    "fray_local_job", default=None
)
current_task_index: contextvars.ContextVar[int] = contextvars.ContextVar(
    "fray_task_index", default=0
)


def grace_seconds() -> float:
    """``FRAY_TERMINATE_GRACE_S``: seconds between SIGTERM and SIGKILL (default 5).

    Raises:
        InvalidRequestError: It is not a finite number >= 0.
    """
    text = os.environ.get(FRAY_TERMINATE_GRACE_S, "").strip() or "5"
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < float("inf"):  # also refuses nan
        raise InvalidRequestError.for_field(
            FRAY_TERMINATE_GRACE_S, text, "a number of seconds >= 0 (default 5)"
        )
    return value


class Replica:
    """One running copy of a job: a thread or a guarded process."""

    __slots__ = ("in_user_code", "index", "process", "result_path", "thread_id")

    def __init__(self, index: int) -> None:
        self.index = index
        self.thread_id: int | None = None
        self.in_user_code = False
        self.process: subprocess.Popen[bytes] | None = None
        self.result_path: str | None = None


class LocalJob(JobRecord):
    """A local job's record: the seam's plus its output, children, replicas and files."""

    __slots__ = (
        "children",
        "client",
        "log",
        "parent_job",
        "replicas",
        "signalled",
        "timed_out",
        "workdir",
    )

    def __init__(
        self,
        client: LocalClient,
        job_id: str,
        request: JobRequest,
        parent: LocalJob | None,
        parent_id: str | None,
    ) -> None:
        super().__init__(job_id, request, parent_id)
        self.client = client
        self.parent_job = parent
        self.children: list[LocalJob] = []
        self.log = LogBuffer()
        self.replicas: list[Replica] = []
        self.signalled = False
        self.timed_out = 0  # the attempt that ran past JobRequest.timeout, if any
        self.workdir: str | None = None

    def note(self, line: str) -> None:
        self.log.write(line + "\n")

    def _on_end(self) -> None:
        self.client._job_ended(self)  # pyright: ignore[reportPrivateUsage]
        self.log.close()

    def _after_end(self) -> None:
        with self.lock:
            children = list(self.children)
        for child in children:  # children die with their parent
            if not child.is_done:
                self.client._terminate(child)  # pyright: ignore[reportPrivateUsage]
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def descendants(self) -> list[LocalJob]:
        """Every job submitted from this one, at any depth."""
        found: list[LocalJob] = []
        stack = list(self.children)
        while stack:
            child = stack.pop()
            found.append(child)
            stack.extend(child.children)
        return found


class LocalJobHandle(BaseJobHandle):
    """Handle to a job of a :class:`~fray.local.LocalClient`."""

    __slots__ = ()
    _job: LocalJob

    def _terminate(self) -> None:
        self._job.client._terminate(self._job)  # pyright: ignore[reportPrivateUsage]

    def _buffers(self, include_children: bool) -> list[tuple[str | None, LogBuffer]]:
        job = self._job
        found: list[tuple[str | None, LogBuffer]] = [(None, job.log)]
        if include_children:
            found.extend((child.job_id, child.log) for child in job.descendants())
        return found

    def _lines(self, include_children: bool) -> list[str]:
        if not include_children:
            return [line for _ts, line in list(self._job.log.lines)]
        return merge_logs(self._buffers(True))

    def _output_done(self, include_children: bool) -> bool:
        job = self._job
        if not include_children:
            return job.log.closed
        return job.is_done and all(child.is_done for child in job.descendants())

    def _await_output(self, seen: int, include_children: bool, timeout: float) -> None:
        if not include_children:
            self._job.log.wait_for_more(seen, timeout)
        else:
            self._job.wait_done(timeout)

    def _iter_logs(self, follow: bool, include_children: bool, tail: int | None) -> Iterator[str]:
        if follow and include_children and tail is None:
            job = self._job
            return follow_many(
                lambda: self._buffers(True),
                lambda: job.is_done and all(child.is_done for child in job.descendants()),
            )
        return super()._iter_logs(follow, include_children, tail)

    def _children(self) -> Sequence[str]:
        with self._job.lock:
            return [child.job_id for child in self._job.children]


def task_index() -> int:
    """This replica's index within its job (0 for single-replica jobs and the driver)."""
    if current_job.get() is not None:
        return current_task_index.get()
    return int(os.environ.get(FRAY_TASK_INDEX, "0"))


def current_job_id() -> str | None:
    """The id of the job running this code, or ``None`` outside a job."""
    job = current_job.get()
    if job is not None:
        return job.job_id
    return os.environ.get(FRAY_JOB_ID)
