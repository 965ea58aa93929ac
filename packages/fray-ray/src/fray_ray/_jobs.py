"""What each kind of Ray job does for the engine's hooks: a callable job (one Ray task per
replica per attempt), a command job (a Ray job through the Jobs API) and a job found by id
(another client's, read through the registry or the Jobs API).

Each is a job record's ``data``, worked out once per request by ``RayClient._prepare``, with
the methods every kind has (``start``, ``cancel``, ``refresh``, ``pending_reason``,
``value``, ``lines``, ``close``: see :class:`fray_tpu.ray.gang.JobDataClient`, which TPU gang
jobs share). A callable attempt learns that it ended from its tasks' futures, by callback
(run on the client's event thread, never Ray's); command jobs and found jobs are learnt by
asking, on the client's one polling thread.

Each task runs with ``max_retries=0``: Ray's single retry counter cannot tell a preemption
from a bug. The wrapper returns the user's exception as a value, so any Ray error (worker
crash, node or owner death, ...) is read by :func:`fray_tpu.ray.errors.read_ray_error` and
charged to its own budget by the engine.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import logging
import shlex
import time
from typing import TYPE_CHECKING, Any

from fray import JobInfo, JobStatus
from fray.backend import JobRecord, Outcome, Phase
from fray.errors import JobFailedError
from fray_ray._placement import Ask, cluster_says
from fray_tpu.ray.errors import read_ray_error

if TYPE_CHECKING:
    from fray_ray._client import RayClient

__all__ = ["CallableJob", "CommandJob", "FoundJob", "api_job_info"]

logger = logging.getLogger("fray.ray")

CANCEL_GRACE_S = 10.0  # a cancelled attempt that has not ended by then is recorded STOPPED
STOP_GRACE_S = 30.0  # a stopped Ray job (Jobs API) likewise
AGENT_WAIT_S = 60.0  # how long a submission waits for a just-started Ray's job agent


def _reason_cached(data: Any, read: Any) -> str | None:
    """``read()``, at most once a second per job (the reason is read from the cluster)."""
    now = time.monotonic()
    last = data.reason_read
    if last is None or now - last[0] >= 1.0:
        try:
            reason = read()
        except Exception as exc:  # a courtesy: never fail a caller for it
            logger.debug("reading a pending reason failed: %s", exc)
            reason = None
        last = data.reason_read = (now, reason)
    return last[1]


class _Kind:
    """What every kind of Ray job shares: its client, and no-ops where it has nothing to do."""

    def __init__(self, client: RayClient) -> None:
        self.client = client
        self.reason_read: tuple[float, str | None] | None = None

    def refresh(self, job: JobRecord) -> float | None:
        return None

    def pending_reason(self, job: JobRecord) -> str | None:
        return None

    def value(self, job: JobRecord) -> Any:
        return job.value

    def lines(self, job: JobRecord) -> list[str]:
        return [line for _ts, line in job.log.snapshot()]

    def close(self) -> None:
        """The job has ended."""


class CallableJob(_Kind):
    """A callable job: its Ray remote function with the request's options, the pickled
    entrypoint, the env vars the wrapper sets, and the current attempt's tasks."""

    def __init__(
        self, client: RayClient, remote: Any, payload: bytes, env: dict[str, str], ask: Ask
    ) -> None:
        super().__init__(client)
        self.remote = remote
        self.payload = payload
        self.env = tuple(env.items())
        self.ask = ask
        self.attempt = 0
        self.refs: list[Any] = []
        self.outcomes: dict[int, tuple[Outcome, list[str]]] | None = None  # None: settled

    def start(self, job: JobRecord) -> None:
        """Starts the current attempt: one task per replica, watched by callbacks."""
        client = self.client
        request = job.request
        assert request is not None
        count, attempt = job.replicas, job.begun
        key = None if request.scheduling_timeout is None else f"{job.job_id}#{attempt}"
        where = (client.namespace, client.registry.name, client.echo_logs, self.env, key)
        refs = [
            self.remote.remote(self.payload, (job.job_id, i, count, *where)) for i in range(count)
        ]
        with job.lock:
            self.attempt, self.refs, self.outcomes = attempt, refs, {}
            stopping = job.phase is Phase.STOPPING
        if stopping:  # stopped while its tasks were being submitted
            cancel_refs(refs)
        if key is None:
            job.placed()  # Ray does not say when a task starts: it runs from its submission
        else:
            self._await_placed(job, attempt, key, float(request.scheduling_timeout or 0))
        soon = client._call_soon
        for index, ref in enumerate(refs):
            ref.future().add_done_callback(
                lambda future, i=index: soon(self._replica_done, job, attempt, i, future)
            )

    def _await_placed(self, job: JobRecord, attempt: int, key: str, limit: float) -> None:
        """The attempt is placed once every replica has said it started (the registry
        answers then, or at the scheduling timeout); one that cannot tell counts as placed."""
        client = self.client
        ref = client.registry.ref("wait_placed", key, job.replicas, limit + 5.0)
        if ref is None:
            job.placed()
            return

        def answered(future: Any) -> None:
            try:
                started = len(future.result())
            except Exception:
                started = job.replicas  # the registry is gone: it cannot tell, so go on
            if started >= job.replicas and job.begun == attempt:
                job.placed()

        ref.future().add_done_callback(lambda future: client._call_soon(answered, future))

    def _replica_done(self, job: JobRecord, attempt: int, index: int, future: Any) -> None:
        """A replica's task ended (on the client's event thread): the attempt is decided
        once every replica succeeded or one did not (gang semantics: the others are
        cancelled)."""
        try:
            outcome, lines = future.result()
        except Exception as exc:  # Ray could not run it (or the task was cancelled)
            reading = read_ray_error(exc)
            if reading.kind == "preemption":
                outcome = Outcome.preempted(reading.error)
            else:
                outcome = Outcome.failed(
                    reading.cause, f"Ray could not run the job: {reading.error}"
                )
            lines = []
        with job.lock:
            outcomes = self.outcomes
            if attempt != self.attempt or outcomes is None:
                return
            outcomes[index] = (outcome, lines)
            bad = outcome.kind != "succeeded"
            if not bad and len(outcomes) < job.replicas:
                return
            self.outcomes = None
            others = [ref for i, ref in enumerate(self.refs) if i not in outcomes]
            self.refs = []
        if others:
            cancel_refs(others)
        for i, (_outcome, replica_lines) in sorted(outcomes.items()):
            if replica_lines:
                prefix = f"[{i}] " if job.replicas > 1 else ""
                job.log.write("".join(f"{prefix}{line}\n" for line in replica_lines))
        job.report(_decide(job, outcomes))

    def cancel(self, job: JobRecord) -> float:
        """Cancels the attempt's tasks (and the jobs submitted from them), from the event
        thread (not the engine's timer)."""

        def cancel() -> None:
            with job.lock:
                refs = list(self.refs)
            cancel_refs(refs)
            self.client.stop_descendants(job.job_id)

        self.client._call_soon(cancel)
        return CANCEL_GRACE_S

    def lines(self, job: JobRecord) -> list[str]:
        """The finished attempts' lines, and what the running one streamed so far."""
        lines = super().lines(job)
        if not job.is_done:
            lines += self.client.registry.call("logs", job.job_id, default=[])
        return lines

    def pending_reason(self, job: JobRecord) -> str | None:
        """Why the attempt's replicas wait: with a ``scheduling_timeout`` how many have not
        started; without one, whether a replica of its shape may be waiting."""
        request = job.request
        if request is None or job.is_done:
            return None
        if request.scheduling_timeout is None:
            cluster = _reason_cached(self, lambda: cluster_says(self.ask))
            if cluster is None:
                return None
            asks = self.ask.describe()
            return f"a replica may be waiting for a node: each asks for {asks}; {cluster}"
        key = f"{job.job_id}#{job.begun}"
        started = self.client.registry.call("wait_placed", key, 0, 0.0, default=[]) or []
        waiting = job.replicas - len(started)
        if waiting <= 0:
            return None
        cluster = _reason_cached(self, lambda: cluster_says(self.ask))
        says = cluster or "a node has room: it is starting"
        return (
            f"{waiting} of {job.replicas} replica(s) waiting for a node: each asks for "
            f"{self.ask.describe()}; {says}"
        )


