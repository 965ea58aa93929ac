# pyright: standard
"""IrisClient: Fray jobs and actors on an Iris cluster, through the marin-iris client."""

from __future__ import annotations

import collections
import functools
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from iris.cluster.client import resolve_job_user
from iris.cluster.types import Entrypoint as IrisEntrypoint
from iris.cluster.types import JobName, is_job_finished
from iris.rpc import job_pb2

from fray import ActorConfig, JobInfo, JobRequest, ResourceConfig
from fray.backend import (
    BaseClient,
    ClientSpec,
    HostedActorHandle,
    JobHistory,
    check_request,
    forget_default_client,
    validate_actor_args,
)
from fray.environment_variables import FRAY_CLIENT_SPEC
from fray.errors import FrayError, InvalidRequestError, JobAlreadyExistsError, JobNotFoundError
from fray_iris import _iris
from fray_iris._actors import IrisActorGroup, actor_job
from fray_iris._convert import (
    IRIS,
    ship_code_by_value,
    to_iris_entrypoint,
    to_iris_request,
    translate_errors,
)
from fray_iris._iris import RawIrisClient, get_iris_ctx
from fray_iris._jobs import IrisJob, IrisJobHandle, listed_job_info
from fray_iris._results import ResultStore, default_local_results_url
from fray_iris._session import Session, normalize_address
from fray_iris._task import fray_job_id, is_loopback, serving_hosts
from fray_iris.environment_variables import FRAY_IRIS_RESULTS_URL

__all__ = ["IrisClient"]

T = TypeVar("T")
logger = logging.getLogger("fray.iris")


