"""``RayClient``: Fray jobs and actors on a Ray cluster, on the engine of ``fray.backend``."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from fray import ActorConfig, JobInfo, JobRequest, JobStatus, ResourceConfig, TpuConfig
from fray.backend import ClientSpec, JobRecord, Outcome
from fray.errors import (
    ActorError,
    BackendUnavailableError,
    FrayError,
    InvalidRequestError,
    JobNotFoundError,
)
from fray_ray._actors import RayActorGroup, RayActorHandle, RayMember, kill_actors
from fray_ray._convert import HEAD_NODE_RESOURCE, RAY, actor_options, command_options, task_options
from fray_ray._convert import runtime_env as make_runtime_env
from fray_ray._host import LIFETIME_GROUP, host_class
from fray_ray._jobs import CallableJob, CommandJob, FoundJob, api_job_info
from fray_ray._placement import Ask, cluster_view
from fray_ray._registry import RegistryLink, driver_registry, forget_registries
from fray_ray._worker import runner
from fray_tpu.ray.gang import JobDataClient, TpuJobHandle, prepare_gang

__all__ = ["RayClient", "RayJobHandle", "job_client"]

logger = logging.getLogger("fray.ray")

DEFAULT_NAMESPACE = "fray"
_POLL_S = 0.1  # between looks at command jobs and jobs found by id

_job_clients: dict[tuple[str, str], RayClient] = {}
_job_clients_lock = threading.Lock()


def job_client(namespace: str, registry: str) -> RayClient:
    """The client that code inside a job or actor gets from ``current_client()``: one per
    worker process and (namespace, registry name), made on first use (it asks Ray nothing
    until it is used)."""
    key = (namespace, registry)
    client = _job_clients.get(key)
    if client is None or client.is_shutdown:
        with _job_clients_lock:
            client = _job_clients.get(key)
            if client is None or client.is_shutdown:
                client = RayClient(namespace=namespace, echo_logs=True, _registry=registry)
                _job_clients[key] = client
    return client


class RayJobHandle(TpuJobHandle):
    """A handle to a Ray job (``fray.JobHandle``); a TPU gang's failure raises
    :class:`fray_tpu.TpuJobFailedError` (a ``JobFailedError``) with its counts and reason, and
    its ``placement()`` and ``host_results()`` say where it ran and what each host returned."""

    __slots__ = ()


class _Owner:
    """The thread that starts (or joins) Ray and lives until the client stops it: Ray ties
    the processes it starts to the thread that started them, so a short-lived thread that
    first asked for a client must not be the one."""

    def __init__(self, init: Any) -> None:
        self._init = init
        self._started = threading.Event()
        self._stop = threading.Event()
        self._shutdown_ray = False
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="fray-ray-owner", daemon=True)
        self._thread.start()
        self._started.wait()

    def _run(self) -> None:
        try:
            self.result = self._init()
        except BaseException as exc:
            self.error = exc
            return
        finally:
            self._started.set()
        self._stop.wait()
        if self._shutdown_ray:
            import ray

            ray.shutdown()

    def stop(self, *, shutdown_ray: bool, timeout: float = 30.0) -> None:
        """Ends the thread (after ``ray.shutdown()`` where asked); waits up to ``timeout``."""
        self._shutdown_ray = shutdown_ray
        self._stop.set()
        self._thread.join(timeout)


class _Poller:
    """One thread per client that asks about the jobs learnt by asking (command jobs and
    jobs found by id), started with the first and gone with the last."""

    def __init__(self, client: RayClient) -> None:
        self._client = client
        self._jobs: dict[str, JobRecord] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, job: JobRecord) -> None:
        with self._cond:
            self._jobs[job.job_id] = job
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fray-ray-poll", daemon=True)
                self._thread.start()
            self._cond.notify()

    def close(self) -> None:
        """Stops looking (the client is shut down)."""
        with self._cond:
            self._jobs.clear()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._jobs:
                    self._thread = None
                    return
                jobs = list(self._jobs.values())
            for job in jobs:
                try:
                    again = job.data.poll(job)
                except Exception as exc:
                    logger.exception("looking at Ray job %s failed", job.job_id)
                    if not isinstance(job.data, FoundJob):
                        job.report(Outcome.failed(exc, f"internal error in RayClient: {exc!r}"))
                    again = False
                if not again:
                    with self._cond:
                        self._jobs.pop(job.job_id, None)
            with self._cond:
                self._cond.wait(_POLL_S)  # Ray's Jobs API and the registry only answer polls


class RayClient(JobDataClient):
    """Runs Fray jobs and actors on Ray.

    Args:
        address: A Ray address (``"ray://host:port"`` for Ray Client, ``"host:port"`` or
            ``"auto"``); ``None`` uses the Ray this process is already connected to, else
            ``RAY_ADDRESS``, else starts a local Ray (with the dashboard, for command jobs,
            and a ``head_node`` resource) that :meth:`shutdown` stops again.
        namespace: Where this client's actors and job registry live (``"fray"``).
        echo_logs: Also print job output in the workers (Ray forwards it to the driver).

    ``shutdown()`` returns within about 40 seconds whatever the jobs do: each job gets 10 s
    (a command job 30 s) to stop before it is recorded STOPPED anyway, actors 10 s to be
    killed, and a Ray this client started a few seconds to stop. Calls and futures of its
    actors then raise ``ActorDiedError``.
    """

    scheme = "ray"
    capabilities = RAY
    handle_type = RayJobHandle
    ignores = ("setup_scripts", "sync_packages")

    def __init__(
        self,
        address: str | None = None,
        *,
        namespace: str | None = None,
        echo_logs: bool = True,
        _registry: str | None = None,
    ) -> None:
        import ray

        super().__init__()
        if namespace is not None and (not isinstance(namespace, str) or not namespace.strip()):
            raise InvalidRequestError.for_field("namespace", namespace, "a non-empty string")
        self.namespace = namespace or DEFAULT_NAMESPACE
        self.echo_logs = echo_logs
        self.mirrors = _registry is not None  # inside a job: its jobs are recorded for the driver
        self._owner: _Owner | None = None
        self._owns_ray = False  # it started the local Ray it is connected to
        self._dashboard: str | None = None
        self._jobs_api: Any = None
        self._view: Any = None  # the nodes as last read (see _check_placeable)
        self._groups: list[RayActorGroup] = []
        self.poller = _Poller(self)
        if _registry is not None:
            self.registry = RegistryLink(_registry, quiet=True)
        else:
            if not ray.is_initialized():
                self._connect(address)
            elif address is not None:
                raise InvalidRequestError.for_field(
                    "address",
                    address,
                    "this process is already connected to Ray; pass no address to use that "
                    "connection (or ray.shutdown() first)",
                )
            self.registry = RegistryLink(*driver_registry())
        self._execute = ray.remote(max_retries=0)(runner(job_client))
        self._remotes: dict[str, Any] = {}  # see _remote_with
        self._hosts: dict[type[Any], Any] = {}

    def _connect(self, address: str | None) -> None:
        """Connects this process to Ray (starting a local one without an address) from a
        thread that outlives the caller's."""
        import ray

        address = address or os.environ.get("RAY_ADDRESS") or None

        def init() -> Any:
            if address is None:
                return ray.init(
                    address="local",
                    include_dashboard=True,
                    resources={HEAD_NODE_RESOURCE: 1},
                    log_to_driver=self.echo_logs,
                )
            return ray.init(address=address, log_to_driver=self.echo_logs)

        owner = _Owner(init)
        if owner.error is not None:  # Ray raises bare Exceptions for start-up timeouts
            where = f"at {address}" if address else "(starting a local Ray)"
            error = owner.error
            raise BackendUnavailableError(
                f"cannot connect to Ray {where}: {type(error).__name__}: {error}"
            ) from error
        self._owner = owner
        self._owns_ray = address is None
        self._dashboard = getattr(owner.result, "dashboard_url", None) or None

    @classmethod
    def from_spec(cls, spec: ClientSpec) -> RayClient:
        """``ray``, ``ray?namespace=N`` or ``ray://host:port[?namespace=N]``."""
        spec.reject_unknown({"namespace"}, address=True)
        address = f"ray://{spec.address}" if spec.address is not None else None
        return cls(address, namespace=spec.params.get("namespace"))

    def __repr__(self) -> str:
        return f"RayClient(namespace={self.namespace!r}, jobs={len(self._jobs)})"

    # -- jobs: the engine's hooks ------------------------------------------------------------

    def _prepare(self, request: JobRequest) -> Any:
        """Works out once what every attempt of the request needs (and refuses what this
        cluster cannot run)."""
        import cloudpickle

        if isinstance(request.resources.device, TpuConfig):
            ask = Ask({f"TPU-{request.resources.device.variant}-head": 1.0})
            self._check_placeable(ask)
            return prepare_gang(request, self)
        self._check_head_node(request.resources, "JobRequest.resources.preemptible")
        entry = request.entrypoint
        if not entry.is_callable:
            kwargs = command_options(request)
            env_vars = dict(request.env_vars)
            env_vars.setdefault("FRAY_CLIENT_SPEC", f"ray?namespace={self.namespace}")
            kwargs["runtime_env"] = make_runtime_env(request.environment, env_vars)
            self._check_placeable(Ask.of(kwargs))
            self.jobs_api()
            return CommandJob(self, kwargs, Ask.of(kwargs))
        options, env = task_options(request)
        if "pip" in options.get("runtime_env", {}):
            self._check_pip_applies()
        ask = Ask.of(options)
        self._check_placeable(ask)
        try:
            payload = cloudpickle.dumps((entry.callable, entry.args, entry.kwargs))
        except Exception as exc:
            raise InvalidRequestError.for_field(
                "JobRequest.entrypoint",
                entry.describe(),
                f"must be picklable to run on Ray ({type(exc).__name__}: {exc})",
            ) from exc
        return CallableJob(self, self._remote_with(options), payload, env, ask)

    def _remote_with(self, options: dict[str, Any]) -> Any:
        """The job wrapper's remote function with ``options``: Ray's ``options()`` checks
        them and builds a class on each call (about 45 us a submit), so up to 64 are kept,
        by their repr (options are plain data: numbers, strings, lists and dicts)."""
        key = repr(options)
        remote = self._remotes.get(key)
        if remote is None:
            if len(self._remotes) >= 64:
                self._remotes.clear()
            remote = self._remotes[key] = self._execute.options(**options)
        return remote

    def _launch(self, job: JobRecord, adopt_existing: bool) -> None:
        if self.mirrors:  # the driver sees a job submitted from inside a job at once
            self.registry.ref("put", job.job_id, _fields(job))
        super()._launch(job, adopt_existing)

    def _placed(self, job: JobRecord) -> None:
        super()._placed(job)
        if self.mirrors:  # ... and that it runs
            self.registry.ref("put", job.job_id, _fields(job))

    def _lines(self, job: JobRecord, include_children: bool, tail: int | None) -> list[str]:
        lines = job.data.lines(job)
        if include_children:
            for child in self.registry.call("descendants", job.job_id, default=[]):
                lines += [
                    f"[{child}] {line}" for line in self.registry.call("logs", child, default=[])
                ]
        return lines if tail is None else lines[len(lines) - tail :]

    def _info(self, job: JobRecord, children: list[str] | None = None) -> JobInfo:
        data = job.data
        if children is None:
            children = list(self.registry.call("children", job.job_id, default=[]) or [])
        if isinstance(data, FoundJob):
            children = list(data.children) + [c for c in children if c not in data.children]
        own = [child.job_id for child in job.children]
        update: dict[str, Any] = {"children": tuple(own + [c for c in children if c not in own])}
        if not job.is_done:
            update["pending_reason"] = self._pending_reason(job)
        return job.info(**update)

    def _job_ended(self, job: JobRecord) -> None:
        super()._job_ended(job)
        if self.mirrors:  # before the job's waiters wake: the driver then sees its end
            value = job.value if job.status is JobStatus.SUCCEEDED else None
            lines = [line for _ts, line in job.log.snapshot()]
            self.registry.call("finish", job.job_id, _fields(job), value, lines)
        elif isinstance(job.data, CallableJob) and len(job.log):
            self.registry.ref("ended", job.job_id)  # its streamed copy is no longer read

    def stop_children_of(self, job_id: str) -> None:
        """Stops the unfinished jobs this client submitted from job ``job_id`` (children do
        not outlive their parent); returns once they have ended."""
        if not self._jobs:
            return
        with self._lock:
            children = [j for j in self._jobs.values() if j.parent == job_id and not j.is_done]
        if children:
            self._terminate(children)

    def stop_descendants(self, job_id: str, *, include_self: bool = False) -> None:
        """Records every job below ``job_id`` (submitted from inside it, anywhere in the
        cluster) as stopped in the registry: its owner is being stopped with it."""
        ids = list(self.registry.call("descendants", job_id, default=[]) or [])
        if include_self:
            ids.append(job_id)
        if ids:
            self.registry.call("request_stop", ids)

    # -- finding and listing jobs ------------------------------------------------------------

    def get_job(self, job_id: str) -> Any:
        """A handle to a job of this client or of its job tree (a job submitted from inside
        one of its jobs), or to a Fray command job in the cluster's Jobs API.

        Raises:
            JobNotFoundError: No such job anywhere this client can see.
        """
        try:
            return super().get_job(job_id)
        except JobNotFoundError as missing:
            found = self._found(job_id)
            if found is None:
                raise missing from None
            return found

    def _found(self, job_id: str) -> RayJobHandle | None:
        data: FoundJob | None = None
        if isinstance(job_id, str) and self.registry.call("get", job_id) is not None:
            data = FoundJob(self)
        else:
            for details in self._api_details():
                if (details.metadata or {}).get("fray_job_id") == job_id:
                    data = FoundJob(self, details.submission_id)
        if data is None:
            return None
        job = JobRecord(self, job_id, None)
        job.data = data
        job.begin()  # it runs elsewhere: stopping it asks that place (FoundJob.cancel)
        if data.poll(job):
            self.poller.watch(job)
        return RayJobHandle(job)

    def list_jobs(self) -> list[JobInfo]:
        """Every job of this client and the jobs submitted from inside them, and the Fray
        command jobs of the cluster's Jobs API, oldest first."""
        with self._lock:
            jobs = list(self._jobs.values())
        records = [] if self.mirrors else self.registry.call("list", default=[]) or []
        below: dict[str, list[str]] = {}
        for record in records:
            if record.get("parent"):
                below.setdefault(record["parent"], []).append(record["job_id"])
        infos = {job.job_id: self._info(job, below.get(job.job_id, [])) for job in jobs}
        roots = tuple(f"{job.job_id}/" for job in jobs)
        for details in self._api_details():
            info = api_job_info(details)
            infos.setdefault(info.job_id, info)
        for record in records:
            if record["job_id"] not in infos and record["job_id"].startswith(roots):
                fields = {k: v for k, v in record.items() if k in JobInfo.model_fields}
                infos[record["job_id"]] = JobInfo(**fields)
        return sorted(infos.values(), key=lambda info: info.submitted_at or 0.0)

    def _api_details(self) -> list[Any]:
        """Fray command jobs in the cluster's Jobs API (any driver's), if it is reachable."""
        if self.mirrors:
            return []
        try:
            jobs = self.jobs_api().list_jobs()
        except Exception as exc:
            logger.debug("Ray Jobs API not reachable: %s", exc)
            return []
        return [d for d in jobs if (d.metadata or {}).get("fray_job_id")]

    def jobs_api(self) -> Any:
        """Ray's ``JobSubmissionClient`` for this cluster (command jobs need the dashboard).

        Raises:
            BackendUnavailableError: The Jobs API is not reachable.
        """
        if self._jobs_api is None:
            import ray
            from ray.job_submission import JobSubmissionClient

            address = self._dashboard or ray.get_runtime_context().gcs_address
            try:
                self._jobs_api = JobSubmissionClient(address)
            except Exception as exc:
                raise BackendUnavailableError(
                    "command jobs on Ray run through Ray's Jobs API, which needs the Ray "
                    f"dashboard; it is not reachable ({type(exc).__name__}: {exc}). Start Ray "
                    "with the dashboard, or run the command from a callable job"
                ) from exc
        return self._jobs_api

    # -- checks ------------------------------------------------------------------------------

    def _check_placeable(self, ask: Ask, field: str = "JobRequest.resources") -> None:
        """On a local Ray this client started (it cannot grow), refuses what no node of it
        could ever take. Elsewhere a cluster may grow, and Ray does not say whether it can:
        such a request waits, and its pending reason says what no node has."""
        if not self._owns_ray:
            return
        view = self._view
        if view is not None and view.fits_some_node(ask):
            return
        view = self._view = cluster_view()
        if not view.fits_some_node(ask):
            raise InvalidRequestError.for_field(
                field,
                ask.describe(),
                f"no node of the local Ray this client started could ever take it "
                f"({view.shortfall(ask)}); ask for what a node has, or connect to a cluster "
                "that has it",
            )

    def _check_head_node(self, resources: ResourceConfig, field: str) -> None:
        """Refuses ``preemptible=False`` on a cluster without a head-node resource."""
        if resources.preemptible:
            return
        import ray

        if HEAD_NODE_RESOURCE not in ray.cluster_resources():
            raise InvalidRequestError.for_field(
                field,
                False,
                f"preemptible=False pins work to the head node through the "
                f"{HEAD_NODE_RESOURCE!r} resource, which this Ray cluster does not have; "
                f"start the head with resources={{'{HEAD_NODE_RESOURCE}': 1}}",
            )

    def _check_pip_applies(self) -> None:
        """A Ray job whose runtime env sets ``py_executable`` (Ray does so for a driver run
        under ``uv run``, to replicate its environment) starts every worker with that
        interpreter, and Ray then silently ignores a task's pip packages: refuse instead."""
        import ray

        executable = (ray.get_runtime_context().runtime_env or {}).get("py_executable")
        if executable:
            raise InvalidRequestError.for_field(
                "JobRequest.environment.pip_packages",
                "(set)",
                "empty when this Ray job starts its workers with py_executable="
                f"{executable!r}, as Ray does for a driver run under `uv run`: Ray would run "
                "the job without the packages. Add them to the project instead, or start "
                "the driver with RAY_ENABLE_UV_RUN_RUNTIME_ENV=0",
            )

    # -- actors ------------------------------------------------------------------------------

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
    ) -> RayActorGroup:
        """Creates ``count`` Ray actors named ``{name}-{i}`` in this client's namespace.

        Preemptible actors restart when they die (``max_restarts=-1`` unless
        ``actor_config`` says otherwise); ``preemptible=False`` pins them to the head node.
        """
        import ray

        del single
        config = actor_config or ActorConfig()
        options = actor_options(resources)
        preemptible = resources is None or resources.preemptible
        if resources is not None:
            self._check_head_node(resources, "resources.preemptible")
            self._check_placeable(Ask.of(options), "resources")
        restarts = config.max_restarts
        if restarts is None:
            restarts = -1 if preemptible else 0
        options.update(
            namespace=self.namespace,
            max_concurrency=config.max_concurrency,
            max_restarts=restarts,
            max_task_retries=config.max_task_retries or 0,
        )
        host = self._hosts.get(actor_class)
        if host is None:  # Fray's own methods (fray_lifetime) run apart from the user's calls
            make: Any = ray.remote(concurrency_groups={LIFETIME_GROUP: 16})  # pyright: ignore[reportCallIssue]
            host = self._hosts[actor_class] = make(host_class(actor_class))
        members: list[RayMember] = []
        try:
            for index in range(count):
                actor_name = f"{name}-{index}"
                try:
                    actor = host.options(name=actor_name, **options).remote(
                        job_client,
                        actor_class,
                        args,
                        kwargs,
                        actor_name,
                        self.namespace,
                        index,
                        name,
                        self.registry.name,
                    )
                except ValueError as exc:
                    raise ActorError(
                        f"an actor named {actor_name!r} already exists in namespace "
                        f"{self.namespace!r}"
                    ) from exc
                handle = RayActorHandle(actor_name, self.namespace, actor)
                members.append(RayMember(index, handle, actor.fray_ready.remote()))
        except BaseException:
            kill_actors([m.handle for m in members])
            raise
        group = RayActorGroup(
            name,
            self.namespace,
            members,
            self._forget_group,
            ask=Ask.of(options),
            registry=self.registry.name,
        )
        with self._lock:
            self._groups.append(group)
        return group

    def _forget_group(self, group: RayActorGroup) -> None:
        with self._lock:
            if group in self._groups:
                self._groups.remove(group)

    def _hosting_address(self) -> str:
        """This node's address in the cluster, or loopback when every node of the cluster
        is this machine (a hosted actor's server listens there)."""
        import ray

        here = ray.util.get_node_ip_address()
        nodes = {n["NodeManagerAddress"] for n in ray.nodes() if n.get("Alive")}
        return "127.0.0.1" if nodes <= {here} else here

    # -- shutdown ----------------------------------------------------------------------------

    def _shutdown(self, wait: bool) -> None:
        """Every job has ended: kills the client's actors, stops its threads and a Ray it
        started."""
        with self._lock:
            groups = list(self._groups)
        for group in groups:
            try:
                group.shutdown()
            except FrayError as exc:
                logger.warning("shutting down actor group %s: %s", group.name, exc)
        self.poller.close()
        owner = self._owner
        if owner is not None:
            if self._owns_ray:
                forget_registries()
            owner.stop(shutdown_ray=self._owns_ray)


def _fields(job: JobRecord) -> dict[str, Any]:
    """A job's JobInfo fields, as the registry keeps them."""
    return job.info().model_dump(exclude={"children", "pending_reason"}, mode="json")
