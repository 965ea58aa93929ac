"""Jobs on Ray: the Fray-side retry loop and the handles.

A callable job is one Ray task per replica (``max_retries=0``: Ray's single retry counter
cannot tell a preemption from a bug). When an attempt ends, its outcome is classified: the
wrapper returns the user's exception as a value, so any *Ray* error (worker crash, node or
owner death, ...) is a preemption. Each class of outcome has its own budget. Completion is
event-driven (``ObjectRef.future()`` callbacks): no thread per job, no polling.

A command job goes through Ray's Jobs API (it needs the dashboard) and is polled.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import concurrent.futures
import logging
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from fray import JobInfo, JobRequest, JobStatus
from fray.errors import FrayError, JobFailedError, JobTimeoutError
from fray_ray._convert import is_preemption

if TYPE_CHECKING:
    from fray_ray._client import RayClient

__all__ = ["CallableJob", "CommandJob", "RayJobHandle", "RemoteJobHandle"]

logger = logging.getLogger("fray.ray")


class _Job:
    """Bookkeeping shared by callable and command jobs."""

    def __init__(
        self, client: RayClient, job_id: str, request: JobRequest, parent: str | None
    ) -> None:
        self.client = client
        self.job_id = job_id
        self.request = request
        self.parent = parent
        self.status = JobStatus.PENDING
        self.attempts = 0
        self.failures = 0
        self.preemptions = 0
        self.error: str | None = None
        self.cause: BaseException | None = None
        self.exit_code: int | None = None
        self.value: Any = None
        self.lines: list[str] = []
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.callbacks: list[Callable[[], None]] = []
        self.stop_requested = False
        self.submitted_at = time.time()
        self.started_at: float | None = None
        self.finished_at: float | None = None

    # -- bookkeeping -------------------------------------------------------------------------

    def info(self, children: tuple[str, ...] = ()) -> JobInfo:
        return JobInfo(
            job_id=self.job_id,
            name=self.request.name,
            status=self.status,
            attempts=self.attempts,
            preemptions=self.preemptions,
            failures=self.failures,
            error=self.error,
            exit_code=self.exit_code,
            parent=self.parent,
            children=children,
            replicas=self.request.replica_count,
            submitted_at=self.submitted_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
        )

    def record(self) -> dict[str, Any]:
        """The JobInfo fields, as sent to the registry."""
        info = self.info()
        return info.model_dump(exclude={"children"}, mode="json")

    def on_failure(self, cause: BaseException | None, error: str, code: int | None) -> bool:
        """Counts a user failure; returns whether to try again."""
        self.failures += 1
        self.cause, self.error, self.exit_code = cause, error, code
        if self.failures <= self.request.max_retries_failure:
            self.lines.append(f"[fray] attempt {self.attempts} failed ({error}); retrying")
            return True
        return False

    def on_preemption(self, error: str) -> bool:
        """Counts a preemption; returns whether to try again."""
        self.preemptions += 1
        self.error = error
        if self.preemptions <= self.request.max_retries_preemption:
            self.lines.append(f"[fray] attempt {self.attempts} was preempted ({error}); retrying")
            return True
        self.error = (
            f"preempted {self.preemptions} times, more than max_retries_preemption="
            f"{self.request.max_retries_preemption}; last: {error}"
        )
        return False

    def finish(self, status: JobStatus) -> None:
        with self.lock:
            if self.done.is_set():
                return
            self.status = status
            self.finished_at = time.time()
            callbacks, self.callbacks = self.callbacks, []
        self.client.job_finished(self)
        self.done.set()
        for callback in callbacks:
            try:
                callback()
            except Exception:
                logger.exception("a done-callback of job %s raised", self.job_id)

    # -- running (subclasses) ----------------------------------------------------------------

    def start(self) -> None:
        raise NotImplementedError

    def terminate(self) -> None:
        raise NotImplementedError

    def live_lines(self) -> list[str]:
        return list(self.lines)


class CallableJob(_Job):
    """A callable job: one Ray task per replica per attempt."""

    def __init__(
        self,
        client: RayClient,
        job_id: str,
        request: JobRequest,
        parent: str | None,
        prepared: tuple[Any, dict[str, str], bytes],
    ) -> None:
        super().__init__(client, job_id, request, parent)
        # The wrapper as a Ray remote function with this request's options, the env vars it
        # sets itself, and the pickled entrypoint (see RayClient._prepared).
        remote, env, self.payload = prepared
        self.remote = remote
        self.env = tuple(env.items())
        self.refs: list[Any] = []
        self.outcomes: dict[int, tuple[Any, ...]] = {}
        self.settled = 0

    def start(self) -> None:
        with self.lock:
            if self.stop_requested or self.done.is_set():
                return
            self.attempts += 1
            attempt = self.attempts
            if self.started_at is None:
                self.started_at = time.time()
            self.status = JobStatus.RUNNING
            self.outcomes = {}
            count = self.request.replica_count
            refs = []
            for index in range(count):
                ctx = (
                    self.job_id,
                    index,
                    count,
                    self.client.namespace,
                    self.client.registry_name,
                    self.client.echo_logs,
                    self.env,
                )
                refs.append(self.remote.remote((self.payload, ctx)))
            self.refs = refs
        for index, ref in enumerate(refs):
            ref.future().add_done_callback(
                lambda future, i=index, a=attempt: self._replica_done(a, i, future)
            )

    def _replica_done(
        self, attempt: int, index: int, future: concurrent.futures.Future[Any]
    ) -> None:
        try:
            outcome: tuple[Any, ...] = future.result()
        except BaseException as exc:
            outcome = ("ray-error", exc)
        with self.lock:
            if attempt != self.attempts or self.settled == attempt or self.done.is_set():
                return
            self.outcomes[index] = outcome
            count = self.request.replica_count
            bad = outcome[0] != "ok"
            complete = len(self.outcomes) == count
            if not (complete or bad):
                return
            self.settled = attempt  # later replicas of this attempt change nothing
            # Gang semantics: one replica down takes the attempt down.
            refs = list(self.refs) if bad and not complete else []
        if refs:
            self.client.cancel_refs(refs)
        if not bad and count == 1 and not self.client.mirrors:
            self._settle(attempt)  # the fast path: a trivial success, settled inline
        else:
            self.client.executor.submit(self._settle, attempt)

    def _settle(self, attempt: int) -> None:
        """Decides what an ended attempt means: success, retry, or a final status."""
        try:
            with self.lock:
                if attempt != self.attempts or self.done.is_set():
                    return
                outcomes = dict(self.outcomes)
                stopping = self.stop_requested
            for index in sorted(outcomes):
                outcome = outcomes[index]
                if outcome[0] in ("ok", "error"):
                    self.lines.extend(
                        outcome[-1]
                        if len(outcomes) == 1
                        else [f"[{index}] {line}" for line in outcome[-1]]
                    )
            if stopping:
                self.finish(JobStatus.STOPPED)
                return
            errors = [(i, o) for i, o in sorted(outcomes.items()) if o[0] != "ok"]
            if not errors:
                values = [outcomes[i][1] for i in sorted(outcomes)]
                self.value = values[0] if len(values) == 1 else values
                self.finish(JobStatus.SUCCEEDED)
                return
            user = [(i, o) for i, o in errors if o[0] == "error"]
            if user:
                index, outcome = user[0]
                exc: BaseException = outcome[1]
                error = f"{type(exc).__name__}: {exc}"
                if len(outcomes) > 1:
                    error = f"replica {index}: {error}"
                code = (
                    exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else None
                )
                retry = self.on_failure(exc, error, code)
            else:
                index, outcome = errors[0]
                exc = outcome[1]
                if not is_preemption(exc):
                    retry = self.on_failure(
                        exc, f"Ray could not run the job: {_ray_error_text(exc)}", None
                    )
                else:
                    retry = self.on_preemption(_ray_error_text(exc))
            if retry:
                self.start()
            else:
                self.finish(JobStatus.FAILED)
        except BaseException as exc:  # a bug here must not leave the job hanging
            logger.exception("settling job %s failed", self.job_id)
            self.cause, self.error = exc, f"internal error in RayClient: {exc!r}"
            self.finish(JobStatus.FAILED)

    def terminate(self) -> None:
        with self.lock:
            if self.done.is_set():
                return
            self.stop_requested = True
            refs = list(self.refs)
        self.client.cancel_refs(refs, wait=True)
        self.client.stop_descendants(self.job_id)
        self.finish(JobStatus.STOPPED)

    def live_lines(self) -> list[str]:
        if self.done.is_set():
            return list(self.lines)
        return list(self.lines) + self.client.registry_logs(self.job_id)


class CommandJob(_Job):
    """A command job through Ray's Jobs API, polled by a thread of its own."""

    _POLL = 0.1

    def __init__(
        self,
        client: RayClient,
        job_id: str,
        request: JobRequest,
        parent: str | None,
        submit_kwargs: dict[str, Any],
    ) -> None:
        super().__init__(client, job_id, request, parent)
        self.submit_kwargs = submit_kwargs
        self.submission_id: str | None = None
        self.previous_lines: list[str] = []

    def start(self) -> None:
        threading.Thread(target=self._run, name=f"fray-ray-cmd-{self.job_id}", daemon=True).start()

    def _submit(self) -> str | None:
        import secrets

        entry = self.request.entrypoint
        assert entry.command is not None
        with self.lock:
            if self.stop_requested:
                return None
            self.attempts += 1
            self.status = JobStatus.RUNNING
            if self.started_at is None:
                self.started_at = time.time()
            submission_id = f"fray-{secrets.token_hex(8)}"
            self.submission_id = submission_id
        self.client.jobs_api().submit_job(
            entrypoint=shlex.join(entry.command),
            submission_id=submission_id,
            metadata={"fray_job_id": self.job_id, "fray_name": self.request.name},
            **self.submit_kwargs,
        )
        return submission_id

    def _run(self) -> None:
        from ray.job_submission import JobStatus as RayJobStatus

        try:
            while True:
                submission_id = self._submit()
                if submission_id is None:
                    break
                api = self.client.jobs_api()
                while True:
                    details = api.get_job_info(submission_id)
                    if details.status.is_terminal():
                        break
                    time.sleep(self._POLL)  # the Jobs API only answers polls
                logs = api.get_job_logs(submission_id)
                attempt_lines = logs.splitlines()
                with self.lock:
                    self.lines = self.previous_lines + attempt_lines
                    stopping = self.stop_requested
                if stopping or details.status == RayJobStatus.STOPPED:
                    break
                if details.status == RayJobStatus.SUCCEEDED:
                    self.exit_code = 0
                    self.finish(JobStatus.SUCCEEDED)
                    return
                code = getattr(details, "driver_exit_code", None)
                last = next((line for line in reversed(attempt_lines) if line.strip()), "")
                if code is not None and code > 0:
                    error = f"exited with code {code}" + (f"; last output: {last}" if last else "")
                    retry = self.on_failure(None, error, code)
                else:
                    retry = self.on_preemption(details.message or f"Ray job {details.status}")
                self.previous_lines = list(self.lines)
                if not retry:
                    self.finish(JobStatus.FAILED)
                    return
        except BaseException as exc:
            logger.exception("command job %s failed inside RayClient", self.job_id)
            self.cause, self.error = exc, f"internal error in RayClient: {exc!r}"
            self.finish(JobStatus.FAILED)
            return
        self.finish(JobStatus.STOPPED)

    def terminate(self) -> None:
        with self.lock:
            if self.done.is_set():
                return
            self.stop_requested = True
            submission_id = self.submission_id
        if submission_id is not None:
            api = self.client.jobs_api()
            api.stop_job(submission_id)
        if not self.done.wait(60):
            self.finish(JobStatus.STOPPED)

    def live_lines(self) -> list[str]:
        with self.lock:
            submission_id, done = self.submission_id, self.done.is_set()
        if done or submission_id is None:
            return list(self.lines)
        try:
            text = self.client.jobs_api().get_job_logs(submission_id)
        except Exception:
            return list(self.lines)
        return self.previous_lines + text.splitlines()


