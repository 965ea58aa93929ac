"""``RayClient``: Fray jobs and actors on a Ray cluster."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import logging
import os
import threading
from typing import Any, TypeVar

from fray import ActorConfig, JobInfo, JobRequest, ResourceConfig
from fray.backend import BaseClient, ClientSpec, forget_default_client, validate_actor_args
from fray.errors import ActorError, BackendUnavailableError, InvalidRequestError, JobNotFoundError
from fray_ray._actors import RayActorGroup, RayActorHandle, RayMember, kill_actors
from fray_ray._book import JobBook
from fray_ray._command import api_job_info
from fray_ray._convert import HEAD_NODE_RESOURCE, RAY, actor_options
from fray_ray._handles import RayJobHandle, RemoteJobHandle, SubmittedJobHandle
from fray_ray._placement import Ask
from fray_ray._registry import RegistryLink, driver_registry, forget_registries
from fray_ray._submit import Launcher

__all__ = ["RayClient", "job_client"]

T = TypeVar("T")
logger = logging.getLogger("fray.ray")

DEFAULT_NAMESPACE = "fray"

_job_clients: dict[tuple[str, str], RayClient] = {}
_job_clients_lock = threading.Lock()


def job_client(namespace: str, registry: str) -> RayClient:
    """The client that code inside a job or actor gets from ``current_client()``: one per
    worker process and (namespace, registry name), made on first use. Handed to the job
    wrapper and the actor host (``fray_ray._worker.ClientFor``), which pickle it by name."""
    key = (namespace, registry)
    client = _job_clients.get(key)
    if client is None or client.is_shutdown:
        with _job_clients_lock:
            client = _job_clients.get(key)
            if client is None or client.is_shutdown:
                client = RayClient(namespace=namespace, echo_logs=True, _registry=registry)
                _job_clients[key] = client
    return client


class RayClient(BaseClient):
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
    capabilities = RAY

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
        self._owns_ray = False
        self._lock = threading.Lock()  # the actor groups
        self._groups: list[RayActorGroup] = []
        dashboard = None
        if _registry is not None:  # a client inside a job or actor: the driver's registry
            registry = RegistryLink(_registry, quiet=True)
        else:
            if not ray.is_initialized():
                dashboard = self._connect(address)
            elif address is not None:
                raise InvalidRequestError.for_field(
                    "address",
                    address,
                    "this process is already connected to Ray; pass no address to use that "
                    "connection (or ray.shutdown() first)",
                )
            registry = RegistryLink(*driver_registry())
        self._book = JobBook(
            self.namespace,
            registry,
            echo_logs=echo_logs,
            mirrors=_registry is not None,
            dashboard=dashboard,
        )
        self._launcher = Launcher(self._book, job_client)

    def _connect(self, address: str | None) -> str | None:
        """Connects this process to Ray (starting a local one without an address); returns
        the dashboard's address, if Ray says."""
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
        return getattr(context, "dashboard_url", None) or None

    @classmethod
    def from_spec(cls, spec: ClientSpec) -> RayClient:
        """``ray``, ``ray?namespace=N`` or ``ray://host:port[?namespace=N]``."""
        spec.reject_unknown({"namespace"}, address=True)
        address = f"ray://{spec.address}" if spec.address is not None else None
        return cls(address, namespace=spec.params.get("namespace"))

    def __repr__(self) -> str:
        return f"RayClient(namespace={self.namespace!r}, jobs={len(self._book.history)})"

    # -- jobs --------------------------------------------------------------------------------

    def submit(self, request: JobRequest, *, adopt_existing: bool = True) -> Any:
        """Starts a job: a Ray task per replica (callable), a Ray job (command) or a TPU gang.

        ``adopt_existing`` has no effect: job names are not unique on Ray (every submit
        starts a new job with a new id).
        """
        self._check_open()
        return self._launcher.submit(request)

    def list_jobs(self) -> list[JobInfo]:
        """Every job of this client and the jobs submitted from inside them, oldest first."""
        book = self._book
        with book.lock:
            jobs = book.history.values()
            tpu = book.tpu_jobs.values()
        infos = {job.job_id: job.info() for job in jobs}
        for handle in tpu:
            info = handle.info()
            infos[info.job_id] = info
        roots = tuple(f"{job.job_id}/" for job in jobs)
        for details in self._api_details():
            info = api_job_info(details)
            infos.setdefault(info.job_id, info)
        for record in book.registry.records():
            if record["job_id"] not in infos and record["job_id"].startswith(roots):
                fields = {k: v for k, v in record.items() if k in JobInfo.model_fields}
                infos[record["job_id"]] = JobInfo(**fields)
        return sorted(infos.values(), key=lambda info: info.submitted_at or 0.0)

    def _api_details(self) -> list[Any]:
        """Fray command jobs in the cluster's Jobs API (any driver's), if it is reachable."""
        if self._book.mirrors:
            return []
        try:
            jobs = self._book.jobs_api().list_jobs()
        except Exception as exc:
            logger.debug("Ray Jobs API not reachable: %s", exc)
            return []
        return [d for d in jobs if (d.metadata or {}).get("fray_job_id")]

    def get_job(self, job_id: str) -> Any:
        """A handle to a job of this client or of its job tree."""
        book = self._book
        with book.lock:
            job = book.history.get(job_id)
            tpu = book.tpu_jobs.get(job_id)
        if job is not None:
            return RayJobHandle(job)
        if tpu is not None:
            return tpu
        if book.registry.get(job_id) is not None:
            return RemoteJobHandle(book, job_id)
        for details in self._api_details():
            if (details.metadata or {}).get("fray_job_id") == job_id:
                return SubmittedJobHandle(book, details.submission_id, job_id)
        raise JobNotFoundError(job_id, book.history.not_found(job_id, "RayClient's job tree"))

    # -- actors ------------------------------------------------------------------------------

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
        self._check_open()
        validate_actor_args(actor_class, name, count, resources, actor_config)
        self._check_resources(resources)
        config = actor_config or ActorConfig()
        options = actor_options(resources)
        preemptible = resources is None or resources.preemptible
        if resources is not None:
            self._launcher.check_head_node(resources, "resources.preemptible")
            self._launcher.check_placeable(options, "resources", "an actor")
        restarts = config.max_restarts
        if restarts is None:
            restarts = -1 if preemptible else 0
        options.update(
            namespace=self.namespace,
            max_concurrency=config.max_concurrency,
            max_restarts=restarts,
            max_task_retries=config.max_task_retries or 0,
        )
        host = self._launcher.parts.host(actor_class)
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
                        self._book.registry_name,
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
        group = RayActorGroup(name, members, self._forget_group, ask=Ask.of(options))
        with self._lock:
            self._groups.append(group)
        return group

    def _hosting_address(self) -> str:
        """This node's address in the cluster, or loopback when every node of the cluster
        is this machine (a hosted actor's server listens there)."""
        import ray

        here = ray.util.get_node_ip_address()
        nodes = {n["NodeManagerAddress"] for n in ray.nodes() if n.get("Alive")}
        return "127.0.0.1" if nodes <= {here} else here

    def _forget_group(self, group: RayActorGroup) -> None:
        with self._lock:
            if group in self._groups:
                self._groups.remove(group)

    # -- shutdown ----------------------------------------------------------------------------

    def shutdown(self, wait: bool = True) -> None:
        """Stops every job and actor this client started; stops Ray if it started it."""
        book = self._book
        with self._lock:
            if self.is_shutdown:
                return
            self.is_shutdown = True
            groups = list(self._groups)
        with book.lock:
            jobs = [j for j in book.history.running.values() if not j.is_done]
            tpu = list(book.tpu_jobs.running.values())
        threads = [threading.Thread(target=job.terminate, daemon=True) for job in jobs]
        threads += [threading.Thread(target=h.terminate, daemon=True) for h in tpu]
        for thread in threads:
            thread.start()
        for group in groups:
            group.shutdown()
        self._stop_hosted()
        for thread in threads:
            thread.join(timeout=120)
        book.close(wait)
        forget_default_client(self)
        if self._owns_ray:
            import ray

            forget_registries()
            ray.shutdown()
