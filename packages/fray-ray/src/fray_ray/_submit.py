"""Submitting jobs on Ray: what is made remote once per Ray session, a request made ready for
Ray once, and the launcher that starts a client's callable, command and TPU jobs."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import secrets
import threading
from typing import Any, ClassVar

from fray import JobRequest, ResourceConfig, TpuConfig
from fray.backend import check_request, job_id_part
from fray.errors import BackendUnavailableError, InvalidRequestError
from fray_ray._book import JobBook
from fray_ray._callable import CallableJob, cancel_refs
from fray_ray._command import CommandJob, submit_options
from fray_ray._convert import HEAD_NODE_RESOURCE, RAY, task_options
from fray_ray._direct import DirectTask
from fray_ray._environ import current_job
from fray_ray._handles import RayJobHandle
from fray_ray._host import LIFETIME_GROUP, host_class
from fray_ray._placement import Ask, ClusterView, autoscaler_note, cluster_view
from fray_ray._record import RayJob
from fray_ray._worker import ClientFor, bound, job_token, runner

__all__ = ["Launcher", "Prepared", "RemoteParts", "new_job_id"]


def new_job_id(name: str, parent: str | None, token: str | None = None) -> str:
    """``{name}-{token}`` (a random token unless given; ``/`` in the name escaped), below
    ``parent`` if any."""
    own = f"{job_id_part(name)}-{token or secrets.token_hex(4)}"
    return f"{parent}/{own}" if parent else own


def _shape(request: JobRequest) -> tuple[Any, ...]:
    """What a request holds, down to its resources (requests and resources can be changed
    after they are made): a resubmitted request that was changed is prepared again."""
    return (*request.__dict__.values(), *request.resources.__dict__.values())


class RemoteParts:
    """Ray objects made remote once per process and Ray session: the job wrapper and the
    actor host classes."""

    lock = threading.Lock()
    execute: Any = None
    session: tuple[str, str] | None = None
    hosts: ClassVar[dict[type[Any], Any]] = {}

    @classmethod
    def host(cls, actor_class: type[Any]) -> Any:
        """The Ray actor class hosting ``actor_class`` (made once per class)."""
        import ray

        remote = cls.hosts.get(actor_class)
        if remote is None:
            # Fray's own methods (fray_lifetime) run apart from the user's calls.
            make_remote: Any = ray.remote(concurrency_groups={LIFETIME_GROUP: 16})  # pyright: ignore[reportCallIssue]
            remote = cls.hosts[actor_class] = make_remote(host_class(actor_class))
        return remote

    @classmethod
    def load(cls, client_for: ClientFor) -> type[RemoteParts]:
        """Makes the remote objects for the Ray session this process is connected to
        (again after a ``ray.shutdown()`` and a new ``ray.init()``: objects made remote in an
        earlier session are not reused)."""
        import ray

        context = ray.get_runtime_context()
        session = (str(context.gcs_address), str(context.get_job_id()))
        with cls.lock:
            if cls.session != session:
                cls.hosts = {}
                cls.execute = ray.remote(max_retries=0)(runner(client_for))
                cls.session = session
        return cls


class Prepared:
    """A callable request made ready for Ray once: its task options, the env vars the
    wrapper sets, the pickled entrypoint and, once it is submitted again, a function
    exported with all of that bound in (one per submitting parent), submitted straight
    through Ray's core worker after its first call (``fray_ray._direct.DirectTask``)."""

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
        self.shape = _shape(request)
        self.options = options
        self.env = env
        self.payload = payload
        self.remote = execute.options(**options)
        self.uses = 0
        self.bound_remotes: dict[str | None, tuple[DirectTask, int]] = {}
        self.parts = (self.remote, tuple(env.items()), payload)  # what a CallableJob takes

    def bound(self, launcher: Launcher, parent: str | None) -> tuple[Any, int] | None:
        """The exported function for this request and parent, and its id salt; ``None``
        on a first submission (a one-off job is not worth an export)."""
        import ray

        self.uses += 1
        found = self.bound_remotes.get(parent)
        if found is not None or self.uses < 2:
            return found
        with launcher.lock:
            if launcher.bound_functions >= self.MAX_BOUND:
                return None
            launcher.bound_functions += 1
        salt = secrets.randbits(32)
        book = launcher.book
        context = (book.namespace, book.registry_name, book.echo_logs, tuple(self.env.items()))
        name = self.request.name
        function = bound(launcher.client_for, self.payload, name, parent, context, salt)
        remote = DirectTask(ray.remote(max_retries=0)(function), self.options)
        found = self.bound_remotes[parent] = (remote, salt)
        return found


