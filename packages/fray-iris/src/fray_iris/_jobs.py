# pyright: standard
"""An Iris job as Fray sees it: a record on the seam (``fray.backend.JobRecord``) kept
current from the controller, and its handle (``fray.backend.BaseJobHandle``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from iris.cluster.types import JobName, is_job_finished
from iris.rpc import job_pb2

from fray import Entrypoint, JobInfo, JobRequest, JobStatus
from fray.backend import BaseJobHandle, JobRecord, check_max_lines
from fray.errors import JobFailedError, JobNotFoundError
from fray_iris import _iris
from fray_iris._convert import job_status, translate_errors
from fray_iris._logs import LineMerge, fetch_lines
from fray_iris._session import POLL_MAX_S, Session
from fray_iris._task import fray_job_id
from fray_iris.environment_variables import FRAY_IRIS_RESULTS_URL

__all__ = ["IrisJob", "IrisJobHandle", "listed_job_info"]


def _not_submitted_here() -> None:
    """Stands for the callable of a job this client did not submit (found by id)."""


# What a job found by id asked for is unknown to Fray: its name, replicas and value come from
# Iris and the results store, never from this request.
_FOUND_BY_ID = JobRequest(
    name="found-by-id", entrypoint=Entrypoint.from_callable(_not_submitted_here)
)


def _seconds(ts: Any) -> float | None:
    ms = getattr(ts, "epoch_ms", 0)
    return ms / 1000.0 if ms else None


def _attempts(tasks: list[job_pb2.TaskStatus]) -> int:
    best = 0
    for task in tasks:
        started = task.state not in (job_pb2.TASK_STATE_PENDING, job_pb2.TASK_STATE_UNSPECIFIED)
        count = max(len(task.attempts), task.current_attempt_id + 1 if started else 0)
        best = max(best, count)
    return best


def _exit_code(proto: job_pb2.JobStatus, tasks: list[job_pb2.TaskStatus]) -> int | None:
    for task in tasks:
        if task.exit_code:
            return task.exit_code
    return proto.exit_code


# Iris's error for a task stopped at its ``timeout`` (both lines; it does not retry it).
_IRIS_TIMEOUT = "Execution timeout exceeded"
POLL_JOB_FIRST_S = 0.02  # the first pause after a job's state changed
# Iris's pending reason before its scheduler has looked at the job.
_NO_FEEDBACK_YET = "Pending scheduler feedback"
PENDING_REASON_EVERY_S = 1.0


def _pending_reason(proto: job_pb2.JobStatus) -> str | None:
    """Iris's reason for not placing the job, on one line (``None`` before its scheduler has
    looked, or once it has none)."""
    reason = " ".join(proto.pending_reason.split())
    return reason if reason and reason != _NO_FEEDBACK_YET else None


class IrisJob(JobRecord):
    """One Iris job's record, brought up to date by :meth:`refresh`: the state alone (one
    light call) while it runs; its full status once it has ended (and its tasks when
    ``info()`` asks), after which it is never asked about again.

    ``error`` is the text ``JobFailedError`` carries (the user's exception, read from the
    results store, where a task stored one); ``iris_error`` is Iris's own text, which
    ``info()`` reports.
    """

    __slots__ = (
        "changed_at",
        "detailed",
        "ended_seen",
        "has_value",
        "iris_error",
        "iris_finished_at",
        "pending_reason",
        "pending_seen",
        "proto",
        "replicas",
        "session",
        "wire",
        "wire_id",
    )

    def __init__(
        self,
        session: Session,
        wire: JobName,
        request: JobRequest | None = None,
        *,
        replicas: int | None = None,
    ) -> None:
        wire_id = wire.to_wire()
        parent = wire.parent
        super().__init__(
            fray_job_id(wire_id),
            request or _FOUND_BY_ID,
            fray_job_id(parent.to_wire()) if parent is not None else None,
        )
        self.session = session
        self.wire = wire
        self.wire_id = wire_id
        self.replicas = replicas
        self.proto: job_pb2.JobStatus | None = None
        self.iris_error: str | None = None
        self.iris_finished_at: float | None = None
        self.detailed = False  # the final tasks are read
        self.ended_seen = 0.0  # when this process recorded the end (monotonic)
        self.has_value = False
        self.changed_at = time.monotonic()
        self.pending_reason: str | None = None  # why Iris has not placed it (last seen)
        self.pending_seen = 0.0  # when that was read (monotonic)

    # -- keeping current ---------------------------------------------------------------------

    def refresh(self, *, detail: bool = False) -> None:
        """Asks the controller what changed; with ``detail``, also for the tasks (attempts,
        exit code). Once the job has ended, only what was never read is asked for.

        Raises:
            JobNotFoundError: The controller does not know the job.
        """
        if self.ended:
            if detail and not self.detailed and self.proto is not None:
                self.apply(self.proto, self._tasks())
            return
        if not detail:
            with translate_errors(f"status of {self.job_id}", job_id=self.job_id):
                state = self.session.states([self.wire]).get(self.wire_id)
            if state is None:
                raise JobNotFoundError(self.job_id)
            if not is_job_finished(state):
                status = job_status(state)
                self._set_status(status)
                if status is JobStatus.PENDING:
                    self._read_pending_reason()
                return
        self._load(detail)

    def _read_pending_reason(self) -> None:
        """Asks Iris why the job is not placed yet (at most once a second)."""
        if time.monotonic() - self.pending_seen < PENDING_REASON_EVERY_S:
            return
        with translate_errors(f"status of {self.job_id}", job_id=self.job_id):
            proto = _iris.job_status(self.session.raw, self.wire)
        self._note_pending_reason(proto)

    def settle(self, state: int) -> None:
        """Records the end of the job, whose state was learnt elsewhere (a batched call)."""
        if not self.ended and is_job_finished(state):
            self._load(False)

    def poll_interval(self) -> float:
        """How long to wait before asking again: 20 ms after a change, growing with the
        time since (a quarter of it), to at most a second. A short job is then seen to end
        within ~20% of its run time (Iris's own wait starts at 100 ms, x1.5 a look); a
        long one costs the controller one light call a second."""
        return min(POLL_JOB_FIRST_S + 0.25 * (time.monotonic() - self.changed_at), POLL_MAX_S)

    def _load(self, detail: bool) -> None:
        with translate_errors(f"status of {self.job_id}", job_id=self.job_id):
            proto = _iris.job_status(self.session.raw, self.wire)
        self.apply(proto, self._tasks() if detail else None)
        if is_job_finished(proto.state) and not self.ended:
            status = job_status(proto.state)
            if status is JobStatus.FAILED:
                self.cause, self.error = self._failure(proto)
            elif status is JobStatus.STOPPED:
                self.error = proto.error or None
            self.finish(status)

    def _tasks(self) -> list[job_pb2.TaskStatus]:
        with translate_errors(f"tasks of {self.job_id}", job_id=self.job_id):
            return _iris.list_tasks(self.session.raw, self.wire)

    def apply(self, proto: job_pb2.JobStatus, tasks: list[job_pb2.TaskStatus] | None) -> None:
        """Copies Iris's view into the record; without ``tasks`` (a listing), attempts are
        counted from the job's failure and preemption counts."""
        status = job_status(proto.state)
        finished = is_job_finished(proto.state)
        with self.lock:
            self.proto = proto
            self.failures = proto.failure_count
            self.preemptions = proto.preemption_count
            self.iris_error = proto.error or None
            self.submitted_at = _seconds(proto.submitted_at) or self.submitted_at
            self.started_at = _seconds(proto.started_at)
            self.iris_finished_at = _seconds(proto.finished_at)
            if tasks is not None:
                self.attempts = _attempts(tasks)
                self.exit_code = _exit_code(proto, tasks) if finished else None
                if tasks:
                    self.replicas = len(tasks)
                self.detailed = finished
            else:
                started = self.started_at is not None
                attempts = proto.failure_count + proto.preemption_count
                if started and status is not JobStatus.FAILED:
                    attempts += 1
                self.attempts = max(attempts, 1 if started else 0, self.attempts)
                self.exit_code = proto.exit_code if finished else None
            if not self.ended and status is not self.status:
                self.status = status
                self.changed_at = time.monotonic()
            if status is JobStatus.PENDING:
                self._note_pending_reason(proto)

    def _note_pending_reason(self, proto: job_pb2.JobStatus) -> None:
        self.pending_seen = time.monotonic()
        self.pending_reason = _pending_reason(proto) or self.pending_reason

    def _set_status(self, status: JobStatus) -> None:
        with self.lock:
            if not self.ended and status is not self.status:
                self.status = status
                self.changed_at = time.monotonic()

    def _on_end(self) -> None:
        self.ended_seen = time.monotonic()
        if self.iris_finished_at is not None:  # Iris's time, not when Fray noticed
            self.finished_at = self.iris_finished_at

    # -- results -----------------------------------------------------------------------------

    def replica_count(self) -> int:
        """Tasks of the job (asked of Iris for a job found by id)."""
        if self.replicas is None:
            self.replicas = max(len(self._tasks()), 1)
        return self.replicas

    def _records(self) -> list[Any | None]:
        store = self.session.results
        count = self.replica_count()
        if store is None:
            return [None] * count
        return [store.read(store.task_path(self.wire_id, i)) for i in range(count)]

    def _failure(self, proto: job_pb2.JobStatus) -> tuple[BaseException | None, str]:
        """The user's exception (if a task stored one) and the text to report."""
        for record in self._records():
            if record is not None and record[0] == "error":
                exc = record[1]
                return exc, f"{type(exc).__name__}: {exc}"
        if proto.state == job_pb2.JOB_STATE_UNSCHEDULABLE:
            reason = self.pending_reason or _pending_reason(proto)
            if self.request.scheduling_timeout is not None:
                return None, self.unplaced_error(reason)
            if reason:
                return None, f"{proto.error or 'Iris cannot place the job'}; {reason}"
        if proto.error == _IRIS_TIMEOUT and self.request.timeout is not None:
            exc = self.timeout_error()  # the same answer as every backend gives
            return exc, f"TimeoutError: {exc}"
        return None, proto.error or f"Iris ended the job in {job_pb2.JobState.Name(proto.state)}"

    def stored_value(self) -> Any:
        """The return value the tasks stored (a list for several replicas), read once.

        Raises:
            JobFailedError: No results location is configured, or a task stored no value.
        """
        if self.has_value:
            return self.value
        if self.session.results is None:
            raise JobFailedError(
                self.job_id,
                self.status,
                f"no results location is configured: set {FRAY_IRIS_RESULTS_URL} (or "
                "IrisClient(results_url=...)) to a URL every task can reach",
            )
        values: list[Any] = []
        for record in self._records():
            if record is None or record[0] != "ok":
                raise JobFailedError(
                    self.job_id,
                    self.status,
                    "the job stored no return value (a command job has none; read its logs())",
                )
            values.append(record[1])
        self.value = values[0] if len(values) == 1 else values
        self.has_value = True
        return self.value

    # -- reading -----------------------------------------------------------------------------

    def info(self, children: Sequence[str] = ()) -> JobInfo:
        """The record's snapshot, with Iris's name, replica count and error text."""
        replicas = self.replicas if self.replicas is not None else self.request.replica_count
        return (
            super()
            .info(children)
            .model_copy(
                update={
                    "name": self.wire.name,
                    "replicas": replicas,
                    "error": self.iris_error,
                    "pending_reason": self.pending_reason
                    if self.status is JobStatus.PENDING
                    else None,
                }
            )
        )


def listed_job_info(session: Session, proto: job_pb2.JobStatus, children: Sequence[str]) -> JobInfo:
    """``JobInfo`` of a job in a listing (its status proto, no tasks)."""
    job = IrisJob(session, JobName.from_wire(proto.job_id), replicas=max(proto.task_count, 1))
    job.apply(proto, None)
    job.status = job_status(proto.state)
    job.finished_at = job.iris_finished_at
    return job.info(children)


class IrisJobHandle(BaseJobHandle):
    """Handle to an Iris job; see ``fray.JobHandle``."""

    __slots__ = ("_merge", "_tail")
    _job: IrisJob

    def __init__(self, job: IrisJob) -> None:
        super().__init__(job)
        self._merge: LineMerge | None = None
        self._tail: int | None = None  # a one-shot read asks Iris for the last lines only

    @property
    def iris_job_id(self) -> str:
        """The Iris job id (wire form, ``/<user>/<name>...``)."""
        return self._job.wire_id

    @property
    def _wire(self) -> JobName:
        return self._job.wire

    # -- hooks -------------------------------------------------------------------------------

    def _refresh(self) -> None:
        self._job.refresh()

    def _poll_interval(self) -> float | None:
        return self._job.poll_interval()

    def _terminate(self) -> None:
        job = self._job
        job.refresh()
        if job.is_done:
            return
        with translate_errors(f"terminate {job.job_id}", job_id=job.job_id):
            _iris.terminate(job.session.raw, job.wire)
        job.session.wait_finished([job.wire], include_descendants=True)
        job.refresh()  # records the end now, running the done-callbacks

    def _lines(self, include_children: bool) -> list[str]:
        merge = self._merge if self._merge is not None else LineMerge()
        return merge.merge(fetch_lines(self._job, include_children, self._tail))

    def _output_done(self, include_children: bool) -> bool:
        job = self._job
        if not job.is_done:
            return False
        if not include_children:
            return True
        with translate_errors(f"child jobs of {job.job_id}", job_id=job.job_id):
            return job.session.all_finished(job.wire)

    def _await_output(self, seen: int, include_children: bool, timeout: float) -> None:
        step = min(timeout, self._job.poll_interval())
        if self._job.is_done:  # its children may still write
            time.sleep(step)
        else:
            self._job.wait_done(step)

    def _children(self) -> Sequence[str]:
        job = self._job
        with translate_errors(f"children of {job.job_id}", job_id=job.job_id):
            return [fray_job_id(child) for child in job.session.children(job.wire)]

    def _value(self) -> Any:
        return self._job.stored_value()

    # -- the handle --------------------------------------------------------------------------

    def logs(
        self, max_lines: int | None = None, *, follow: bool = False, include_children: bool = False
    ) -> Iterator[str]:
        """The job's output lines; see ``fray.JobHandle.logs``."""
        view = IrisJobHandle(self._job)  # each call merges the fetches it makes on its own
        view._merge = LineMerge()
        if not follow:  # a follow merges whole fetches: it cannot start from a tail
            view._tail = check_max_lines(max_lines)
        return BaseJobHandle.logs(
            view, follow=follow, include_children=include_children, max_lines=max_lines
        )

    def info(self) -> JobInfo:
        """Attempts, preemptions, failures, Iris's error text, parent and children."""
        self._job.refresh(detail=True)
        return self._job.info(self._children())

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Calls ``callback(handle)`` once the job is finished (at once if it already is).

        One thread per connection watches every job that has callbacks, asking the
        controller about all of them in one call.
        """
        super().add_done_callback(callback)
        job = self._job
        if not job.is_done:
            job.session.watcher.watch(job)