def _decide(job: JobRecord, outcomes: dict[int, tuple[Outcome, list[str]]]) -> Outcome:
    """The attempt's outcome from its replicas': every value, or the first user failure
    (counting the replicas that failed), or what Ray's error means."""
    ordered = [outcomes[i][0] for i in sorted(outcomes)]
    if all(o.kind == "succeeded" for o in ordered) and len(ordered) == job.replicas:
        values = [o.value for o in ordered]
        return Outcome.succeeded(values[0] if job.replicas == 1 else values)
    user = [(i, outcomes[i][0]) for i in sorted(outcomes) if outcomes[i][0].trace is not None]
    if user:
        index, first = user[0]
        error = first.error if job.replicas == 1 else f"replica {index}: {first.error}"
        return Outcome.failed(first.cause, error, first.exit_code, failed_tasks=len(user))
    return next(o for o in ordered if o.kind != "succeeded")


def cancel_refs(refs: list[Any]) -> None:
    """Cancels Ray tasks (force: the worker and everything it started dies)."""
    import ray

    for ref in refs:
        try:
            ray.cancel(ref, force=True, recursive=True)
        except Exception as exc:  # already finished, or its owner is gone
            logger.debug("cancel of %s: %s", ref, exc)


class CommandJob(_Kind):
    """A command job: a Ray job through the Jobs API per attempt, submitted and polled on the
    client's polling thread."""

    def __init__(self, client: RayClient, kwargs: dict[str, Any], ask: Ask) -> None:
        super().__init__(client)
        self.kwargs = kwargs
        self.ask = ask
        self.submission_id: str | None = None
        self.stopping = False
        self.api_pending = False  # the Jobs API said PENDING at the last poll

    def start(self, job: JobRecord) -> None:
        with job.lock:
            self.submission_id, self.stopping = None, False
        self.client.poller.watch(job)

    def poll(self, job: JobRecord) -> bool:
        """Submits the attempt or looks at it; ``True`` while it should be looked at again."""
        from ray.job_submission import JobStatus as RayJobStatus

        api = self.client.jobs_api()
        with job.lock:
            submission_id, stopping = self.submission_id, self.stopping
        if submission_id is None:
            if stopping:
                job.report(Outcome.stopped())
                return False
            self._submit(api, job)
            return True
        details = api.get_job_info(submission_id)
        self.api_pending = details.status == RayJobStatus.PENDING
        if details.status == RayJobStatus.RUNNING:
            job.placed()
        if not details.status.is_terminal():
            return True
        lines = api.get_job_logs(submission_id).splitlines()
        if lines:
            job.log.write("".join(f"{line}\n" for line in lines))
        code = getattr(details, "driver_exit_code", None)
        if details.status == RayJobStatus.SUCCEEDED:
            outcome = Outcome.succeeded(None, exit_code=0)
        elif details.status == RayJobStatus.STOPPED:
            outcome = Outcome.stopped()
        elif code is not None and code > 0:
            last = next((line for line in reversed(lines) if line.strip()), "")
            error = f"exited with code {code}" + (f"; last output: {last}" if last else "")
            outcome = Outcome.failed(None, error, code)
        else:
            outcome = Outcome.preempted(details.message or f"Ray job {details.status}")
        job.report(outcome)
        return False

    def _submit(self, api: Any, job: JobRecord) -> None:
        import secrets

        from fray.environment_variables import FRAY_JOB_ID

        request = job.request
        assert request is not None and request.entrypoint.command is not None
        kwargs = dict(self.kwargs)
        env = kwargs["runtime_env"] = dict(kwargs["runtime_env"])
        env["env_vars"] = {**env.get("env_vars", {}), FRAY_JOB_ID: job.job_id}
        submission_id = f"fray-{secrets.token_hex(8)}"
        deadline = time.monotonic() + AGENT_WAIT_S
        delay = 0.1
        while True:
            try:
                api.submit_job(
                    entrypoint=shlex.join(request.entrypoint.command),
                    submission_id=submission_id,
                    metadata={"fray_job_id": job.job_id, "fray_name": request.name},
                    **kwargs,
                )
                break
            except RuntimeError as exc:
                # A Ray that has just started answers this until its dashboard agent is up.
                if "No available agent" not in str(exc) or time.monotonic() >= deadline:
                    raise
            logger.debug("Ray's job agent is not up yet; submitting %s again", job.job_id)
            time.sleep(delay)  # back-off before asking the Jobs API again
            delay = min(delay * 2, 2.0)
        with job.lock:
            self.submission_id = submission_id
            stopping = self.stopping
        if stopping:  # stopped while it was being submitted
            api.stop_job(submission_id)

    def cancel(self, job: JobRecord) -> float:
        """Stops the Ray job (the polling thread submits none, or stops it, once it sees the
        stop), from the event thread."""
        with job.lock:
            self.stopping = True
            submission_id = self.submission_id
        if submission_id is not None:
            self.client._call_soon(self.client.jobs_api().stop_job, submission_id)
        return STOP_GRACE_S

    def lines(self, job: JobRecord) -> list[str]:
        """The output of the attempts so far, the running one's read live."""
        own = super().lines(job)
        with job.lock:
            submission_id = self.submission_id
        if job.is_done or submission_id is None:
            return own
        try:
            return own + self.client.jobs_api().get_job_logs(submission_id).splitlines()
        except Exception:
            return own

    def pending_reason(self, job: JobRecord) -> str | None:
        """While the Jobs API says PENDING and every node that could take the command is
        busy: what it asks for and what the cluster has. (PENDING alone also covers the
        setting up of its runtime env.)"""
        if not self.api_pending or job.is_done:
            return None
        cluster = _reason_cached(self, lambda: cluster_says(self.ask))
        if cluster is None:
            return None
        return (
            f"the command may be waiting for a node: it asks for {self.ask.describe()}; {cluster}"
        )


