"""``RayClient``: Fray jobs and actors on a Ray cluster, on the engine of ``fray.backend``."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Collection
from typing import Any

from fray import ActorConfig, JobInfo, JobRequest, ResourceConfig, TpuConfig
from fray.backend import ClientSpec, JobRecord
from fray.errors import (
    BackendUnavailableError,
    FrayError,
    InvalidRequestError,
    JobNotFoundError,
)
from fray_ray._actors import RayActorGroup, start_members
from fray_ray._convert import (
    DISK_RESOURCE,
    HEAD_NODE_RESOURCE,
    RAY,
    Ask,
    actor_options,
    command_options,
    environment_runtime_env,
    task_options,
)
from fray_ray._host import LIFETIME_GROUP, host_class
from fray_ray._jobs import CommandJob, CommandSlots, FoundJob, Poller, api_job_info
from fray_ray._kinds import CallableJob, KindClient, RayJobHandle, TaskShape, Watcher, await_ends
from fray_ray._placement import cluster_view
from fray_ray._registry import RegistryLink, driver_registry, forget_registries
from fray_ray._session import RaySession
from fray_ray._worker import runner

__all__ = ["RayClient", "RayJobHandle", "job_client"]

logger = logging.getLogger("fray.ray")

DEFAULT_NAMESPACE = "fray"
DEFAULT_MAX_COMMAND_JOBS = 16  # command jobs of one client in Ray's Jobs API at once

_job_clients: dict[tuple[str, str], RayClient] = {}
_job_clients_lock = threading.Lock()


def job_client(namespace: str, registry: str) -> RayClient:
    """The client that code inside a job or actor gets from ``current_client()``: one per
    worker process and (namespace, registry name), made on first use (it asks Ray nothing
    until it is used)."""
    key = (namespace, registry)
    with _job_clients_lock:
        client = _job_clients.get(key)
        if client is None or client.is_shutdown:
            client = RayClient(namespace=namespace, echo_logs=True, _registry=registry)
            _job_clients[key] = client
    return client


GANGS_ENTRY_POINT = ("fray.ray", "gangs")
"""The entry point (group, name) through which fray-tpu offers its TPU gang jobs on Ray."""


def _gangs() -> Any:
    """The module of TPU gang jobs on Ray that fray-tpu declares as the entry point
    :data:`GANGS_ENTRY_POINT`, loaded on the first TPU request (fray-ray depends on
    fray-core alone; reading entry points costs a few milliseconds, next to a gang's seconds).

    Raises:
        BackendUnavailableError: fray-tpu is not installed (no such entry point, or one
            whose module is gone).
    """
    from importlib.metadata import entry_points

    group, name = GANGS_ENTRY_POINT
    for entry in entry_points(group=group, name=name):
        try:
            return entry.load()
        except ImportError as err:  # declared, but its package is gone
            if err.name is None or not f"{entry.module}.".startswith(f"{err.name}."):
                raise
    raise BackendUnavailableError(
        "TPU jobs on Ray need fray-tpu, which is not installed. Install it with: "
        'pip install "fray-core[tpu]"'
    )


class RayClient(KindClient):
    """Runs Fray jobs and actors on Ray.

    Args:
        address: A Ray address (``"ray://host:port"`` for Ray Client, ``"host:port"`` or
            ``"auto"``); ``None`` uses the Ray this process is already connected to, else
            ``RAY_ADDRESS``, else starts a local Ray (with the dashboard, for command jobs,
            and a ``head_node`` resource). :meth:`shutdown` ends a connection the client
            made (and stops a Ray it started); one it found made is left as it was.
        namespace: Where this client's actors and job registry live (``"fray"``).
        echo_logs: Also print job output in the workers (Ray forwards it to the driver).
        max_command_jobs: How many of the client's command jobs may be in Ray's Jobs API
            at once (each is a Ray job with a supervisor on the head node); the others wait
            in the driver, and their pending reason names the cap (default 16).

    A callable job's end is learnt by whoever waits for it, in the waiting thread (one bulk
    ``ray.wait`` for all the jobs waited on), or, for an attempt still running a second or
    two after it started, by the client's watcher thread (one bulk ``ray.wait`` for all
    such attempts): done-callbacks and the next attempt run in the thread that noticed the
    end.

    ``shutdown()`` returns within about 40 seconds whatever the jobs do: each job gets 10 s
    (a command job 30 s) to stop before it is recorded STOPPED anyway, actors 10 s to be
    killed, and a Ray this client started a few seconds to stop. Calls and futures of its
    actors then raise ``ActorDiedError``.
    """

    scheme = "ray"
    capabilities = RAY
    ignores = ("setup_scripts", "sync_packages")

    def __init__(
        self,
        address: str | None = None,
        *,
        namespace: str | None = None,
        echo_logs: bool = True,
        max_command_jobs: int = DEFAULT_MAX_COMMAND_JOBS,
        _registry: str | None = None,
    ) -> None:
        import ray

        super().__init__()
        if namespace is not None and (not isinstance(namespace, str) or not namespace.strip()):
            raise InvalidRequestError.for_field("namespace", namespace, "a non-empty string")
        if type(max_command_jobs) is not int or max_command_jobs < 1:  # a bool is no number
            raise InvalidRequestError.for_field(
                "max_command_jobs", max_command_jobs, "a whole number >= 1 (default 16)"
            )
        self.command_slots = CommandSlots(max_command_jobs)
        self.namespace = namespace or DEFAULT_NAMESPACE
        self.echo_logs = echo_logs
        self.mirrors = _registry is not None  # inside a job: its jobs are recorded for the driver
        self.session = RaySession(address, echo_logs=echo_logs, connect=_registry is None)
        self._view: Any = None  # the nodes as last read (see _check_placeable)
        self._ray_groups: list[RayActorGroup] = []
        self.poller = Poller()
        self.watcher = Watcher()
        if _registry is not None:
            self.registry = RegistryLink(_registry, quiet=True)
        else:
            self.registry = RegistryLink(*driver_registry())
        one, many = runner(job_client)
        self._replica = ray.remote(max_retries=0)(one)
        self._replicas = ray.remote(max_retries=0)(many)
        self._last_shape: TaskShape | None = None  # see _shape_for
        self._last_call: tuple[Any, bytes] | None = None  # see _callable_job
        self._disk_advertised: bool | None = None  # see _reserves_disk
        self._hosts: dict[type[Any], Any] = {}

    @classmethod
    def from_spec(cls, spec: ClientSpec) -> RayClient:
        """``ray``, ``ray?namespace=N&max_command_jobs=N`` or ``ray://host:port[?...]``."""
        spec.reject_unknown({"namespace", "max_command_jobs"}, address=True)
        address = f"ray://{spec.address}" if spec.address is not None else None
        cap: Any = spec.params.get("max_command_jobs", str(DEFAULT_MAX_COMMAND_JOBS))
        cap = int(cap) if cap.isdigit() else cap  # anything else: __init__ refuses it
        return cls(address, namespace=spec.params.get("namespace"), max_command_jobs=cap)

    def __repr__(self) -> str:
        return f"RayClient(namespace={self.namespace!r}, jobs={len(self._jobs)})"

    # -- jobs: the engine's hooks ------------------------------------------------------------

    def _prepare(self, request: JobRequest) -> Any:
        """Works out once what every attempt of the request needs (and refuses what this
        cluster cannot run): the job's kind."""
        if isinstance(request.resources.device, TpuConfig):
            self._check_placeable(Ask({f"TPU-{request.resources.device.variant}-head": 1.0}))
            return _gangs().prepare_gang(request, self)
        if not request.entrypoint.is_callable:
            return self._command_job(request)
        return self._callable_job(request)

    def _callable_job(self, request: JobRequest) -> CallableJob:
        """A callable job: its request's :class:`TaskShape` and its pickled call. A function
        called without arguments is pickled once while a driver submits it again and again
        (as Ray pickles a remote function once); arguments are pickled per job."""
        import cloudpickle

        key = (request.resources, request.environment, request.replica_count > 1)
        shape = self._last_shape
        if shape is None or shape.key != key:
            shape = self._last_shape = self._shape_for(request, key)
        entry = request.entrypoint
        bare = not entry.args and not entry.kwargs
        last = self._last_call
        if bare and last is not None and last[0] is entry.callable:
            return CallableJob(self, shape, last[1])
        try:
            call = cloudpickle.dumps((entry.callable, tuple(entry.args), dict(entry.kwargs)))
        except Exception as exc:
            raise InvalidRequestError.for_field(
                "JobRequest.entrypoint",
                entry.describe(),
                f"must be picklable to run on Ray ({type(exc).__name__}: {exc})",
            ) from exc
        if bare:
            self._last_call = (entry.callable, call)
        return CallableJob(self, shape, call)

    def _shape_for(self, request: JobRequest, key: tuple[Any, ...]) -> TaskShape:
        """The shape of the request's tasks (``key``: what it depends on), checked against
        this cluster. Worked out once per shape: the checks, the options, and Ray's
        ``options()``, which checks them again and builds a class (45-70 us, a fifth of a
        trivial job's driver CPU in the row "ray: 200 trivial jobs, submitted together"):
        the last shape made is used again while a driver submits requests of the same
        resources and environment (a batch), and its jobs share it (one object, not one
        per job in the client's history)."""
        resources, environment = request.resources, request.environment
        self._check_head_node(resources, "JobRequest.resources.preemptible")
        own = environment is not None and self._own_workspace(environment.workspace)
        disk = self._reserves_disk(resources)
        options, env = task_options(request, disk=disk, own_workspace=own)
        if "pip" in options.get("runtime_env", {}):
            self._check_pip_applies()
        ask = Ask.of(options)
        self._check_placeable(ask)
        remote = (self._replicas if key[2] else self._replica).options(**options)
        return TaskShape(key, remote, tuple(env.items()), ask)

    def _command_job(self, request: JobRequest) -> CommandJob:
        self._check_head_node(request.resources, "JobRequest.resources.preemptible")
        kwargs = command_options(request, disk=self._reserves_disk(request.resources))
        env_vars = dict(request.env_vars)
        env_vars.setdefault("FRAY_CLIENT_SPEC", f"ray?namespace={self.namespace}")
        kwargs["runtime_env"] = environment_runtime_env(request.environment, env_vars)
        ask = Ask.of(kwargs)
        self._check_placeable(ask)
        self.jobs_api()
        return CommandJob(self, kwargs, ask)

    def _await(self, jobs: Collection[JobRecord], timeout: float | None, wakeup: Any) -> bool:
        """Waits for the jobs' tasks in this thread (see :func:`await_ends`: one bulk
        ``ray.wait`` per slice over all of them). Jobs learnt otherwise (commands, gangs,
        found jobs) wait as the engine does."""
        woken = await_ends(jobs, timeout, wakeup)
        return super()._await(jobs, timeout, wakeup) if woken is None else woken

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
        if children is None:
            children = list(self.registry.call("children", job.job_id, default=[]) or [])
        own = [child.job_id for child in job.children]
        # Its own children, then (a job found by id) those its record lists, then the registry's.
        listed = dict.fromkeys([*own, *job.data.children, *children])
        update: dict[str, Any] = {"children": tuple(listed)}
        if not job.is_done:
            update["pending_reason"] = self._pending_reason(job)
        return job.info(**update)

    def _job_ended(self, job: JobRecord) -> None:
        super()._job_ended(job)
        if self.mirrors:  # before the job's waiters wake: the driver then sees its end
            lines = [line for _ts, line in job.log.snapshot()]  # value: set if it succeeded
            self.registry.call("finish", job.job_id, _fields(job), job.value, lines)

    def stop_children_of(self, job_id: str) -> None:
        """Stops the unfinished jobs this client submitted from job ``job_id`` (children do
        not outlive their parent); returns once they have ended."""
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
        if isinstance(job_id, str) and self.registry.call("get", job_id) is not None:
            data = FoundJob(self)
        else:
            submission_id = None if self.mirrors else self.session.find_command_job(job_id)
            if submission_id is None:
                return None
            data = FoundJob(self, submission_id)
        job = JobRecord(self, job_id, None, data=data)
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
        for details in [] if self.mirrors else self.session.command_jobs():
            info = api_job_info(details)
            infos.setdefault(info.job_id, info)
        for record in records:
            if record["job_id"] not in infos and record["job_id"].startswith(roots):
                fields = {k: v for k, v in record.items() if k in JobInfo.model_fields}
                infos[record["job_id"]] = JobInfo(**fields)
        return sorted(infos.values(), key=lambda info: info.submitted_at or 0.0)

    def jobs_api(self) -> Any:
        """Ray's ``JobSubmissionClient`` for this cluster (command jobs need the dashboard).

        Raises:
            BackendUnavailableError: The Jobs API is not reachable.
        """
        return self.session.jobs_api()

    # -- checks ------------------------------------------------------------------------------

    def _check_placeable(self, ask: Ask, field: str = "JobRequest.resources") -> None:
        """On a local Ray this client started (it cannot grow), refuses what no node of it
        could ever take. Elsewhere a cluster may grow, and Ray does not say whether it can:
        such a request waits, and its pending reason says what no node has."""
        if not self.session.owns_ray:
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

    def _reserves_disk(self, resources: ResourceConfig | None) -> bool:
        """Whether to reserve ``resources.disk``: a value other than the default, on a
        cluster whose nodes advertise :data:`DISK_RESOURCE` (read once per client).
        Elsewhere the first such request of the client logs a warning naming the value."""
        import ray

        if not RAY.noted(resources):
            return False
        if self._disk_advertised is None:
            self._disk_advertised = DISK_RESOURCE in ray.cluster_resources()
        if not self._disk_advertised:
            RAY.note_once(resources, self._warned)
        return self._disk_advertised

    def _own_workspace(self, workspace: str | None) -> bool:
        """Whether a callable job's ``workspace`` is the driver's own code: the directory
        it runs from (``create_environment()``'s default) or the ``working_dir`` its Ray job
        already ships. A remote package (a URI) is shipped per task; any other local
        directory is refused here, at submit (Ray ships a local directory only for a whole
        Ray job).

        Raises:
            InvalidRequestError: A local workspace that is neither.
        """
        import ray

        if workspace is None or "://" in workspace:
            return False
        here = os.path.realpath(workspace)
        if here == os.path.realpath(os.getcwd()):
            return True
        shipped = (ray.get_runtime_context().runtime_env or {}).get("working_dir")
        if isinstance(shipped, str) and "://" not in shipped and os.path.realpath(shipped) == here:
            return True
        raise InvalidRequestError.for_field(
            "JobRequest.environment.workspace",
            workspace,
            f"the directory the driver runs from ({os.getcwd()}), the working_dir of the "
            "driver's own Ray job, or a remote package URI: Ray ships a local directory only "
            "for a whole Ray job, not a task. Run the driver from that directory, start it "
            "with ray.init(runtime_env={'working_dir': ...}), or submit a command job",
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
        options = actor_options(resources, disk=self._reserves_disk(resources))
        preemptible = resources is None or resources.preemptible
        ask = Ask.of(options)
        if resources is not None:
            self._check_head_node(resources, "resources.preemptible")
            self._check_placeable(ask, "resources")
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
        members = start_members(
            host,
            name,
            self.namespace,
            count,
            options,
            (name, self.registry.name, job_client, actor_class, args, kwargs),
        )
        group = RayActorGroup(
            name,
            self.namespace,
            members,
            self._forget_group,
            ask=ask,
            registry=self.registry.name,
        )
        with self._lock:
            self._ray_groups.append(group)
        return group

    def _forget_group(self, group: RayActorGroup) -> None:
        with self._lock:
            if group in self._ray_groups:
                self._ray_groups.remove(group)

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
            groups = list(self._ray_groups)
        for group in groups:
            try:
                group.shutdown()
            except FrayError as exc:
                logger.warning("shutting down actor group %s: %s", group.name, exc)
        self.poller.close()
        self.watcher.close()
        self.session.close(forget_registries)


def _fields(job: JobRecord) -> dict[str, Any]:
    """A job's JobInfo fields, as the registry keeps them."""
    return job.info().model_dump(exclude={"children", "pending_reason"}, mode="json")