def _ray_error_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:500]


# ---------------------------------------------------------------------------------------------
# Handles


def _follow(read: Callable[[], list[str]], finished: Callable[[], bool]) -> Iterator[str]:
    seen = 0
    delay = 0.02
    while True:
        done = finished()
        lines = read()
        yield from lines[seen:]
        seen = max(seen, len(lines))
        if done:
            return
        time.sleep(delay)  # polling cadence of a live log stream
        delay = min(delay * 2, 0.25)


def _raise_for(job_id: str, status: JobStatus, error: str | None, cause: BaseException | None):
    raise JobFailedError(job_id, status, error) from cause


class RayJobHandle:
    """Handle to a job this client started."""

    __slots__ = ("_job",)

    def __init__(self, job: _Job) -> None:
        self._job = job

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self._job.job_id

    def status(self) -> JobStatus:
        """The job's current status."""
        return self._job.status

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished; see ``fray.JobHandle.wait``."""
        job = self._job
        if not job.done.wait(timeout):
            raise JobTimeoutError(f"job {job.job_id} is still {job.status.value} after {timeout}s")
        if job.status is JobStatus.FAILED and raise_on_failure:
            _raise_for(job.job_id, job.status, job.error, job.cause)
        return job.status

    def result(self, timeout: float | None = None) -> Any:
        """The callable's return value; see ``fray.JobHandle.result``."""
        status = self.wait(timeout)
        job = self._job
        if status is not JobStatus.SUCCEEDED:
            raise JobFailedError(job.job_id, status, job.error or "the job was stopped")
        if not job.request.entrypoint.is_callable:
            raise JobFailedError(
                job.job_id, status, "a command job has no return value; read its logs()"
            )
        return job.value

    def terminate(self) -> None:
        """Stops the job and its children; returns once they are STOPPED."""
        self._job.terminate()

    def logs(self, *, follow: bool = False, include_children: bool = False) -> Iterator[str]:
        """The job's output lines; see ``fray.JobHandle.logs``."""
        job = self._job
        client = job.client
        if not include_children:
            if follow:
                yield from _follow(job.live_lines, job.done.is_set)
            else:
                yield from job.live_lines()
            return

        def read() -> list[str]:
            lines = job.live_lines()
            for child in client.registry_descendants(job.job_id):
                lines.extend(f"[{child}] {line}" for line in client.registry_logs(child))
            return lines

        if follow:
            yield from _follow(read, job.done.is_set)
        else:
            yield from read()

    def info(self) -> JobInfo:
        """Attempts, preemptions, failures, error, parent and children."""
        job = self._job
        return job.info(tuple(job.client.children_of(job.job_id)))

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Calls ``callback(handle)`` once the job is finished (at once if it already is)."""
        job = self._job
        with job.lock:
            if not job.done.is_set():
                job.callbacks.append(lambda: callback(self))
                return
        callback(self)

    def __repr__(self) -> str:
        return f"RayJobHandle({self._job.job_id!r}, {self._job.status.value})"


class RemoteJobHandle:
    """Handle to a job another client started (a job submitted from inside a job), read
    through the registry."""

    def __init__(self, client: RayClient, job_id: str) -> None:
        self._client = client
        self._job_id = job_id

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self._job_id

    def _record(self) -> dict[str, Any]:
        record = self._client.registry_get(self._job_id)
        if record is None:
            raise FrayError(f"job {self._job_id} is no longer known to the cluster")
        return record

    def status(self) -> JobStatus:
        """The job's current status."""
        return JobStatus(self._record()["status"])

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished (polling the registry)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.01
        while True:
            record = self._record()
            status = JobStatus(record["status"])
            if status.is_finished:
                if status is JobStatus.FAILED and raise_on_failure:
                    raise JobFailedError(self._job_id, status, record.get("error"))
                return status
            if deadline is not None and time.monotonic() >= deadline:
                raise JobTimeoutError(
                    f"job {self._job_id} is still {status.value} after {timeout}s"
                )
            time.sleep(delay)  # polling the registry: another process owns this job
            delay = min(delay * 2, 0.2)

    def result(self, timeout: float | None = None) -> Any:
        """The callable's return value."""
        status = self.wait(timeout)
        if status is not JobStatus.SUCCEEDED:
            raise JobFailedError(self._job_id, status, self._record().get("error") or "stopped")
        known, value = self._client.registry_result(self._job_id)
        if not known:
            raise JobFailedError(self._job_id, status, "the job's return value was not recorded")
        return value

    def terminate(self) -> None:
        """Stops the job and its children (their owners see the stop request)."""
        self._client.stop_descendants(self._job_id, include_self=True)

    def logs(self, *, follow: bool = False, include_children: bool = False) -> Iterator[str]:
        """The job's output lines, as recorded in the registry."""

        def read() -> list[str]:
            lines = self._client.registry_logs(self._job_id)
            if include_children:
                for child in self._client.registry_descendants(self._job_id):
                    lines.extend(f"[{child}] {line}" for line in self._client.registry_logs(child))
            return lines

        if follow:
            yield from _follow(read, lambda: self.status().is_finished)
        else:
            yield from read()

    def info(self) -> JobInfo:
        """The job's record."""
        record = self._record()
        return JobInfo(**{k: v for k, v in record.items() if k in JobInfo.model_fields})

    def __repr__(self) -> str:
        return f"RemoteJobHandle({self._job_id!r})"


