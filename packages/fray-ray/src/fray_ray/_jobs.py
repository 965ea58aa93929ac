"""The kinds of Ray job learnt by asking: a command job (a Ray job through the Jobs API per
attempt) and a job found by id (another client's, read through the registry or the Jobs
API), both looked at by asking, on the client's event thread (:class:`Poller`). Callable
jobs are :mod:`fray_ray._kinds`'s.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import logging
import shlex
import time
from typing import TYPE_CHECKING, Any

from fray import JobInfo, JobStatus
from fray.backend import JobRecord, Observed, Outcome
from fray.environment_variables import FRAY_JOB_ID
from fray.errors import JobFailedError
from fray_ray._convert import Ask
from fray_ray._kinds import JobKind
from fray_ray._placement import cluster_says

if TYPE_CHECKING:
    from fray_ray._client import RayClient


logger = logging.getLogger("fray.ray")

POLL_S = 0.1  # between looks at command jobs and jobs found by id
STOP_GRACE_S = 30.0  # a stopped Ray job (Jobs API) likewise
AGENT_WAIT_S = 120.0  # how long an attempt's submission waits for a just-started Ray's job agent


class Poller:
    """Looks at a client's jobs learnt by asking (command jobs and jobs found by id): each
    kind's ``poll`` runs on the client's event thread, again every :data:`POLL_S` (a timer
    of Fray's hands it back) until it says no more or the client is shut down."""

    def __init__(self) -> None:
        self._closed = False

    def watch(self, job: JobRecord) -> None:
        """Asks about ``job`` soon, then every :data:`POLL_S` until its kind's ``poll`` says
        no more (each attempt of a command job is watched from its start). Does not block
        (Fray's timer thread calls it for the next look)."""
        if not self._closed:
            job.client._call_soon(self._look, job)

    def close(self) -> None:
        """Stops looking (the client is shut down)."""
        self._closed = True

    def _look(self, job: JobRecord) -> None:
        if self._closed:
            return
        try:
            again = job.data.poll(job)
        except Exception as exc:
            logger.exception("looking at Ray job %s failed", job.job_id)
            job.data.poll_failed(job, exc)
            again = False
        if again:  # Ray's Jobs API and the registry only answer polls
            job.client._call_later(POLL_S, self.watch, job)


class CommandSlots:
    """How many of a client's command jobs may be in Ray's Jobs API at once (running or
    pending there): each is a Ray job with a supervisor actor of its own on the head node,
    and a hundred at once can run a head node out of memory. Taken and given back only by
    command jobs' polls, which all run on the client's event thread (so no lock); ``cap``
    is read by pending reasons in any thread."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._held: set[str] = set()

    def take(self, job_id: str) -> bool:
        """Whether ``job_id`` holds a slot (taking a free one)."""
        if len(self._held) < self.cap:
            self._held.add(job_id)
        return job_id in self._held

    def give_back(self, job_id: str) -> None:
        """``job_id``'s Ray job has ended (or was never submitted)."""
        self._held.discard(job_id)


class CommandJob(JobKind):
    """A command job: a Ray job through the Jobs API per attempt, submitted (once the
    client's :class:`CommandSlots` has room) and polled on the client's event thread."""

    def __init__(self, client: RayClient, kwargs: dict[str, Any], ask: Ask) -> None:
        """``kwargs``: the Ray job's ``submit_job`` keywords, this job's own (``start``
        adds its id to their env)."""
        super().__init__(client)
        self.ray_client = client
        self.kwargs = kwargs
        self.ask = ask
        self.submission_id: str | None = None
        self.stopping = False
        self.queued = False  # waiting in the driver for a slot at the last poll

    def start(self, job: JobRecord) -> None:
        """Queues the attempt for the client's :class:`Poller`, which submits it once it
        holds one of the client's command slots (with ``FRAY_JOB_ID`` in its env)."""
        self.kwargs["runtime_env"].setdefault("env_vars", {})[FRAY_JOB_ID] = job.job_id
        with job.lock:
            self.submission_id, self.stopping = None, False
        self.agent_deadline = time.monotonic() + AGENT_WAIT_S
        self.ray_client.poller.watch(job)

    def poll(self, job: JobRecord) -> bool:
        """Submits the attempt or looks at it; ``True`` while it should be looked at again."""
        api = self.ray_client.jobs_api()
        slots = self.ray_client.command_slots
        submission_id = self.submission_id  # a stop meanwhile is _submit's to see
        if submission_id is None:
            if self.stopping:
                slots.give_back(job.job_id)
                job.report(Outcome.stopped())
                return False
            self.queued = not slots.take(job.job_id)  # one it holds already counts
            if not self.queued:
                self._submit(api, job)
            return True
        details = api.get_job_info(submission_id)
        status = details.status  # a str enum: "PENDING", "RUNNING", ...
        if status == "RUNNING":
            job.placed()
        if not details.status.is_terminal():
            return True
        lines = api.get_job_logs(submission_id).splitlines()
        slots.give_back(job.job_id)
        job.log.write("".join(f"{line}\n" for line in lines))
        code = getattr(details, "driver_exit_code", None)
        if status == "SUCCEEDED":
            outcome = Outcome.succeeded(None, exit_code=0)
        elif status == "STOPPED":
            outcome = Outcome.stopped()
        elif code is not None and code > 0:
            last = next((line for line in reversed(lines) if line.strip()), "")
            error = f"exited with code {code}" + (f"; last output: {last}" if last else "")
            outcome = Outcome.failed(None, error, code)
        else:
            outcome = Outcome.preempted(details.message or f"Ray job {status}")
        job.report(outcome)
        return False

    def poll_failed(self, job: JobRecord, exc: Exception) -> None:
        """Looking at it raised: the attempt failed (a bug of Fray's, or the Jobs API)."""
        self.ray_client.command_slots.give_back(job.job_id)
        job.report(Outcome.failed(exc, f"internal error in RayClient: {exc!r}"))

    def _submit(self, api: Any, job: JobRecord) -> None:
        """Submits the attempt's Ray job. A Ray that has just started answers "No available
        agent" until its dashboard agent is up: the next poll submits again, until
        :data:`AGENT_WAIT_S` after the attempt started."""
        import secrets

        request = job.request
        assert request is not None and request.entrypoint.command is not None
        submission_id = f"fray-{secrets.token_hex(8)}"
        try:
            api.submit_job(
                entrypoint=shlex.join(request.entrypoint.command),
                submission_id=submission_id,
                metadata={"fray_job_id": job.job_id, "fray_name": request.name},
                **self.kwargs,
            )
        except RuntimeError as exc:
            if "No available agent" not in str(exc) or time.monotonic() >= self.agent_deadline:
                raise
            logger.debug("Ray's job agent is not up yet; submitting %s again", job.job_id)
            return
        with job.lock:
            self.submission_id = submission_id
            stopping = self.stopping
        if stopping:  # stopped while it was being submitted
            api.stop_job(submission_id)

    def cancel(self, job: JobRecord) -> float:
        """Stops the Ray job (the :class:`Poller` submits none, or stops it, once it sees
        the stop), from the event thread."""
        with job.lock:
            self.stopping = True
            submission_id = self.submission_id
        if submission_id is not None:
            self.ray_client._call_soon(self.ray_client.jobs_api().stop_job, submission_id)
        return STOP_GRACE_S

    def lines(self, job: JobRecord) -> list[str]:
        """The output of the attempts so far, the running one's read live."""
        own = super().lines(job)
        submission_id = self.submission_id
        if job.is_done or submission_id is None:
            return own
        try:
            return own + self.ray_client.jobs_api().get_job_logs(submission_id).splitlines()
        except Exception:
            return own

    def pending_reason(self, job: JobRecord) -> str | None:
        """While the Jobs API says PENDING (the job is not placed) and every node that could
        take the command is busy: what it asks for and what the cluster has. (PENDING alone
        also covers the setting up of its runtime env.) While it is queued in the driver:
        the cap."""
        if job.status is not JobStatus.PENDING:
            return None
        if self.queued:
            cap = self.ray_client.command_slots.cap
            return (
                f"queued in this client: {cap} of its command jobs already run or wait in "
                f"Ray's Jobs API (max_command_jobs={cap}); it is submitted when one ends"
            )
        if self.submission_id is None:  # Ray's job agent is not up yet
            return None
        cluster = self.cached_reason(lambda: cluster_says(self.ask))
        if cluster is None:
            return None
        return (
            f"the command may be waiting for a node: it asks for {self.ask.describe()}; {cluster}"
        )


class FoundJob(JobKind):
    """A job this client did not submit, found by id: in the registry (a job submitted from
    inside a job) or in the Jobs API (a command job of another process). Its record is
    brought up to date by asking, by the client's :class:`Poller` or when a handle looks."""

    def __init__(self, client: RayClient, submission_id: str | None = None) -> None:
        super().__init__(client)
        self.ray_client = client
        self.submission_id = submission_id  # None: the registry's

    def refresh(self, job: JobRecord) -> float | None:
        self.poll(job)
        return None

    def poll(self, job: JobRecord) -> bool:
        """Reads the job again; ``True`` while it has not ended."""
        client = self.ray_client
        if job.is_done:
            return False
        if self.submission_id is not None:
            info = api_job_info(client.jobs_api().get_job_info(self.submission_id))
        else:
            record = client.registry.call("get", job.job_id)
            if record is None:
                return True  # unreachable for now: asked again later
            info = JobInfo(**record)  # the fields of the JobInfo its client recorded
        self.children = info.children
        job.observe(Observed(**{field: getattr(info, field, None) for field in Observed._fields}))
        return not job.is_done

    def poll_failed(self, job: JobRecord, exc: Exception) -> None:
        """Looking at it raised: it is looked at again when a handle asks."""
        del job, exc

    def cancel(self, job: JobRecord) -> float:
        """Stops it (and, through the registry, the jobs below it), from the event thread."""

        def stop() -> None:
            if self.submission_id is not None:
                self.ray_client.jobs_api().stop_job(self.submission_id)
            else:
                self.ray_client.stop_descendants(job.job_id, include_self=True)
            job.report(Outcome.stopped())

        self.ray_client._call_soon(stop)
        return STOP_GRACE_S

    def lines(self, job: JobRecord) -> list[str]:
        if self.submission_id is not None:
            return self.ray_client.jobs_api().get_job_logs(self.submission_id).splitlines()
        return list(self.ray_client.registry.call("logs", job.job_id, default=[]))

    def value(self, job: JobRecord) -> Any:
        known, value = self.ray_client.registry.call("result", job.job_id, default=(False, None))
        if not known:
            raise JobFailedError(job.job_id, job.status, "the job's return value was not kept")
        return value


def api_job_info(details: Any) -> JobInfo:
    """A Ray Jobs API record of a Fray command job (submitted by any process, with its
    ``fray_job_id`` and ``fray_name`` in the metadata) as JobInfo (Ray's statuses are
    Fray's, in capitals)."""
    status = JobStatus(details.status.lower())
    return JobInfo(
        job_id=details.metadata["fray_job_id"],
        name=details.metadata["fray_name"],
        status=status,
        attempts=1,
        error=details.message if status is JobStatus.FAILED else None,
        exit_code=getattr(details, "driver_exit_code", None),
        submitted_at=(details.start_time or 0) / 1000 or None,
        finished_at=(details.end_time or 0) / 1000 or None,
    )
