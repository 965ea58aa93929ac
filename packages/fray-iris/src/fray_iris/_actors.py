# pyright: standard
"""Actors on Iris: a group is one Iris job with an ``actor`` port per replica.

Each replica builds its actor, serves it with Iris's actor server and registers the endpoint
``<group job id>/<group>-<index>`` (an absolute name, so it resolves from any namespace).
Handles pickle as that name plus the job id; they resolve lazily, from the current Iris
context inside a job, or from a connection to the controller outside one.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import weakref
from typing import Any

import cloudpickle
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from iris.cluster.types import Entrypoint as IrisEntrypoint
from iris.cluster.types import JobName, is_job_finished
from iris.rpc import actor_pb2

from fray import ActorConfig, JobRequest, JobStatus, ResourceConfig
from fray.errors import (
    ActorDiedError,
    ActorError,
    FrayError,
    InvalidRequestError,
    JobTimeoutError,
)
from fray_iris._convert import to_iris_request, translate_errors
from fray_iris._task import host_actor

__all__ = ["IrisActorFuture", "IrisActorGroup", "IrisActorHandle", "actor_job"]

_STOPPED: set[str] = set()  # endpoints of groups shut down from this process
_STOPPED_LOCK = threading.Lock()
_RESOLVE_WAIT_S = 60.0  # how long a handle waits for a restarting actor to come back
_UNREACHABLE_WAIT_S = 60.0  # how long a call retries an actor that does not answer

_connections: dict[str, Any] = {}
_connections_lock = threading.Lock()


def actor_job(
    actor_class: type[Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    name: str,
    count: int,
    resources: ResourceConfig,
    config: ActorConfig,
    results_url: str | None,
) -> tuple[IrisEntrypoint, dict[str, Any]]:
    """The entrypoint and submit arguments of an actor group's job."""
    restarts = config.max_restarts
    if restarts is None:
        failure_retries, preemption_retries = 0, 100
    elif restarts < 0:
        failure_retries, preemption_retries = 1000, 1000
    else:
        failure_retries, preemption_retries = restarts, restarts
    request = JobRequest(
        name=name,
        entrypoint=_placeholder_entrypoint(),
        resources=resources.model_copy(update={"replicas": 1}),
        replicas=count,
        max_retries_failure=failure_retries,
        max_retries_preemption=preemption_retries,
    )
    converted = to_iris_request(request)
    entry = IrisEntrypoint.from_callable(
        host_actor,
        actor_class,
        tuple(args),
        dict(kwargs),
        name,
        config.max_concurrency,
        results_url,
    )
    return entry, converted.kwargs()


def _placeholder_entrypoint() -> Any:
    from fray import Entrypoint

    return Entrypoint.from_callable(host_actor)


def _connection(controller: str | None) -> Any:
    """The marin-iris client to resolve endpoints with: the current job's, else one per
    controller address for this process."""
    from iris.client import IrisClient as RawIrisClient
    from iris.client import get_iris_ctx

    ctx = get_iris_ctx()
    if ctx is not None and ctx.client is not None:
        return ctx.client
    if not controller:
        raise ActorError("this actor handle cannot be resolved: no Iris context or controller")
    with _connections_lock:
        raw = _connections.get(controller)
        if raw is None:
            raw = RawIrisClient.remote(controller)
            _connections[controller] = raw
        return raw


def _forget_endpoints(endpoints: list[str]) -> None:
    with _STOPPED_LOCK:
        _STOPPED.update(endpoints)


class IrisActorFuture:
    """The pending result of an actor call; see ``fray.ActorFuture``."""

    __slots__ = ("_future",)

    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self._future = future

    def result(self, timeout: float | None = None) -> Any:
        """The call's return value; re-raises the method's own exception."""
        try:
            return self._future.result(timeout)
        except concurrent.futures.TimeoutError:
            if self._future.done():
                raise
            raise JobTimeoutError(f"actor call did not finish within {timeout}s") from None

    def done(self) -> bool:
        """Whether the call has finished."""
        return self._future.done()


