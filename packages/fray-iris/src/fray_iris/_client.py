# pyright: standard
"""IrisClient on the engine's hooks: Iris runs a job's attempts and both retry budgets, so a
job is submitted whole and its record follows what one thread per client asks Iris about all
its unfinished jobs in one call a round."""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iris.client import IrisClient as RawIrisClient
from iris.client.client import get_iris_ctx
from iris.cluster.client import resolve_job_user
from iris.cluster.client.job_info import get_job_info
from iris.cluster.types import Entrypoint as IrisEntrypoint
from iris.cluster.types import JobName
from iris.rpc import job_pb2

from fray import ActorConfig, Entrypoint, JobInfo, JobRequest, JobStatus, ResourceConfig
from fray.backend import (
    BaseClient,
    BaseJobHandle,
    ClientSpec,
    JobRecord,
    Outcome,
    Phase,
)
from fray.environment_variables import FRAY_CLIENT_SPEC
from fray.errors import (
    FrayError,
    InvalidRequestError,
    JobAlreadyExistsError,
    JobFailedError,
    JobNotFoundError,
)
from fray_iris import _convert as convert
from fray_iris._actors import IrisActorGroup
from fray_iris._convert import job_status, line, translate_errors
from fray_iris._host import host_actor
from fray_iris._job import IrisJob, observed
from fray_iris._task import ResultStore, default_local_results_url, is_loopback, serving_hosts
from fray_iris._views import FINISHED, JobView, fray_job_id
from fray_iris.environment_variables import FRAY_IRIS_RESULTS_URL

logger = logging.getLogger("fray.iris")

POLL_FIRST_S = 0.02  # the watcher's first pause after a job was submitted or moved on
POLL_MAX_S = 1.0  # growing by half each round to this
PENDING_REASON_EVERY_S = 1.0
STOP_GRACE_S = 120.0  # how long a stopped job may take before it is recorded STOPPED anyway
_IRIS_TIMEOUT = "Execution timeout exceeded"  # Iris's error for a task past its timeout
UNLIMITED_RETRIES = 1000  # Iris's retries for an actor that restarts without limit


class IrisJobHandle(BaseJobHandle):
    """Handle to an Iris job; see ``fray.JobHandle``."""

    __slots__ = ()

    @property
    def iris_job_id(self) -> str:
        """The Iris job id (wire form, ``/<user>/<name>...``)."""
        return self._job.data.wire.to_wire()