class Launcher:
    """Starts a client's jobs: callable jobs as Ray tasks (a request resubmitted runs as an
    exported function, see :class:`Prepared`), command jobs through Ray's Jobs API, TPU
    jobs through fray-tpu's gangs.

    Args:
        book: The client's job bookkeeping.
        client_for: What jobs and actors bind as their client (``fray_ray._client.job_client``).
    """

    def __init__(self, book: JobBook, client_for: ClientFor) -> None:
        self.book = book
        self.client_for = client_for
        self.parts = RemoteParts.load(client_for)
        self.lock = threading.Lock()  # the cache and the count of exported functions
        self.bound_functions = 0  # exported job functions (see Prepared.bound)
        self._prepared: dict[int, Prepared] = {}
        self._resources: dict[str, float] | None = None
        self._view: ClusterView | None = None  # the nodes as last read (check_placeable)

    def submit(self, request: Any) -> Any:
        """Starts a job; its handle (a TPU job's is fray-tpu's)."""
        prepared = self._prepared.get(id(request))
        if prepared is None or prepared.request is not request or prepared.shape != _shape(request):
            RAY.check(check_request(request))
            if isinstance(request.resources.device, TpuConfig):
                return self._submit_tpu(request, new_job_id(request.name, current_job()))
            self.check_head_node(request.resources, "JobRequest.resources.preemptible")
            if not request.entrypoint.is_callable:
                return self._submit_command(request, current_job())
            prepared = self.prepared(request)
        # A callable request, validated and prepared (once per request object).
        parent = current_job()
        job = self._start_bound(request, prepared, parent)
        if job is None:
            job_id = new_job_id(request.name, parent)
            job = CallableJob(self.book, job_id, request, parent, prepared.parts)
            self._start(job)
        return RayJobHandle(job)

    def _submit_command(self, request: JobRequest, parent: str | None) -> RayJobHandle:
        job_id = new_job_id(request.name, parent)
        options = submit_options(request, job_id, self.book.namespace)
        self.check_placeable(options)
        job = CommandJob(self.book, job_id, request, parent, options)
        self.book.jobs_api()
        self._start(job)
        return RayJobHandle(job)

    def _start(self, job: RayJob) -> None:
        """Registers a job and starts its first attempt."""
        self.book.add(job)
        job.start()
        self.book.started(job)

    def _start_bound(
        self, request: JobRequest, prepared: Prepared, parent: str | None
    ) -> CallableJob | None:
        """Starts the first attempt of a resubmitted single-replica request through its
        exported function (no task arguments); ``None`` where that does not apply."""
        book = self.book
        if book.mirrors or request.replicas != 1 or request.scheduling_timeout is not None:
            # Nested jobs are recorded before they start; replicas need an index; a job with
            # a scheduling timeout has its replicas report their start under their attempt.
            return None
        found = prepared.bound(self, parent)
        if found is None:
            return None
        remote, salt = found
        ref = remote.remote()
        # The object id starts with the task id, from which the worker takes the same token.
        job_id = new_job_id(request.name, parent, job_token(ref.binary(), salt))
        job = CallableJob(book, job_id, request, parent, prepared.parts, first=ref)
        with book.lock:
            clash = job_id in book.history
            if not clash:
                book.history.add(job_id, job)
        if clash:  # 32 random bits met an id in use: run it under a fresh id instead
            cancel_refs([ref], wait=True)
            return None
        book.watcher.add(job, 1)
        return job

    def prepared(self, request: JobRequest) -> Prepared:
        """The Ray options, the env the wrapper sets and the pickled entrypoint of a request:
        computed once per request object (resubmitting the same request, as launchers and
        retries do, costs no re-validation or re-pickling)."""
        import cloudpickle

        key = id(request)
        with self.lock:
            cached = self._prepared.get(key)
        if cached is not None and cached.request is request and cached.shape == _shape(request):
            return cached
        options, env = task_options(request)
        if "pip" in options.get("runtime_env", {}):
            self._check_pip_applies()
        self.check_placeable(options)
        entry = request.entrypoint
        try:
            payload = cloudpickle.dumps((entry.callable, entry.args, entry.kwargs))
        except Exception as exc:
            raise InvalidRequestError.for_field(
                "JobRequest.entrypoint",
                entry.describe(),
                f"must be picklable to run on Ray ({type(exc).__name__}: {exc})",
            ) from exc
        prepared = Prepared(request, self.parts.execute, options, env, payload)
        with self.lock:
            if len(self._prepared) >= 64:
                self._prepared.pop(next(iter(self._prepared)))
            self._prepared[key] = prepared
        return prepared

    def check_placeable(
        self,
        options: dict[str, Any],
        field: str = "JobRequest.resources",
        unit: str = "a replica",
    ) -> None:
        """Refuses a request no node of the cluster could ever take, on a cluster that
        cannot grow: it would wait forever. Compared with the nodes as last read (read again
        only when none fits: once per client for requests that fit), so a request that fits
        costs a few dict lookups, once per request object (or actor group).

        Args:
            options: Ray task or actor options (or Jobs API ones).
            field: The field the error names.
            unit: What one placement is (``"a replica"``, ``"an actor"``).

        Raises:
            InvalidRequestError: No node, alive or dead, has the resources and labels one
                ``unit`` asks for, and no autoscaler may add one.
        """
        ask = Ask.of(options)
        view = self._view
        if view is not None and view.fits_some_node(ask):
            return
        view = self._view = cluster_view()
        if view.fits_some_node(ask) or autoscaler_note() is not None:
            return
        raise InvalidRequestError.for_field(
            field,
            ask.describe(),
            f"no node of this Ray cluster could ever take {unit} ({view.shortfall(ask)}) "
            "and the cluster has no autoscaler to add one; ask for what a node has, or add "
            "a node that has it",
        )

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

    def _submit_tpu(self, request: JobRequest, job_id: str) -> Any:
        try:
            from fray_tpu import ray as tpu_ray  # pyright: ignore[reportAttributeAccessIssue]

            submit_tpu_job = tpu_ray.submit_tpu_job
        except (ImportError, AttributeError) as exc:
            raise BackendUnavailableError(
                "TPU jobs on Ray need fray-tpu's gang orchestration (fray_tpu.ray); "
                f'install it with: pip install "fray-tpu[ray]" ({exc})'
            ) from exc
        # A gang needs slices of its type: a cluster that has none and cannot grow never will.
        variant = request.resources.device.variant
        self.check_placeable({"resources": {f"TPU-{variant}-head": 1}})
        handle = submit_tpu_job(request, job_id=job_id)
        book = self.book
        with book.lock:
            book.tpu_jobs.add(job_id, handle)
        handle.add_done_callback(self._tpu_job_finished)
        return handle

    def _tpu_job_finished(self, handle: Any) -> None:
        """A TPU job ended: it may age out of the history like any other job."""
        with self.book.lock:
            self.book.tpu_jobs.finished(handle.job_id)

    def check_head_node(self, resources: ResourceConfig, field: str) -> None:
        """Refuses ``preemptible=False`` on a cluster without a head-node resource.

        Raises:
            InvalidRequestError: The cluster has no ``head_node`` resource to pin to.
        """
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