class IrisActorMethod:
    """``handle.method``: call it, or ``.remote()`` it for a future."""

    __slots__ = ("_handle", "_method")

    def __init__(self, handle: IrisActorHandle, method: str) -> None:
        self._handle = handle
        self._method = method

    def remote(self, *args: Any, **kwargs: Any) -> IrisActorFuture:
        """Starts the call; calls from one handle run in the order they were made."""
        return IrisActorFuture(self._handle._enqueue(self._method, args, kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls and waits."""
        return self._handle._call_in_order(self._method, args, kwargs)


class IrisActorHandle:
    """Handle to one actor of an Iris actor group. Pickles as its endpoint name."""

    def __init__(self, endpoint: str, job_wire: str, controller: str | None) -> None:
        self._endpoint = endpoint
        self._job_wire = job_wire
        self._controller = controller
        self._rpc: Any = None
        self._lock = threading.Lock()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending = 0

    @property
    def name(self) -> str:
        """The actor's name (``{group}-{index}``)."""
        return self._endpoint.rsplit("/", 1)[-1]

    @property
    def endpoint(self) -> str:
        """The Iris endpoint name the actor registered."""
        return self._endpoint

    def __getattr__(self, method: str) -> IrisActorMethod:
        if method.startswith("_"):
            raise AttributeError(method)
        return IrisActorMethod(self, method)

    def __reduce__(self) -> tuple[Any, ...]:
        return (IrisActorHandle, (self._endpoint, self._job_wire, self._controller))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IrisActorHandle) and other._endpoint == self._endpoint

    def __hash__(self) -> int:
        return hash(self._endpoint)

    def __repr__(self) -> str:
        return f"IrisActorHandle({self.name!r})"

    # -- calls -------------------------------------------------------------------------------

    def _enqueue(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> concurrent.futures.Future[Any]:
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    1, thread_name_prefix=f"fray-iris-{self.name}"
                )
                weakref.finalize(self, self._executor.shutdown, False)
            self._pending += 1
            executor = self._executor
        return executor.submit(self._run_queued, method, args, kwargs)

    def _run_queued(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return self._call(method, args, kwargs)
        finally:
            with self._lock:
                self._pending -= 1

    def _call_in_order(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        with self._lock:
            busy = self._pending > 0
        if busy:  # keep the order of calls made through this handle
            return self._enqueue(method, args, kwargs).result()
        return self._call(method, args, kwargs)

    def _died(self, why: str) -> ActorDiedError:
        return ActorDiedError(f"actor {self.name} is gone: {why}")

    def _job_finished(self) -> bool:
        raw = _connection(self._controller)
        with translate_errors(f"state of actor {self.name}"):
            states = raw._cluster_client.get_job_states([JobName.from_wire(self._job_wire)])
        state = states.get(self._job_wire)
        return state is None or is_job_finished(state)

    def _client(self) -> Any:
        rpc = self._rpc
        if rpc is not None:
            return rpc
        from iris.rpc.actor_connect import ActorServiceClientSync

        if self._endpoint in _STOPPED:
            raise self._died("its group was shut down")
        raw = _connection(self._controller)
        deadline = time.monotonic() + _RESOLVE_WAIT_S
        delay = 0.05
        while True:
            with translate_errors(f"resolve actor {self.name}"):
                found = raw._cluster_client.list_endpoints(prefix=self._endpoint, exact=True)
            if found:
                break
            if self._job_finished():
                raise self._died("its job has finished")
            if time.monotonic() > deadline:
                raise self._died(f"its endpoint did not come back within {_RESOLVE_WAIT_S}s")
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        rpc = ActorServiceClientSync(
            address=found[0].address, timeout_ms=None, accept_compression=[]
        )
        self._rpc = rpc
        return rpc

    def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        request = actor_pb2.ActorCall(
            method_name=method,
            actor_name=self._endpoint,
            serialized_args=cloudpickle.dumps(args),
            serialized_kwargs=cloudpickle.dumps(kwargs),
        )
        last: Exception | None = None
        deadline = time.monotonic() + _UNREACHABLE_WAIT_S
        delay = 0.05
        while True:
            if self._endpoint in _STOPPED:
                raise self._died("its group was shut down")
            rpc = self._client()
            try:
                response = rpc.call(request)
            except ConnectError as err:
                # Unreachable (gone for good, restarting, or not yet listening on a loaded
                # machine): retry while its job lives, for a while. Any other answer means
                # the server may have run the call: never send it twice.
                last = err
                self._rpc = None
                if self._job_finished():
                    raise self._died("its job has finished") from err
                if err.code is not Code.UNAVAILABLE:
                    raise ActorError(f"actor {self.name}: {err.code.value}: {err}") from err
                if time.monotonic() > deadline:
                    break
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            if response.HasField("error"):
                error = response.error
                if error.error_type == "NotFound":
                    raise ActorError(f"actor {self.name}: {error.message}")
                if error.serialized_exception:
                    raise cloudpickle.loads(error.serialized_exception)
                raise ActorError(f"actor {self.name}: {error.error_type}: {error.message}")
            return cloudpickle.loads(response.serialized_value)
        raise ActorError(
            f"actor {self.name} could not be reached for {_UNREACHABLE_WAIT_S}s: {last}"
        ) from last


class IrisActorGroup:
    """``count`` actors served by one Iris job; see ``fray.ActorGroup``."""

    def __init__(self, session: Any, name: str, count: int, job: Any) -> None:
        self._session = session
        self.name = name
        self._count = count
        self._job = job
        self._yielded: set[int] = set()
        self._failed: dict[int, BaseException | None] = {}
        self._stopped = False
        self._lock = threading.Lock()
        controller = session.address
        wire = job.iris_job_id
        self._handles = [
            IrisActorHandle(f"{wire}/{name}-{i}", wire, controller) for i in range(count)
        ]

    @property
    def job(self) -> Any:
        """The Iris job that hosts the actors."""
        return self._job

    def __len__(self) -> int:
        return self._count

    def _ready_indices(self) -> set[int]:
        if self._stopped:
            return set()
        wire = self._job.iris_job_id
        prefix = f"{wire}/{self.name}-"
        raw = self._session.raw
        with translate_errors(f"actors of {self.name}"):
            found = raw._cluster_client.list_endpoints(prefix=prefix, exact=False)
        ready: set[int] = set()
        for endpoint in found:
            suffix = endpoint.name[len(prefix) :]
            if suffix.isdigit() and int(suffix) < self._count:
                ready.add(int(suffix))
        return ready

    def _check_failed(self, indices: set[int]) -> None:
        store = self._session.results
        if store is None:
            return
        wire = self._job.iris_job_id
        for index in indices:
            if index in self._failed:
                continue
            record = store.read(store.actor_path(wire, index))
            if record is not None and record[0] == "error":
                self._failed[index] = record[1]

    @property
    def ready_count(self) -> int:
        """Actors serving calls now."""
        return len(self._ready_indices())

    def wait_ready(self, count: int | None = None, timeout: float | None = 300.0) -> list[Any]:
        """Waits for ``count`` actors (all by default); fails fast when the job dies.

        Raises:
            ActorError: Too many constructors failed, or the hosting job ended.
            JobTimeoutError: ``timeout`` seconds passed first.
        """
        want = self._count if count is None else count
        if isinstance(want, bool) or not isinstance(want, int) or not 0 <= want <= self._count:
            raise InvalidRequestError.for_field(
                "wait_ready.count",
                count,
                f"must be an integer from 0 to the group size {self._count}",
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.05
        while True:
            if self._stopped:
                raise ActorError(f"actor group {self.name} was shut down")
            ready = self._ready_indices()
            if len(ready) >= want:
                chosen = sorted(ready)[:want]
                with self._lock:
                    self._yielded.update(chosen)
                return [self._handles[i] for i in chosen]
            self._check_failed(set(range(self._count)) - ready)
            if self._count - len(self._failed) < want:
                index, cause = sorted(self._failed.items())[0]
                raise ActorError(
                    f"only {self._count - len(self._failed)} of {self._count} actors of "
                    f"{self.name} can become ready, {want} were asked for; "
                    f"{self.name}-{index} failed: {cause!r}"
                ) from cause
            if self._job.status().is_finished:
                status = self._job.info()
                raise ActorError(
                    f"the job hosting actor group {self.name} ended {status.status.value}"
                    + (f": {status.error}" if status.error else "")
                )
            if deadline is not None and time.monotonic() > deadline:
                raise JobTimeoutError(
                    f"only {len(ready)}/{want} actors of {self.name} ready after {timeout}s"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def discover_new(self) -> list[Any]:
        """Handles of ready actors not returned before."""
        ready = self._ready_indices()
        with self._lock:
            fresh = sorted(ready - self._yielded)
            self._yielded.update(fresh)
        return [self._handles[i] for i in fresh]

    def statuses(self) -> list[JobStatus]:
        """One status per actor: RUNNING (serving), PENDING, FAILED or STOPPED."""
        if self._stopped:
            return [
                JobStatus.FAILED if i in self._failed else JobStatus.STOPPED
                for i in range(self._count)
            ]
        ready = self._ready_indices()
        self._check_failed(set(range(self._count)) - ready)
        finished = self._job.status()
        out: list[JobStatus] = []
        for i in range(self._count):
            if i in ready:
                out.append(JobStatus.RUNNING)
            elif i in self._failed:
                out.append(JobStatus.FAILED)
            elif finished.is_finished:
                out.append(JobStatus.FAILED if finished is JobStatus.FAILED else JobStatus.STOPPED)
            else:
                out.append(JobStatus.PENDING)
        return out

    def is_done(self) -> bool:
        """Whether the hosting job has finished (or the group was shut down)."""
        return self._stopped or self._job.status().is_finished

    def _mark_stopped(self) -> None:
        self._stopped = True
        _forget_endpoints([h.endpoint for h in self._handles])

    def shutdown(self) -> None:
        """Terminates the hosting job; calls through any handle then raise ActorDiedError."""
        self._mark_stopped()
        try:
            self._job.terminate()
        except FrayError:
            raise

    def __repr__(self) -> str:
        return f"IrisActorGroup({self.name!r}, count={self._count})"
