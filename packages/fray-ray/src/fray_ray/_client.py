"""``RayClient``: Fray jobs and actors on a Ray cluster."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import concurrent.futures
import logging
import os
import secrets
import threading
import time
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

from fray import (
    ActorConfig,
    ClientSpec,
    JobInfo,
    JobRequest,
    JobStatus,
    ResourceConfig,
    TpuConfig,
)
from fray.backend import JobHistory, forget_default_client, job_history_limit
from fray.environment_variables import FRAY_CLIENT_SPEC, FRAY_JOB_ID
from fray.errors import (
    ActorError,
    BackendUnavailableError,
    FrayError,
    InvalidRequestError,
    JobNotFoundError,
)
from fray_ray._actors import RayActorGroup, RayActorHandle, RayMember, host_class
from fray_ray._convert import (
    HEAD_NODE_RESOURCE,
    actor_options,
    command_options,
    runtime_env,
    task_options,
)
from fray_ray._jobs import (
    CallableJob,
    CommandJob,
    RayJobHandle,
    RemoteJobHandle,
    SubmittedJobHandle,
    Watcher,
    _Job,
    api_job_info,
)
from fray_ray._registry import JobRegistry
from fray_ray._worker import bound as bound_job
from fray_ray._worker import current_job, execute, job_token

__all__ = ["RayClient"]

T = TypeVar("T")
logger = logging.getLogger("fray.ray")

DEFAULT_NAMESPACE = "fray"
REGISTRY_NAMESPACE = "fray-internal"

_registries: dict[tuple[str, str], tuple[str, Any]] = {}
_registries_lock = threading.Lock()


def _driver_registry(parts: type[_RemoteParts]) -> tuple[str, Any]:
    """The job registry of this driver process in the connected Ray session: one actor,
    shared by every RayClient of the process, created on first use, gone with the driver."""
    import ray

    context = ray.get_runtime_context()
    key = (str(context.gcs_address), str(context.get_job_id()))
    with _registries_lock:
        found = _registries.get(key)
        if found is None:
            name = f"fray-registry-{os.getpid()}-{secrets.token_hex(3)}"
            options: dict[str, Any] = {
                "name": name,
                "namespace": REGISTRY_NAMESPACE,
                "num_cpus": 0,
                "max_concurrency": 1,
                "max_restarts": -1,  # a lost registry comes back (empty) instead of failing
                "max_task_retries": -1,
            }
            if HEAD_NODE_RESOURCE in ray.cluster_resources():  # off preemptible nodes
                options["resources"] = {HEAD_NODE_RESOURCE: 0.001}
            actor = parts.registry.options(**options).remote(job_history_limit())
            found = _registries[key] = (name, actor)
        return found


class _RemoteParts:
    """Ray objects made remote once per process."""

    lock = threading.Lock()
    execute: Any = None
    registry: Any = None
    session: tuple[str, str] | None = None
    hosts: ClassVar[dict[type[Any], Any]] = {}

    @classmethod
    def host(cls, actor_class: type[Any]) -> Any:
        """The Ray actor class hosting ``actor_class`` (made once per class)."""
        import ray

        remote = cls.hosts.get(actor_class)
        if remote is None:
            remote = cls.hosts[actor_class] = ray.remote(host_class(actor_class))
        return remote

    @classmethod
    def load(cls) -> type[_RemoteParts]:
        """Makes the remote objects for the Ray session this process is connected to
        (again after a ``ray.shutdown()`` and a new ``ray.init()``: objects made remote in an
        earlier session are not reused)."""
        import ray

        context = ray.get_runtime_context()
        session = (str(context.gcs_address), str(context.get_job_id()))
        with cls.lock:
            if cls.session != session:
                cls.hosts = {}
                cls.registry = ray.remote(JobRegistry)
                cls.execute = ray.remote(max_retries=0)(execute)
                cls.session = session
        return cls


class _Prepared:
    """A callable request made ready for Ray once: its task options, the env vars the
    wrapper sets, the pickled entrypoint and, once it is submitted again, a function
    exported with all of that bound in (one per submitting parent)."""

    MAX_BOUND = 64  # exported functions per client: each stays in the GCS for the session

    def __init__(
        self,
        request: JobRequest,
        execute: Any,
        options: dict[str, Any],
        env: dict[str, str],
        payload: bytes,
    ) -> None:
        self.request = request
        self.options = options
        self.env = env
        self.payload = payload
        self.remote = execute.options(**options)
        self.uses = 0
        self.bound_remotes: dict[str | None, tuple[Any, int]] = {}
        self.parts = (self.remote, tuple(env.items()), payload)  # what a CallableJob takes

    def bound(self, client: RayClient, parent: str | None) -> tuple[Any, int] | None:
        """The exported function for this request and parent, and its id salt; ``None``
        on a first submission (a one-off job is not worth an export)."""
        import ray

        self.uses += 1
        found = self.bound_remotes.get(parent)
        if found is not None or self.uses < 2:
            return found
        with client._lock:  # pyright: ignore[reportPrivateUsage]
            if client.bound_functions >= self.MAX_BOUND:
                return None
            client.bound_functions += 1
        salt = secrets.randbits(32)
        env = tuple(self.env.items())
        context = (client.namespace, client.registry_name, client.echo_logs, env)
        function = bound_job(self.payload, self.request.name, parent, context, salt)
        remote = ray.remote(max_retries=0)(function).options(**self.options)
        found = self.bound_remotes[parent] = (remote, salt)
        return found


class RayClient:
    """Runs Fray jobs and actors on Ray.

    Args:
        address: A Ray address (``"ray://host:port"`` for Ray Client, ``"host:port"`` or
            ``"auto"``); ``None`` uses the Ray this process is already connected to, else
            ``RAY_ADDRESS``, else starts a local Ray (with the dashboard, for command jobs,
            and a ``head_node`` resource) that :meth:`shutdown` stops again.
        namespace: Where this client's actors and job registry live (``"fray"``).
        echo_logs: Also print job output in the workers (Ray forwards it to the driver).
    """

    scheme = "ray"
    _worker_clients: ClassVar[dict[tuple[str, str], RayClient]] = {}
    _worker_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        address: str | None = None,
        *,
        namespace: str | None = None,
        echo_logs: bool = True,
        _registry: str | None = None,
    ) -> None:
        import ray

        if namespace is not None and (not isinstance(namespace, str) or not namespace.strip()):
            raise InvalidRequestError.for_field("namespace", namespace, "a non-empty string")
        self.namespace = namespace or DEFAULT_NAMESPACE
        self.echo_logs = echo_logs
        self.is_shutdown = False
        self._lock = threading.Lock()
        self._history: JobHistory[_Job] = JobHistory()
        self._groups: list[RayActorGroup] = []
        # TPU gang jobs (fray-tpu's handles): every unfinished one and the last finished ones.
        self._tpu_jobs: JobHistory[Any] = JobHistory()
        self._owns_ray = False
        self._dashboard: str | None = None
        self._jobs_api: Any = None
        self._resources: dict[str, float] | None = None
        self._prepared_cache: dict[int, _Prepared] = {}
        self.bound_functions = 0  # exported job functions (see _Prepared.bound)
        self._watcher = Watcher(CallableJob.WATCH_AFTER, self._watched_job)
        self._progress_lock = threading.Lock()
        self._progress = threading.Condition(self._progress_lock)
        self._progress_waiters = 0
        self._generation = 0
        self._retries = 0
        self.executor = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="fray-ray")
        if _registry is not None:  # a client inside a job or actor: the driver's registry
            self._parts = _RemoteParts.load()
            self.mirrors = True
            self.registry_name = _registry
            self._owns_registry = False
            self._registry: Any = None
            return
        self.mirrors = False
        if not ray.is_initialized():
            self._connect(address)
        elif address is not None:
            raise InvalidRequestError.for_field(
                "address",
                address,
                "this process is already connected to Ray; pass no address to use that "
                "connection (or ray.shutdown() first)",
            )
        self._parts = _RemoteParts.load()
        self.registry_name, self._registry = _driver_registry(self._parts)
        self._owns_registry = False

    def _connect(self, address: str | None) -> None:
        import ray

        address = address or os.environ.get("RAY_ADDRESS") or None
        try:
            if address is None:
                context = ray.init(
                    address="local",
                    include_dashboard=True,
                    resources={HEAD_NODE_RESOURCE: 1},
                    log_to_driver=self.echo_logs,
                )
                self._owns_ray = True
            else:
                context = ray.init(address=address, log_to_driver=self.echo_logs)
        except Exception as exc:  # Ray raises bare Exceptions for start-up timeouts
            where = f"at {address}" if address else "(starting a local Ray)"
            raise BackendUnavailableError(
                f"cannot connect to Ray {where}: {type(exc).__name__}: {exc}"
            ) from exc
        self._dashboard = getattr(context, "dashboard_url", None) or None

    @classmethod
    def from_spec(cls, spec: ClientSpec) -> RayClient:
        """``ray``, ``ray?namespace=N`` or ``ray://host:port[?namespace=N]``."""
        spec.reject_unknown({"namespace"}, address=True)
        address = f"ray://{spec.address}" if spec.address is not None else None
        return cls(address, namespace=spec.params.get("namespace"))

    @classmethod
    def for_job(cls, namespace: str, registry: str) -> RayClient:
        """The client that code inside a job or actor gets from ``current_client()``."""
        key = (namespace, registry)
        client = cls._worker_clients.get(key)
        if client is None or client.is_shutdown:
            with cls._worker_lock:
                client = cls._worker_clients.get(key)
                if client is None or client.is_shutdown:
                    client = cls(namespace=namespace, echo_logs=True, _registry=registry)
                    cls._worker_clients[key] = client
        return client

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"RayClient(namespace={self.namespace!r}, jobs={len(self._history)})"

    # -- jobs --------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.is_shutdown:
            raise FrayError("this RayClient was shut down; create a new one")

    def _new_job_id(self, name: str, parent: str | None, token: str | None = None) -> str:
        own = f"{name}-{token or secrets.token_hex(4)}"
        return f"{parent}/{own}" if parent else own

    def submit(self, request: JobRequest, *, adopt_existing: bool = True) -> Any:
        """Starts a job: a Ray task per replica (callable), a Ray job (command) or a TPU gang.

        ``adopt_existing`` has no effect: job names are not unique on Ray (every submit
        starts a new job with a new id).
        """
        self._check_open()
        prepared = self._prepared_cache.get(id(request))
        if prepared is None or prepared.request is not request:
            if not isinstance(request, JobRequest):
                raise InvalidRequestError.for_field("request", request, "must be a JobRequest")
            if isinstance(request.resources.device, TpuConfig):
                return self._submit_tpu(request, self._new_job_id(request.name, current_job()))
            self._check_head_node(request.resources, "JobRequest.resources.preemptible")
            if not request.entrypoint.is_callable:
                return self._submit_command(request, current_job())
            prepared = self._prepared(request)
        # A callable request, validated and prepared (once per request object).
        parent = current_job()
        job = self._start_bound(request, prepared, parent)
        if job is None:
            job = CallableJob(
                self, self._new_job_id(request.name, parent), request, parent, prepared.parts
            )
            self._start(job)
        return RayJobHandle(job)

    def _submit_command(self, request: JobRequest, parent: str | None) -> RayJobHandle:
        job_id = self._new_job_id(request.name, parent)
        job = CommandJob(self, job_id, request, parent, self._command_kwargs(request, job_id))
        self.jobs_api()
        self._start(job)
        return RayJobHandle(job)

    def _start(self, job: _Job) -> None:
        """Registers a job and starts its first attempt."""
        with self._lock:
            self._history.add(job.job_id, job)
        if self.mirrors:  # recorded before it runs, so its parent can see it at once
            self._registry_call("put", job.job_id, job.record(), wait=True)
        job.start()
        if self.mirrors and not job.done.flag:
            self._registry_call("put", job.job_id, job.record(), wait=True)

    def _start_bound(
        self, request: JobRequest, prepared: _Prepared, parent: str | None
    ) -> CallableJob | None:
        """Starts the first attempt of a resubmitted single-replica request through its
        exported function (no task arguments); ``None`` where that does not apply."""
        if self.mirrors or request.replicas != 1:
            return None  # nested jobs are recorded before they start; replicas need an index
        bound = prepared.bound(self, parent)
        if bound is None:
            return None
        remote, salt = bound
        ref = remote.remote()
        # The object id starts with the task id, from which the worker takes the same token.
        job_id = self._new_job_id(request.name, parent, job_token(ref.binary(), salt))
        job = CallableJob(self, job_id, request, parent, prepared.parts, first=ref)
        with self._lock:
            clash = job_id in self._history
            if not clash:
                self._history.add(job_id, job)
        if clash:  # 32 random bits met an id in use: run it under a fresh id instead
            self.cancel_refs([ref], wait=True)
            return None
        self._watcher.add(job, 1)
        return job

    def _prepared(self, request: JobRequest) -> _Prepared:
        """The Ray options, the env the wrapper sets and the pickled entrypoint of a request:
        computed once per request object (resubmitting the same request, as launchers and
        retries do, costs no re-validation or re-pickling)."""
        import cloudpickle

        key = id(request)
        with self._lock:
            cached = self._prepared_cache.get(key)
        if cached is not None and cached.request is request:
            return cached
        options, env = task_options(request)
        if "pip" in options.get("runtime_env", {}):
            self._check_pip_applies()
        entry = request.entrypoint
        try:
            payload = cloudpickle.dumps((entry.callable, entry.args, entry.kwargs))
        except Exception as exc:
            raise InvalidRequestError.for_field(
                "JobRequest.entrypoint",
                entry.describe(),
                f"must be picklable to run on Ray ({type(exc).__name__}: {exc})",
            ) from exc
        prepared = _Prepared(request, self._parts.execute, options, env, payload)
        with self._lock:
            if len(self._prepared_cache) >= 64:
                self._prepared_cache.pop(next(iter(self._prepared_cache)))
            self._prepared_cache[key] = prepared
        return prepared

    def _check_pip_applies(self) -> None:
        """A Ray job whose runtime env sets ``py_executable`` (Ray does so for a driver run
        under ``uv run``, to replicate its environment) starts every worker with that
        interpreter, and Ray then silently ignores a task's pip packages: refuse instead."""
        import ray

        job_env = ray.get_runtime_context().runtime_env or {}
        executable = job_env.get("py_executable")
        if executable:
            raise InvalidRequestError.for_field(
                "JobRequest.environment.pip_packages",
                "(set)",
                "empty when this Ray job starts its workers with py_executable="
                f"{executable!r}, as Ray does for a driver run under `uv run`: Ray would run "
                "the job without the packages. Add them to the project instead, or start "
                "the driver with RAY_ENABLE_UV_RUN_RUNTIME_ENV=0",
            )

    def _command_kwargs(self, request: JobRequest, job_id: str) -> dict[str, Any]:
        kwargs = command_options(request)
        env_vars = dict(request.env_vars)
        # The command's own jobs use this cluster and become its children.
        env_vars.setdefault(FRAY_CLIENT_SPEC, f"ray?namespace={self.namespace}")
        env_vars[FRAY_JOB_ID] = job_id
        env = runtime_env(request.environment, env_vars)
        kwargs["runtime_env"] = env
        return kwargs

    def _submit_tpu(self, request: JobRequest, job_id: str) -> Any:
        try:
            from fray_tpu import ray as tpu_ray  # pyright: ignore[reportAttributeAccessIssue]

            submit_tpu_job = tpu_ray.submit_tpu_job
        except (ImportError, AttributeError) as exc:
            raise BackendUnavailableError(
                "TPU jobs on Ray need fray-tpu's gang orchestration (fray_tpu.ray); "
                f'install it with: pip install "fray-tpu[ray]" ({exc})'
            ) from exc
        handle = submit_tpu_job(request, job_id=job_id)
        with self._lock:
            self._tpu_jobs.add(job_id, handle)
        handle.add_done_callback(self._tpu_job_finished)
        return handle

    def _tpu_job_finished(self, handle: Any) -> None:
        """A TPU job ended: it may age out of the history like any other job."""
        with self._lock:
            self._tpu_jobs.finished(handle.job_id)

    def _check_head_node(self, resources: ResourceConfig, field: str) -> None:
        if resources.preemptible:
            return
        import ray

        if self._resources is None or HEAD_NODE_RESOURCE not in self._resources:
            self._resources = dict(ray.cluster_resources())
        if HEAD_NODE_RESOURCE not in self._resources:
            raise InvalidRequestError.for_field(
                field,
                False,
                f"preemptible=False pins work to the head node through the "
                f"'{HEAD_NODE_RESOURCE}' resource, which this cluster does not have; start "
                f"the head with --resources='{{\"{HEAD_NODE_RESOURCE}\": 1}}'",
            )

    def jobs_api(self) -> Any:
        """Ray's ``JobSubmissionClient`` for this cluster (command jobs need the dashboard)."""
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

    def watch_later(self, job: CallableJob, attempt: int) -> None:
        """Gives ``attempt`` completion callbacks after ``CallableJob.WATCH_AFTER`` seconds
        unless someone fetches it."""
        self._watcher.add(job, attempt)

    def _watched_job(self, job_id: str) -> CallableJob | None:
        """For the watcher: the unfinished callable job with this id, if any."""
        job = self._history.running.get(job_id)  # one dict read: no lock needed
        return job if isinstance(job, CallableJob) else None

    def progress(self, *, retry: bool = False) -> None:
        """Called when a callable job starts a new attempt after its first (``retry``) or ends."""
        with self._progress_lock:
            self._generation += 1
            if retry:
                self._retries += 1
            if self._progress_waiters:
                self._progress.notify_all()

    def progress_generation(self) -> int:
        return self._generation

    def retry_generation(self) -> int:
        return self._retries

    def wait_progress(self, generation: int, timeout: float | None) -> None:
        """Waits until some job started an attempt or ended after ``generation``."""
        with self._progress:
            self._progress_waiters += 1
            try:
                self._progress.wait_for(lambda: self._generation != generation, timeout)
            finally:
                self._progress_waiters -= 1

    def job_finished(self, job: _Job) -> None:
        """Called once per job when it ends: it may age out of the history; a nested job's
        end is recorded in the registry."""
        with self._lock:
            self._history.finished(job.job_id)
        if self.mirrors:
            value = job.value if job.status is JobStatus.SUCCEEDED else None
            self._registry_call("finish", job.job_id, job.record(), value, job.lines, wait=True)
        elif job.lines or job.attempts > 1:  # it may have streamed output to the registry
            self._registry_call("ended", job.job_id, wait=False)

    def cancel_refs(self, refs: list[Any], *, wait: bool = False) -> None:
        """Cancels Ray tasks (force: the worker and everything it started dies)."""
        import ray

        for ref in refs:
            try:
                ray.cancel(ref, force=True, recursive=True)
            except Exception as exc:  # already finished, or its owner is gone
                logger.debug("cancel of %s: %s", ref, exc)
        if wait and refs:
            ray.wait(refs, num_returns=len(refs), timeout=60)

    def end_children_of(self, job_id: str) -> None:
        """Stops the children of a job that has ended (children die with their parent)."""
        running = self._history.running
        if not running:
            return
        with self._lock:
            children = [j for j in running.values() if j.parent == job_id and not j.done.flag]
        for child in children:
            child.terminate()

    def stop_descendants(self, job_id: str, *, include_self: bool = False) -> None:
        """Marks every job below ``job_id`` as stopped and stops the ones this client owns."""
        ids = self.registry_descendants(job_id)
        if include_self:
            ids.append(job_id)
        with self._lock:
            running = self._history.running
            local = [running[i] for i in ids if i in running and not running[i].done.flag]
            local += [j for j in running.values() if j.parent == job_id and not j.done.flag]
        for job in local:
            job.terminate()
        if ids:
            self._registry_call("request_stop", ids, wait=True)

    # -- the registry ------------------------------------------------------------------------

    def _registry_actor(self) -> Any:
        if self._registry is None:
            import ray

            self._registry = ray.get_actor(self.registry_name, namespace=REGISTRY_NAMESPACE)
        return self._registry

    def _registry_call(self, method: str, *args: Any, wait: bool = True) -> Any:
        import ray

        try:
            ref = getattr(self._registry_actor(), method).remote(*args)
            return ray.get(ref, timeout=60) if wait else None
        except Exception as exc:
            # The registry is a shared view of the job tree, not the source of truth for the
            # jobs this client runs: losing it must not fail a job or a terminate().
            log = logger.debug if self.mirrors else logger.warning
            log("job registry %s unreachable: %s", self.registry_name, str(exc).splitlines()[0])
            return None

    def registry_get(self, job_id: str) -> dict[str, Any] | None:
        return self._registry_call("get", job_id)

    def registry_logs(self, job_id: str) -> list[str]:
        return self._registry_call("logs", job_id) or []

    def registry_result(self, job_id: str) -> tuple[bool, Any]:
        return self._registry_call("result", job_id) or (False, None)

    def registry_descendants(self, job_id: str) -> list[str]:
        return self._registry_call("descendants", job_id) or []

    def children_of(self, job_id: str) -> list[str]:
        with self._lock:
            local = [j.job_id for j in self._history.jobs.values() if j.parent == job_id]
        remote = self._registry_call("children", job_id) or []
        return local + [c for c in remote if c not in local]

    def list_jobs(self) -> list[JobInfo]:
        """Every job of this client and the jobs submitted from inside them, oldest first."""
        with self._lock:
            jobs = self._history.values()
            tpu = self._tpu_jobs.values()
        infos = {job.job_id: job.info() for job in jobs}
        for handle in tpu:
            info = handle.info()
            infos[info.job_id] = info
        roots = tuple(f"{job.job_id}/" for job in jobs)
        for info in self._api_jobs():
            infos.setdefault(info.job_id, info)
        for record in self._registry_call("list") or []:
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

    def _api_jobs(self) -> list[JobInfo]:
        return [api_job_info(d) for d in self._api_details()]

    def get_job(self, job_id: str) -> Any:
        """A handle to a job of this client or of its job tree."""
        with self._lock:
            job = self._history.get(job_id)
            tpu = self._tpu_jobs.get(job_id)
        if job is not None:
            return RayJobHandle(job)
        if tpu is not None:
            return tpu
        if self.registry_get(job_id) is not None:
            return RemoteJobHandle(self, job_id)
        for details in self._api_details():
            if (details.metadata or {}).get("fray_job_id") == job_id:
                return SubmittedJobHandle(self, details.submission_id, job_id)
        raise JobNotFoundError(job_id, self._history.not_found(job_id, "RayClient's job tree"))

    # -- actors ------------------------------------------------------------------------------

    def create_actor(
        self,
        actor_class: type[T],
        *args: Any,
        name: str,
        resources: ResourceConfig | None = None,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> RayActorHandle:
        """Creates one actor (named ``{name}-0``) and returns its handle once it is ready.

        Raises:
            ActorError: ``__init__`` raised (chained as ``__cause__``).
        """
        group = self.create_actor_group(
            actor_class,
            *args,
            name=name,
            count=1,
            resources=resources,
            actor_config=actor_config,
            **kwargs,
        )
        return group.wait_ready(timeout=None)[0]

    def create_actor_group(
        self,
        actor_class: type[T],
        *args: Any,
        name: str,
        count: int,
        resources: ResourceConfig | None = None,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> RayActorGroup:
        """Creates ``count`` Ray actors named ``{name}-{i}`` in this client's namespace.

        Preemptible actors restart when they die (``max_restarts=-1`` unless
        ``actor_config`` says otherwise); ``preemptible=False`` pins them to the head node.
        """
        from fray.backend import validate_actor_args as _validate_actor_args

        self._check_open()
        _validate_actor_args(actor_class, name, count, resources, actor_config)
        config = actor_config or ActorConfig()
        options = actor_options(resources)
        preemptible = resources is None or resources.preemptible
        if resources is not None:
            self._check_head_node(resources, "resources.preemptible")
        restarts = config.max_restarts
        if restarts is None:
            restarts = -1 if preemptible else 0
        options.update(
            namespace=self.namespace,
            max_concurrency=config.max_concurrency,
            max_restarts=restarts,
            max_task_retries=config.max_task_retries or 0,
        )
        host = self._parts.host(actor_class)
        members: list[RayMember] = []
        created: list[RayActorHandle] = []
        try:
            for index in range(count):
                actor_name = f"{name}-{index}"
                try:
                    actor = host.options(name=actor_name, **options).remote(
                        actor_class,
                        args,
                        kwargs,
                        actor_name,
                        self.namespace,
                        index,
                        name,
                        self.registry_name,
                    )
                except ValueError as exc:
                    raise ActorError(
                        f"an actor named {actor_name!r} already exists in namespace "
                        f"{self.namespace!r}"
                    ) from exc
                handle = RayActorHandle(actor_name, self.namespace, actor)
                created.append(handle)
                members.append(RayMember(index, handle, actor.fray_ready.remote()))
        except BaseException:
            self.kill_actors(created)
            raise
        group = RayActorGroup(self, name, members)
        with self._lock:
            self._groups.append(group)
        return group

    def kill_actors(self, handles: list[RayActorHandle], *, wait: bool = True) -> None:
        """Kills actors for good and, with ``wait``, returns once their names are free."""
        import ray

        for handle in handles:
            actor = handle._actor  # pyright: ignore[reportPrivateUsage]
            if actor is None:
                continue
            try:
                ray.kill(actor, no_restart=True)
            except Exception as exc:
                logger.debug("kill of actor %s: %s", handle.name, exc)
        if not wait:
            return
        deadline = time.monotonic() + 30
        for handle in handles:
            delay = 0.01
            while time.monotonic() < deadline:
                try:
                    ray.get_actor(handle.name, namespace=self.namespace)
                except ValueError:
                    break
                time.sleep(delay)  # the GCS frees the name asynchronously after the kill
                delay = min(delay * 2, 0.2)

    def forget_group(self, group: RayActorGroup) -> None:
        with self._lock:
            if group in self._groups:
                self._groups.remove(group)

    # -- shutdown ----------------------------------------------------------------------------

    def shutdown(self, wait: bool = True) -> None:
        """Stops every job and actor this client started; stops Ray if it started it."""
        with self._lock:
            if self.is_shutdown:
                return
            self.is_shutdown = True
            jobs = [j for j in self._history.running.values() if not j.done.flag]
            groups = list(self._groups)
            tpu = list(self._tpu_jobs.running.values())
        threads = [threading.Thread(target=job.terminate, daemon=True) for job in jobs]
        threads += [threading.Thread(target=h.terminate, daemon=True) for h in tpu]
        for thread in threads:
            thread.start()
        for group in groups:
            group.shutdown()
        for thread in threads:
            thread.join(timeout=120)
        self._watcher.stop()
        self.executor.shutdown(wait=wait)
        forget_default_client(self)
        if self._owns_ray:
            import ray

            with _registries_lock:
                _registries.clear()
            ray.shutdown()
