"""A command job on Ray: a Ray job through Ray's Jobs API (it needs the dashboard), polled
by a thread of its own; and Jobs API records as Fray sees them."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import logging
import shlex
import threading
import time
from typing import Any

from fray import JobInfo, JobRequest, JobStatus
from fray.environment_variables import FRAY_CLIENT_SPEC, FRAY_JOB_ID
from fray_ray._book import JobBook
from fray_ray._convert import command_options, runtime_env
from fray_ray._placement import Ask, pending_reason
from fray_ray._record import RayJob

__all__ = ["CommandJob", "api_job_info", "submit_options"]

logger = logging.getLogger("fray.ray")


def submit_options(request: JobRequest, job_id: str, namespace: str) -> dict[str, Any]:
    """``JobSubmissionClient.submit_job`` keyword arguments for a command job (except the
    entrypoint and ids): its resources, and a runtime env whose variables make the
    command's own jobs use this cluster and become its children."""
    kwargs = command_options(request)
    env_vars = dict(request.env_vars)
    env_vars.setdefault(FRAY_CLIENT_SPEC, f"ray?namespace={namespace}")
    env_vars[FRAY_JOB_ID] = job_id
    kwargs["runtime_env"] = runtime_env(request.environment, env_vars)
    return kwargs


class CommandJob(RayJob):
    """A command job through Ray's Jobs API, polled by a thread of its own."""

    _POLL = 0.1
    AGENT_WAIT = 60.0  # how long a submission waits for a just-started Ray's job agent
    __slots__ = ("api_pending", "previous_lines", "submission_id", "submit_kwargs")

    def __init__(
        self,
        book: JobBook,
        job_id: str,
        request: JobRequest,
        parent: str | None,
        submit_kwargs: dict[str, Any],
    ) -> None:
        super().__init__(book, job_id, request, parent)
        self.submit_kwargs = submit_kwargs
        self.submission_id: str | None = None
        self.previous_lines: list[str] = []
        self.api_pending = False  # the Jobs API said PENDING at the last poll

    def start(self) -> None:
        threading.Thread(target=self._run, name=f"fray-ray-cmd-{self.job_id}", daemon=True).start()

    def _submit(self) -> str | None:
        import secrets

        entry = self.request.entrypoint
        assert entry.command is not None
        if not self.mark_running():
            return None
        with self.lock:
            if self.stop_requested:
                return None
            self.begin_attempt()
            submission_id = f"fray-{secrets.token_hex(8)}"
            self.submission_id = submission_id
        api = self.book.jobs_api()
        deadline = time.monotonic() + self.AGENT_WAIT
        delay = 0.1
        while True:
            try:
                api.submit_job(
                    entrypoint=shlex.join(entry.command),
                    submission_id=submission_id,
                    metadata={"fray_job_id": self.job_id, "fray_name": self.request.name},
                    **self.submit_kwargs,
                )
                return submission_id
            except RuntimeError as exc:
                # A Ray that has just started answers this until its dashboard agent is up.
                if "No available agent" not in str(exc) or time.monotonic() >= deadline:
                    raise
            logger.debug("Ray's job agent is not up yet; submitting %s again", self.job_id)
            time.sleep(delay)  # back-off before asking the Jobs API again
            delay = min(delay * 2, 2.0)

    def _run(self) -> None:
        from ray.job_submission import JobStatus as RayJobStatus

        try:
            while True:
                submission_id = self._submit()
                if submission_id is None:
                    break
                api = self.book.jobs_api()
                details, timed_out = self._await_attempt(api, submission_id)
                logs = api.get_job_logs(submission_id)
                attempt_lines = logs.splitlines()
                with self.lock:
                    self.lines = self.previous_lines + attempt_lines
                    stopping = self.stop_requested
                if stopping:
                    break
                if details.status == RayJobStatus.SUCCEEDED:
                    self.exit_code = 0
                    self.finish(JobStatus.SUCCEEDED)
                    return
                code = getattr(details, "driver_exit_code", None)
                last = next((line for line in reversed(attempt_lines) if line.strip()), "")
                if timed_out:
                    self.on_timeout()
                    retry = False
                elif details.status == RayJobStatus.STOPPED:
                    break
                elif code is not None and code > 0:
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

    def _await_attempt(self, api: Any, submission_id: str) -> tuple[Any, bool]:
        """Polls the attempt until it ends; stops it once it has been RUNNING for
        ``JobRequest.timeout`` seconds. Returns its last Jobs API record and whether it was
        stopped for its timeout."""
        from ray.job_submission import JobStatus as RayJobStatus

        timeout = self.request.timeout
        running_since: float | None = None
        timed_out = False
        while True:
            details = api.get_job_info(submission_id)
            self.api_pending = details.status == RayJobStatus.PENDING
            if details.status.is_terminal():
                return details, timed_out
            if timeout is not None and not timed_out and details.status == RayJobStatus.RUNNING:
                now = time.monotonic()
                running_since = now if running_since is None else running_since
                if now - running_since >= timeout:
                    timed_out = True
                    api.stop_job(submission_id)
            time.sleep(self._POLL)  # the Jobs API only answers polls

    def _read_pending_reason(self) -> str | None:
        """While the Jobs API says PENDING and a request of the command's shape waits in the
        cluster: what it asks for and what the cluster has. (PENDING alone also covers the
        setting up of its runtime env.)"""
        if not self.api_pending:
            return None
        ask = Ask.of(self.submit_kwargs)  # the entrypoint's resources: Jobs API options
        cluster = pending_reason(ask, waiting_only=True)
        if cluster is None:
            return None
        return f"the command may be waiting for a node: it asks for {ask.describe()}; {cluster}"

    def terminate(self) -> None:
        with self.lock:
            if self.done.flag:
                return
            self.stop_requested = True
            submission_id = self.submission_id
        if submission_id is not None:
            api = self.book.jobs_api()
            api.stop_job(submission_id)
        if not self.wait_done(60):
            self.finish(JobStatus.STOPPED)

    def live_lines(self) -> list[str]:
        with self.lock:
            submission_id, done = self.submission_id, self.done.flag
        if done or submission_id is None:
            return list(self.lines)
        try:
            text = self.book.jobs_api().get_job_logs(submission_id)
        except Exception:
            return list(self.lines)
        return self.previous_lines + text.splitlines()


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