class IrisClient(BaseClient):
    """Runs Fray jobs and actors on an Iris cluster.

    Args:
        address: The controller, ``host:port`` or ``http://host:port``. ``None`` inside an
            Iris job: the job's own Iris context (its children, in its namespace).
        workspace: A project folder shipped to the workers with each job (Iris zips it).
        results_url: Where tasks store return values (an fsspec URL every task and this process
            reach). Default: ``FRAY_IRIS_RESULTS_URL``, else for a local controller a temp dir.
        iris_client: An ``iris.client.IrisClient`` to wrap (:meth:`shutdown` leaves it open).
        bundle_id: An uploaded workspace bundle to run jobs from.

    Raises:
        FrayError: ``cannot reach the Iris controller at ...`` (within 5 s).
    """

    scheme = "iris"
    capabilities = convert.IRIS
    cluster_runs_attempts = True  # Iris runs a job's attempts and both retry budgets
    handle_type = IrisJobHandle

    def __init__(
        self,
        address: str | None = None,
        *,
        workspace: str | Path | None = None,
        results_url: str | None = None,
        iris_client: RawIrisClient | None = None,
        bundle_id: str | None = None,
    ) -> None:
        super().__init__()
        ctx = get_iris_ctx()
        job_client = ctx.client if ctx is not None else None  # inside an Iris job: its own
        if workspace is not None and not Path(workspace).is_dir():
            raise InvalidRequestError.for_field(
                "IrisClient.workspace", str(workspace), "must be an existing folder"
            )
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise InvalidRequestError.for_field(
                "IrisClient.address", address, "use host:port or http://host:port"
            )
        if iris_client is None and address is None and job_client is None:
            why = f"outside an Iris job: IrisClient('host:port') or {FRAY_CLIENT_SPEC}=iris://..."
            raise InvalidRequestError.for_field("IrisClient.address", None, why)
        self._reopen: Callable[[], RawIrisClient] | None = None
        self.address = os.environ.get("IRIS_CONTROLLER_ADDRESS") if job_client else None
        if iris_client is not None:
            self.address = line.controller_address(iris_client) or self.address
        elif address is not None:
            address = address.strip()
            self.address = address if "://" in address else f"http://{address}"
            if job_client is None or workspace is not None or bundle_id is not None:
                convert.probe(self.address)
                ws = Path(workspace) if workspace is not None else None
                self._reopen = functools.partial(
                    RawIrisClient.remote, self.address, workspace=ws, bundle_id=bundle_id
                )
        # Inside a job, the job's own client keeps the job tree and namespace.
        self._raw: RawIrisClient | None = iris_client or (
            self._reopen() if self._reopen else job_client
        )
        self.user = ctx.job_id.user if ctx is not None and ctx.job_id else resolve_job_user(None)
        url = results_url or os.environ.get(FRAY_IRIS_RESULTS_URL)
        if not url and is_loopback(self.address):
            url = default_local_results_url()
        self.results = ResultStore(url) if url else None
        #: Where return values are stored, or ``None`` if no location is configured.
        self.results_url = self.results.url if self.results is not None else None
        self._to_stop: list[IrisActorGroup] = []  # groups shut down with the client
        self._found: dict[str, JobRecord] = {}  # jobs found by id (not stopped by shutdown)
        self._watched: set[JobRecord] = set()
        self._watcher: threading.Thread | None = None  # runs while jobs are watched
        self._added = threading.Event()  # set when a job is watched: the watcher looks soon

    @classmethod
    def from_spec(cls, spec: ClientSpec) -> IrisClient:
        """From ``iris://host:port[?ws=PATH]``, or ``iris`` (inside a job: its Iris context)."""
        spec.reject_unknown({"ws"}, address=True)
        return cls(spec.address, workspace=spec.params.get("ws") or None)

    @property
    def iris(self) -> RawIrisClient:
        """The wrapped ``iris.client.IrisClient`` (after :meth:`shutdown`, a fresh one)."""
        with self._lock:
            if self._raw is None and self._reopen is not None:
                self._raw = self._reopen()
            raw = self._raw
        assert raw is not None
        return raw

    def __repr__(self) -> str:
        """The client's controller and how many jobs it holds."""
        return f"IrisClient({self.address!r}, jobs={len(self._jobs)})"

    def _asking(self, action: str, job_id: str | None = None) -> Any:
        """A context that turns Iris's errors while doing ``action`` (to the job ``job_id``)
        into Fray's."""
        what = f"{action} {job_id}" if job_id else action
        return translate_errors(what, job_id=job_id, address=self.address)

    def _prepare(self, request: JobRequest) -> Any:
        """Checks the request against Iris and builds what to submit, once: the record's
        :class:`IrisJob` (an actor group's job gets the ``actor`` port).
        """
        if "/" in request.name:
            raise InvalidRequestError.for_field(
                "JobRequest.name", request.name, "a name without '/' (Iris job names nest by '/')"
            )
        entry = request.entrypoint
        kwargs = convert.to_iris_request(request)
        if entry.callable is host_actor:  # an actor group's job: each task serves its actor
            kwargs["ports"] = ["actor"]
            return IrisJob(IrisEntrypoint.from_callable(host_actor, *entry.args), kwargs)
        return IrisJob(convert.to_iris_entrypoint(request, self.results_url), kwargs)

    def _job_id(self, name: str, parent_id: str | None) -> str:
        """The Fray id: the name under its parent's (Iris refuses a name it already runs)."""
        return f"{parent_id}/{name}" if parent_id else name

    def _launch(self, job: JobRecord, adopt_existing: bool) -> None:
        """Submits the whole job: Iris runs its attempts and both retry budgets, and the
        watcher follows it. A refusal ends the record and is raised.
        """
        data: IrisJob = job.data
        kwargs = data.submit_args
        if adopt_existing:  # a running job of the same name is this job
            kwargs = {**kwargs, "existing_job_policy": job_pb2.EXISTING_JOB_POLICY_KEEP}
        try:
            with self._asking("submit", job.job_id):
                submitted = self.iris.submit(data.entrypoint, job.name, **kwargs)
        except FrayError as err:
            with self._lock:
                if self._jobs.get(job.job_id) is job:
                    del self._jobs[job.job_id]
            why = str(err)
            if isinstance(err, InvalidRequestError) and job.request:  # too big for every VM
                why = convert.explain_unplaceable(why, job.request.resources)
            job.end(JobStatus.FAILED, why)
            if isinstance(err, JobAlreadyExistsError):
                existing = None
                with contextlib.suppress(FrayError):
                    existing = self.get_job(job.job_id)
                raise JobAlreadyExistsError(job.name, existing) from err
            if why != str(err):
                raise InvalidRequestError(why, field="resources", allowed=why) from err
            raise
        data.wire = submitted.job_id
        data.entrypoint = None  # Iris has them: a finished job keeps little in memory
        data.submit_args = {}
        job.begin()
        self._watch(job)

    def _placed(self, job: JobRecord) -> None:
        """Iris enforces ``timeout`` and ``scheduling_timeout`` itself."""

    def _refresh(self, job: JobRecord) -> float | None:
        """Asks Iris for the job's state now (a waiter's own look; the watcher looks too)."""
        wire = job.data.wire
        if job.is_done or wire is None:  # not with Iris yet: it is watched once it is
            return None
        with self._asking("status of", job.job_id):
            state = line.states(self.iris, [wire]).get(wire.to_wire())
        if state is None:
            raise JobNotFoundError(job.job_id)
        self._apply(job, state)
        return POLL_MAX_S  # the watcher sees the end sooner, and wakes the waiters

    def _apply(self, job: JobRecord, state: str) -> bool:
        """Moves the record on to Iris's ``state``; returns whether it changed."""
        if state in FINISHED:
            self._finish(job)
            return True
        if job_status(state) is JobStatus.RUNNING:
            return job.placed()
        if job.request is not None and job.request.scheduling_timeout is not None:
            self._pending_reason(job)  # what its error will say if it is never placed
        return False

    def _finish(self, job: JobRecord) -> None:
        """Records the end Iris reports; a job stopped here ends once its children have."""
        wire = job.data.wire
        with self._asking("status of", job.job_id):
            view = line.status(self.iris, wire)
            if view.state not in FINISHED:
                return
            if job.phase is Phase.STOPPING:  # Iris stops its children too: it ends after them
                below = line.jobs(self.iris, wire.to_wire() + "/")
                if any(v.state not in FINISHED for v in below):
                    return
            tasks = line.tasks(self.iris, wire)
        job.data.tasks = tasks  # before it ends: its lines are whole as they say
        if view.state == "unschedulable":  # past its scheduling_timeout (Iris has no other)
            job.observe(observed(view, tasks))  # it ends as the engine ends an unplaced attempt
            reason = job.data.pending_reason or convert.pending_reason(view) or view.error
            job.settle(Outcome.unplaced(reason))
            return
        status = job_status(view.state)
        cause, error = (
            self._failure(job, view) if status is JobStatus.FAILED else (None, view.error or None)
        )
        job.observe(observed(view, tasks, status=status, cause=cause, error=error))

    def _failure(self, job: JobRecord, view: JobView) -> tuple[BaseException | None, str]:
        """The user's exception (where a task stored one) and the text to report."""
        for record in self._stored(job):
            if record is not None and record[0] == "error":
                return record[1].cause, record[1].error
        timeout = job.request.timeout if job.request is not None else None
        if view.error == _IRIS_TIMEOUT and timeout is not None:
            exc = TimeoutError(f"attempt {max(view.failures, 1)} ran longer than {timeout=:g}s")
            return exc, f"TimeoutError: {exc}"
        return None, view.error or f"Iris ended the job {view.state}"

    def _stored(self, job: JobRecord) -> list[Any]:
        """What each replica stored in the results store (``None`` where nothing; nothing
        without a store)."""
        store = self.results
        wire = job.data.wire.to_wire()
        return [store.read(store.task_path(wire, i)) for i in range(job.replicas)] if store else []

    def _pending_reason(self, job: JobRecord) -> str | None:
        """Why Iris has not placed the job, asked at most once a second."""
        data: IrisJob = job.data
        if data.wire is None or job.status is not JobStatus.PENDING:
            return None
        if time.monotonic() - data.pending_at >= PENDING_REASON_EVERY_S:  # one call a second
            with self._asking("status of", job.job_id):
                view = line.status(self.iris, data.wire)
            data.pending_at = time.monotonic()
            data.pending_reason = convert.pending_reason(view) or data.pending_reason
        return data.pending_reason

    def _cancel_attempt(self, job: JobRecord) -> float:
        """Asks Iris to stop the job; it is recorded STOPPED once Iris says it ended."""
        with self._asking("terminate", job.job_id):
            line.terminate(self.iris, job.data.wire)
        self._watch(job)
        return STOP_GRACE_S

    def _watch(self, job: JobRecord) -> None:
        """Watches ``job`` until it has ended (the watcher starts if need be, and looks soon)."""
        with self._lock:
            self._watched.add(job)
            if self._watcher is None:
                self._watcher = threading.Thread(
                    target=self._watch_jobs, name="fray-iris-watch", daemon=True
                )
                self._watcher.start()
        self._added.set()

    def _watch_jobs(self) -> None:
        """The one thread that asks about every watched job, in one call a round (per 1,000
        jobs): :data:`POLL_FIRST_S` after jobs were added or one moved on (jobs submitted
        together are asked about in one round), else after a pause growing to
        :data:`POLL_MAX_S`."""
        delay = POLL_FIRST_S
        while True:
            if self._added.wait(delay):
                time.sleep(POLL_FIRST_S)  # the rest of a burst of submits joins this round
                self._added.clear()
                delay = POLL_FIRST_S
            with self._lock:
                jobs = [job for job in self._watched if not job.is_done]
                self._watched = set(jobs)
                if not jobs:
                    self._watcher = None
                    return
            delay = min(delay * 1.5, POLL_MAX_S)
            try:
                with self._asking("status of jobs"):
                    states = line.states(self.iris, [j.data.wire for j in jobs])
                for job in jobs:
                    state = states.get(job.data.wire.to_wire())
                    if state is not None and not job.is_done and self._apply(job, state):
                        delay = POLL_FIRST_S  # a job moved on: look again soon
            except FrayError as exc:  # waiters ask for themselves, and see why
                logger.debug("watching Iris jobs failed: %s", exc)

    def _result(self, job: JobRecord) -> Any:
        """The value each replica stored (one replica: the value itself)."""
        if self.results is None:
            why = f"no results location: set {FRAY_IRIS_RESULTS_URL} (or IrisClient(results_url=))"
            raise JobFailedError(job.job_id, job.status, f"{why} to a URL every task can reach")
        stored = self._stored(job)
        if any(record is None or record[0] != "ok" for record in stored):
            why = "the job stored no return value (a command job has none; read its logs())"
            raise JobFailedError(job.job_id, job.status, why)
        return stored[0][1] if len(stored) == 1 else [record[1] for record in stored]

    def _info(self, job: JobRecord) -> JobInfo:
        """The record's facts, with the counts, attempts and exit code Iris knows and the
        job's children on the cluster.
        """
        data: IrisJob = job.data
        if data.wire is None:
            return super()._info(job)
        wire = data.wire.to_wire()
        with self._asking("info of", job.job_id):
            if not job.is_done:  # an ended job's record has what Iris said at its end
                view = line.status(self.iris, data.wire)
                job.observe(observed(view, line.tasks(self.iris, data.wire)))
            below = sorted(line.jobs(self.iris, wire + "/"), key=lambda v: v.submitted_at or 0)
        children = tuple(fray_job_id(v.job_id) for v in below if v.parent == wire)
        return job.info(children=children, pending_reason=self._pending_reason(job))

    def _lines(self, job: JobRecord, include_children: bool, tail: int | None) -> list[str]:
        """The job's lines from Iris (children's prefixed with their ids, where asked); an
        ended job's once they are whole (see :meth:`IrisJob.settled`)."""
        data: IrisJob = job.data
        if data.wire is None:
            return super()._lines(job, include_children, tail)
        window, pause = tail, POLL_FIRST_S
        while True:
            ended = job.is_done  # before the look: what it sees came after the end
            asked = window + 2 * job.replicas if window else 0  # room for the end markers
            with self._asking("logs of", job.job_id):
                entries = line.logs(self.iris, data.wire, max_lines=asked, tail=bool(window))
            lines = data.take(job, entries, include_children)
            if window and len(lines) < window and len(entries) == asked:
                window = None  # others' lines (children's, markers) filled it: look at all
                continue
            if tail:
                texts = [text for _key, text in lines][-tail:]
            else:
                texts = data.merge(lines, include_children)
            if not ended or data.settled(job):
                return texts
            window = None  # a task's marker may lie before the last lines: look at all
            time.sleep(pause)  # Iris has no call that waits for lines: look again soon
            pause = min(pause * 1.5, POLL_MAX_S)

    def get_job(self, job_id: str) -> IrisJobHandle:
        """A handle to a job on the cluster by Fray id or Iris wire id (or JobNotFoundError)."""
        if not isinstance(job_id, str) or not job_id.strip("/"):
            raise InvalidRequestError.for_field("job_id", job_id, "must be a job id string")
        job = self._jobs.get(job_id) or self._found.get(job_id)
        if job is not None:
            return IrisJobHandle(job)
        try:
            wire = JobName.from_wire(job_id if job_id.startswith("/") else f"/{self.user}/{job_id}")
        except ValueError:
            raise JobNotFoundError(job_id, f"{job_id!r} is not a valid Iris job id") from None
        with self._asking("status of", job_id):
            view = line.status(self.iris, wire)
        info = convert.job_info(view, ())
        job = JobRecord(
            self,
            info.job_id,
            parent=info.parent,
            name=info.name,
            replicas=info.replicas,
            data=IrisJob(wire=wire),
        )
        job.begin()
        with self._lock:
            job = self._found.setdefault(info.job_id, job)
        self._watch(job)  # the watcher, or a reader first, moves it on to Iris's state
        return IrisJobHandle(job)

    def list_jobs(self) -> list[JobInfo]:
        """Every job of this client's user on the cluster, oldest first."""
        with self._asking("list jobs"):
            views = line.jobs(self.iris, f"/{self.user}/")
        views.sort(key=lambda v: (v.submitted_at or 0, v.job_id))
        children: dict[str, list[str]] = collections.defaultdict(list)
        for view in views:
            if view.parent:
                children[view.parent].append(fray_job_id(view.job_id))
        return [convert.job_info(v, tuple(children.get(v.job_id, ()))) for v in views]

    def _create_actor_group(
        self,
        actor_class: type[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        name: str,
        count: int,
        resources: ResourceConfig | None,
        actor_config: ActorConfig | None,
        single: bool,
    ) -> IrisActorGroup:
        """Submits one job whose ``count`` replicas each serve one actor."""
        del single
        convert.ship_code_by_value(actor_class)
        config = actor_config or ActorConfig()
        resources = resources or ResourceConfig()
        # A dead actor restarts as on Ray (None: without limit where preemptible, else never),
        # as Iris retries of its task; one attempt more only stores that it died and exits 0.
        restarts = config.max_restarts
        if restarts is None:
            restarts = -1 if resources.preemptible else 0
        retries = UNLIMITED_RETRIES if restarts < 0 else restarts + 1
        records = f"actor-{os.urandom(4).hex()}"  # this group's, not an earlier one's of its name
        task_args = (actor_class, args, kwargs, name, config, restarts, self.results_url, records)
        request = JobRequest(
            name=name,
            entrypoint=Entrypoint.from_callable(host_actor, task_args),
            resources=resources.model_copy(update={"replicas": 1}),
            replicas=count,
            max_retries_failure=retries,
            max_retries_preemption=retries,
            priority=config.priority,
        )
        try:
            job = self.submit(request, adopt_existing=False)
        except JobAlreadyExistsError as err:
            raise InvalidRequestError.for_field(
                "name", name, "an actor group or job of that name is already running"
            ) from err
        group = IrisActorGroup(self, name, count, job, config, records)
        with self._lock:
            self._to_stop.append(group)
        return group

    def _hosting_address(self) -> str:
        """Where an actor hosted in this task is reached (only inside an Iris task)."""
        info = get_job_info()
        if info is None:
            raise InvalidRequestError(
                "host_actor on Iris runs inside an Iris job (its task serves the actor). Submit "
                "the code that hosts it as a job (client.submit(...)) and call host_actor there",
                field="host_actor",
            )
        return serving_hosts(info)[1]

    def _announce_hosted(self, handle: Any) -> Callable[[], None]:
        """Registers the endpoint ``<job id>/<name>-0`` (calls need the handle's secret)."""
        ctx = get_iris_ctx()
        assert ctx is not None and ctx.job_id is not None  # _hosting_address checked it
        endpoint = f"{ctx.job_id.to_wire()}/{handle.name}-0"
        host, port = handle.address
        registry = ctx.registry
        with translate_errors(f"register hosted actor {handle.name}"):
            endpoint_id = registry.register(endpoint, f"{host}:{port}", metadata={"fray": "hosted"})

        def withdraw() -> None:
            """Unregisters the endpoint (the task's end removes it anyway)."""
            try:
                registry.unregister(endpoint_id)
            except Exception as exc:  # the task's end removes it anyway
                logger.warning("could not unregister hosted actor %s: %s", endpoint, exc)

        return withdraw

    def _shutdown(self, wait: bool) -> None:
        """Shuts the actor groups down and closes the connection this client opened."""
        del wait
        for group in self._to_stop:  # the client takes no new ones now
            group.shutdown()
        raw = self._raw
        if raw is not None and self._reopen is not None:  # one it opened (a wrapped one stays)
            self._raw = None  # the next use opens a fresh one
            with contextlib.suppress(Exception):  # closing is best effort
                raw.shutdown()