class FoundJob(_Kind):
    """A job this client did not submit, found by id: in the registry (a job submitted from
    inside a job) or in the Jobs API (a command job of another process). Its record is
    brought up to date by asking, on the client's polling thread or when a handle looks."""

    def __init__(self, client: RayClient, submission_id: str | None = None) -> None:
        super().__init__(client)
        self.submission_id = submission_id  # None: the registry's
        self.children: tuple[str, ...] = ()

    def refresh(self, job: JobRecord) -> float | None:
        self.poll(job)
        return None

    def poll(self, job: JobRecord) -> bool:
        """Reads the job again; ``True`` while it has not ended."""
        client = self.client
        if job.is_done:
            return False
        if self.submission_id is not None:
            info = api_job_info(client.jobs_api().get_job_info(self.submission_id))
        else:
            record = client.registry.call("get", job.job_id)
            if record is None:
                return True  # unreachable for now: asked again later
            info = JobInfo(**{k: v for k, v in record.items() if k in JobInfo.model_fields})
        self.children = info.children
        with job.lock:
            job.parent, job.name, job.replicas = info.parent, info.name, info.replicas
            job.attempts, job.failures, job.preemptions = (
                info.attempts,
                info.failures,
                info.preemptions,
            )
            job.error, job.exit_code, job.started_at = info.error, info.exit_code, info.started_at
            if not info.status.is_finished:
                job.status = info.status
        if info.status.is_finished:
            job.end(info.status)
            return False
        return True

    def cancel(self, job: JobRecord) -> float:
        """Stops it (and, through the registry, the jobs below it), from the event thread."""

        def stop() -> None:
            if self.submission_id is not None:
                self.client.jobs_api().stop_job(self.submission_id)
            else:
                self.client.stop_descendants(job.job_id, include_self=True)
            job.report(Outcome.stopped())

        self.client._call_soon(stop)
        return STOP_GRACE_S

    def lines(self, job: JobRecord) -> list[str]:
        if self.submission_id is not None:
            return self.client.jobs_api().get_job_logs(self.submission_id).splitlines()
        return list(self.client.registry.call("logs", job.job_id, default=[]))

    def value(self, job: JobRecord) -> Any:
        known, value = self.client.registry.call("result", job.job_id, default=(False, None))
        if not known:
            raise JobFailedError(job.job_id, job.status, "the job's return value was not kept")
        return value


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