class IrisClient(BaseClient):
    """Runs Fray jobs and actors on an Iris cluster.

    Args:
        address: The controller, ``host:port`` or ``http://host:port``. ``None`` inside an
            Iris job: the job's own Iris context is used, so jobs submitted here are its
            children and share its namespace.
        workspace: A project folder shipped to the workers with each job (Iris zips it).
        results_url: Where tasks store return values (an fsspec URL every task and this
            process can reach). Default: ``FRAY_IRIS_RESULTS_URL``, else, for a controller on
            this machine, a private folder under the system temp dir.
        iris_client: An existing ``iris.client.IrisClient`` to wrap (not shut down by
            :meth:`shutdown`).

    Raises:
        FrayError: ``cannot reach the Iris controller at ...``: the controller refused the
            connection, its name did not resolve, or it did not answer within 5 s.
    """

    scheme = "iris"
    capabilities = IRIS

    def __init__(
        self,
        address: str | None = None,
        *,
        workspace: str | Path | None = None,
        results_url: str | None = None,
        iris_client: RawIrisClient | None = None,
    ) -> None:
        ctx = get_iris_ctx()
        ws = Path(workspace) if workspace is not None else None
        if ws is not None and not ws.is_dir():
            raise InvalidRequestError.for_field(
                "IrisClient.workspace", str(workspace), "must be an existing folder"
            )
        reopen: Callable[[], RawIrisClient] | None = None
        if iris_client is not None:
            raw, owned = iris_client, False
            # Read lazily-tolerant: a wrapped client is not asked anything until it is used.
            cluster = getattr(iris_client, "_cluster_client", None)
            controller = getattr(cluster, "_address", None)
        elif address is not None:
            if not isinstance(address, str) or not address.strip():
                raise InvalidRequestError.for_field(
                    "IrisClient.address", address, "use host:port or http://host:port"
                )
            controller = normalize_address(address.strip())
            if ctx is not None and ctx.client is not None and ws is None:
                # Inside a job: the job's own client keeps the job tree and namespace.
                raw, owned = ctx.client, False
            else:
                reopen = functools.partial(RawIrisClient.remote, controller, workspace=ws)
                raw, owned = reopen(), True
                # Iris retries a call to a controller that is down for up to 30 minutes:
                # one quick question first turns that into one line within seconds.
                _iris.probe(raw, controller)
        else:
            if ctx is None or ctx.client is None:
                raise InvalidRequestError.for_field(
                    "IrisClient.address",
                    None,
                    "outside an Iris job give the controller address "
                    f"(IrisClient('host:port') or {FRAY_CLIENT_SPEC}=iris://host:port)",
                )
            raw, owned = ctx.client, False
            controller = os.environ.get("IRIS_CONTROLLER_ADDRESS")
        if ctx is not None and ctx.job_id is not None:
            user = ctx.job_id.user
        else:
            user = resolve_job_user(None)
        url = results_url or os.environ.get(FRAY_IRIS_RESULTS_URL) or None
        if url is None and is_loopback(controller):
            url = default_local_results_url()
        self._session = Session(
            raw,
            owned=owned,
            address=controller,
            reopen=reopen,
            user=user,
            results=ResultStore(url) if url else None,
        )
        # The jobs this client started: every one not known to have finished, and the last
        # finished ones (FRAY_JOB_HISTORY). Which have finished is learnt from their handles
        # and, once enough have gathered, from one batched status call (``_sweep``).
        self._jobs: JobHistory[IrisJobHandle] = JobHistory()
        self._sweep_at = self.SWEEP_FROM
        self._groups: list[IrisActorGroup] = []
        self._lock = threading.Lock()

    @classmethod
    def from_spec(cls, spec: ClientSpec) -> IrisClient:
        """Builds a client from ``iris://host:port[?ws=PATH]``, or, for the spec ``iris`` that
        ``current_client()`` uses inside an Iris job, from that job's own Iris context."""
        spec.reject_unknown({"ws"}, address=True)
        workspace = spec.params.get("ws") or None
        return cls(spec.address, workspace=workspace)

    @property
    def results_url(self) -> str | None:
        """Where return values are stored, or ``None`` if no location is configured."""
        store = self._session.results
        return store.url if store is not None else None

    @property
    def iris(self) -> RawIrisClient:
        """The wrapped ``iris.client.IrisClient``."""
        return self._session.raw

    def __repr__(self) -> str:
        return f"IrisClient({self._session.address!r}, jobs={len(self._jobs)})"

    # -- jobs --------------------------------------------------------------------------------

    def submit(self, request: JobRequest, *, adopt_existing: bool = True) -> IrisJobHandle:
        """Starts a job on Iris.

        Iris job names are unique while a job runs: with ``adopt_existing`` a running job of
        the same name is returned; otherwise :class:`JobAlreadyExistsError` carries its
        handle. A finished job of the same name is replaced.
        """
        check_request(request)
        self._check_open()
        converted = to_iris_request(request)
        entry = to_iris_entrypoint(request, self.results_url)
        policy = (
            job_pb2.EXISTING_JOB_POLICY_KEEP
            if adopt_existing
            else job_pb2.EXISTING_JOB_POLICY_UNSPECIFIED
        )
        return self._launch(request, entry, converted.kwargs(), policy)

    def _launch(
        self,
        request: JobRequest,
        entry: IrisEntrypoint,
        kwargs: dict[str, Any],
        policy: Any,
        ports: list[str] | None = None,
    ) -> IrisJobHandle:
        name = request.name
        raw = self._session.raw
        try:
            with translate_errors(f"submit {name}", job_id=name, address=self._session.address):
                job = raw.submit(entry, name, ports=ports, existing_job_policy=policy, **kwargs)
        except JobAlreadyExistsError as err:
            raise JobAlreadyExistsError(name, self._existing(name)) from err
        handle = IrisJobHandle(
            IrisJob(self._session, job.job_id, request, replicas=kwargs.get("replicas"))
        )
        with self._lock:
            self._jobs.add(handle.job_id, handle)
            sweep = len(self._jobs.running) >= self._sweep_at
            if sweep:
                self._sweep_at = sys.maxsize  # one sweep at a time
        if sweep:
            self._sweep()
        return handle

    SWEEP_FROM = 1_000  # unfinished-looking jobs before the first sweep

    def _sweep(self) -> None:
        """Lets finished jobs age out of ``_jobs``: asks the cluster, in one call, which of
        the jobs not yet known to have finished have. The next sweep comes once twice as
        many have gathered as are left running: a cost linear in the jobs submitted."""
        with self._lock:
            handles = list(self._jobs.running.values())
        states: dict[str, int] | None = None
        try:
            unknown = [h._wire for h in handles if not h._job.ended]
            with translate_errors("status of this client's jobs"):
                states = self._session.states(unknown) if unknown else {}
        except FrayError as exc:  # looked at again at the next sweep
            logger.debug("sweeping finished jobs failed: %s", exc)
        finally:
            with self._lock:
                for handle in handles:
                    state = None if states is None else states.get(handle.iris_job_id)
                    if handle._job.ended or (state is not None and is_job_finished(state)):
                        self._jobs.finished(handle.job_id)
                self._sweep_at = max(2 * len(self._jobs.running), self.SWEEP_FROM)

    def _existing(self, name: str) -> IrisJobHandle:
        ctx = get_iris_ctx()
        if ctx is not None and ctx.job_id is not None:
            wire = ctx.job_id.child(name)
        else:
            wire = JobName.root(self._session.user, name)
        return IrisJobHandle(IrisJob(self._session, wire))

    def get_job(self, job_id: str) -> IrisJobHandle:
        """A handle to an existing Iris job, by Fray id (or Iris wire id)."""
        if not isinstance(job_id, str) or not job_id.strip("/"):
            raise InvalidRequestError.for_field("job_id", job_id, "must be a job id string")
        with self._lock:
            known = self._jobs.get(job_id)
        if known is not None:
            return known
        try:
            wire = self._session.wire(job_id)
        except ValueError:
            raise JobNotFoundError(job_id, f"{job_id!r} is not a valid Iris job id") from None
        handle = IrisJobHandle(IrisJob(self._session, wire))
        handle.status()  # raises JobNotFoundError for an unknown id
        return handle

    def list_jobs(self) -> list[JobInfo]:
        """Every job of this client's user on the cluster, oldest first."""
        with self._session.what("list jobs"):
            statuses = _iris.list_jobs(self._session.raw, f"/{self._session.user}/")
        statuses.sort(key=lambda s: (s.submitted_at.epoch_ms, s.job_id))
        children: dict[str, list[str]] = collections.defaultdict(list)
        for status in statuses:
            if status.parent_job_id:
                children[status.parent_job_id].append(fray_job_id(status.job_id))
        return [
            listed_job_info(self._session, s, tuple(children.get(s.job_id, ()))) for s in statuses
        ]

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
    ) -> IrisActorGroup:
        """Creates ``count`` actors named ``{name}-{i}`` as one Iris job with ``count``
        replicas, each serving its actor on the ``actor`` port; returns without waiting."""
        self._check_open()
        validate_actor_args(actor_class, name, count, resources, actor_config)
        self._check_resources(resources)
        ship_code_by_value(actor_class)
        request, entry, submit_kwargs = actor_job(
            actor_class,
            args,
            kwargs,
            name=name,
            count=count,
            resources=resources or ResourceConfig(),
            config=actor_config or ActorConfig(),
            results_url=self.results_url,
        )
        policy = job_pb2.EXISTING_JOB_POLICY_UNSPECIFIED
        try:
            job = self._launch(request, entry, submit_kwargs, policy, ports=["actor"])
        except JobAlreadyExistsError as err:
            raise InvalidRequestError.for_field(
                "name", name, "an actor group or job of that name is already running"
            ) from err
        group = IrisActorGroup(self._session, name, count, job, actor_config)
        with self._lock:
            self._groups.append(group)
        return group

    # -- hosted actors -----------------------------------------------------------------------

    def _hosting_address(self) -> str:
        """This task's address for hosted actors' servers: loopback on a cluster whose
        controller is on this machine, else the address Iris advertises for the task.

        Raises:
            InvalidRequestError: Not inside an Iris job.
        """
        info = _iris.job_info()
        if info is None:
            raise InvalidRequestError(
                "host_actor on Iris runs inside an Iris job: the actor is served from the "
                "job's task and registered as an endpoint of that job. Submit the code that "
                "hosts it as a job (client.submit(JobRequest(...))) and call host_actor there",
                field="host_actor",
            )
        return serving_hosts(info)[1]

    def _announce_hosted(self, handle: HostedActorHandle) -> Callable[[], None]:
        """Registers the Iris endpoint ``<job id>/<name>-0`` for a hosted actor (the name a
        group actor of index 0 has), so Iris lists it under the job that hosts it; it is
        unregistered when the actor stops serving, and with the task's end at the latest.
        The endpoint holds the address only: calls need the handle, which holds the secret."""
        ctx = get_iris_ctx()
        assert ctx is not None and ctx.job_id is not None  # _hosting_address checked it
        endpoint = f"{ctx.job_id.to_wire()}/{handle.name}-0"
        host, port = handle.address
        registry = ctx.registry
        with translate_errors(f"register hosted actor {handle.name}"):
            endpoint_id = registry.register(endpoint, f"{host}:{port}", metadata={"fray": "hosted"})

        def withdraw() -> None:
            try:
                registry.unregister(endpoint_id)
            except Exception as exc:  # the task's end removes it anyway
                logger.warning("could not unregister hosted actor %s: %s", endpoint, exc)

        return withdraw

    # -- shutdown ----------------------------------------------------------------------------

    def shutdown(self, wait: bool = True) -> None:
        """Stops every unfinished job and actor group this client started, then closes the
        connection. Handles keep working afterwards (they reconnect to read status)."""
        del wait
        with self._lock:
            if self.is_shutdown:
                return
            self.is_shutdown = True
            handles = list(self._jobs.running.values())  # the rest have finished
            groups = list(self._groups)
        self._stop_hosted()
        for group in groups:
            group.stop_with_client()
        try:
            self._stop_all([h._wire for h in handles if not h._job.ended])
        finally:
            self._session.close()
            forget_default_client(self)

    def _stop_all(self, wires: list[JobName]) -> None:
        if not wires:
            return
        raw = self._session.raw
        with translate_errors("shutdown"):
            states = self._session.states(wires)
        live = [w for w in wires if w.to_wire() in states]
        live = [w for w in live if not is_job_finished(states[w.to_wire()])]
        for wire in live:
            with translate_errors("shutdown"):
                _iris.terminate(raw, wire)
        if live:
            self._session.wait_finished(live, include_descendants=True)