_API_STATUS = {
    "PENDING": JobStatus.PENDING,
    "RUNNING": JobStatus.RUNNING,
    "SUCCEEDED": JobStatus.SUCCEEDED,
    "FAILED": JobStatus.FAILED,
    "STOPPED": JobStatus.STOPPED,
}


def api_job_info(details: Any) -> JobInfo:
    """A Ray Jobs API record of a Fray command job (submitted by any process) as JobInfo."""
    metadata = details.metadata or {}
    job_id = metadata.get("fray_job_id", details.submission_id)
    return JobInfo(
        job_id=job_id,
        name=metadata.get("fray_name", job_id),
        status=_API_STATUS.get(str(details.status.value), JobStatus.PENDING),
        attempts=1,
        error=details.message if str(details.status.value) == "FAILED" else None,
        exit_code=getattr(details, "driver_exit_code", None),
        submitted_at=(details.start_time or 0) / 1000 or None,
        finished_at=(details.end_time or 0) / 1000 or None,
    )


class SubmittedJobHandle:
    """Handle to a Fray command job found in Ray's Jobs API (e.g. started by another
    process: ``fray jobs status`` on Ray). Read-through: every call asks the cluster."""

    def __init__(self, client: RayClient, submission_id: str, job_id: str) -> None:
        self._client = client
        self._submission_id = submission_id
        self._job_id = job_id

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self._job_id

    def info(self) -> JobInfo:
        """The job's record in the Jobs API."""
        return api_job_info(self._client.jobs_api().get_job_info(self._submission_id))

    def status(self) -> JobStatus:
        """The job's current status."""
        return self.info().status

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished (polling the Jobs API)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            info = self.info()
            if info.status.is_finished:
                if info.status is JobStatus.FAILED and raise_on_failure:
                    raise JobFailedError(self._job_id, info.status, info.error)
                return info.status
            if deadline is not None and time.monotonic() >= deadline:
                raise JobTimeoutError(f"job {self._job_id} is still {info.status.value}")
            time.sleep(0.2)  # the Jobs API only answers polls

    def result(self, timeout: float | None = None) -> Any:
        """Command jobs have no return value."""
        status = self.wait(timeout)
        raise JobFailedError(self._job_id, status, "a command job has no return value")

    def terminate(self) -> None:
        """Stops the Ray job."""
        self._client.jobs_api().stop_job(self._submission_id)
        self.wait(timeout=60, raise_on_failure=False)

    def logs(self, *, follow: bool = False, include_children: bool = False) -> Iterator[str]:
        """The job's output, from the Jobs API."""
        api = self._client.jobs_api()

        def read() -> list[str]:
            return api.get_job_logs(self._submission_id).splitlines()

        if follow:
            yield from _follow(read, lambda: self.status().is_finished)
        else:
            yield from read()
