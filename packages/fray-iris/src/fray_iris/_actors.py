# pyright: standard
"""Actor groups on Iris: a group is one Iris job with an ``actor`` port per replica, and a
handle is the name of one actor's endpoint.

Each replica runs :func:`host_actor`, which serves its actor with Iris's actor server under
the endpoint ``<group job id>/<group>-<index>``. The group learns its members' states by
asking: the endpoints registered, the ends stored in the results store, and the state of the
hosting job and its tasks.

A handle pickles as its endpoint name and its job; it resolves lazily, from the current Iris
context inside a job or a connection to the controller outside one, and again after the
actor restarts (a new process, a new address). Calls through one handle run in order. A
call that never reached the actor is sent again while the actor's task lives; one the actor
may have started (its process killed mid-call) only while ``max_task_retries`` allows.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import sys
import threading
import time
import types
import weakref
from collections.abc import Callable
from typing import Any

import cloudpickle
from connectrpc.errors import ConnectError
from iris.client import IrisClient as RawIrisClient
from iris.client.client import get_iris_ctx
from iris.cluster.types import JobName
from iris.rpc import actor_pb2
from iris.rpc.actor_connect import ActorServiceClientSync
from pyqwest import SyncClient, SyncHTTPTransport

from fray import ActorConfig, ActorContext, Entrypoint, JobRequest, JobStatus, ResourceConfig
from fray.backend import (
    ActorMember,
    BaseActorGroup,
    Outcome,
    ShutdownEvent,
    binding,
    restart_allowed,
)
from fray.errors import ActorDiedError, ActorError, ActorUnavailableError, JobTimeoutError
from fray_iris._convert import line, never_sent, translate_errors
from fray_iris._task import ResultStore, enter_task, serving_hosts
from fray_iris._views import FINISHED, TASK_FINISHED

_LOOK_FIRST_S = 0.05  # the first pause between two looks at a group that is starting
_LOOK_MAX_S = 0.5
_GONE = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED)
_UNLIMITED_RETRIES = 1000  # Iris's retries for "restart without limit"
_EXIT_DELAY_S = 0.5  # lets the call that ended an actor send its answer
_STOPPED: set[str] = set()  # endpoints of groups shut down from this process
_RESOLVE_WAIT_S = 300.0  # how long a handle waits for a restarting actor to come back
_UNREACHABLE_WAIT_S = 60.0  # how long a call retries an actor that does not answer


def actor_job(
    actor_class: type[Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str,
    count: int,
    resources: ResourceConfig,
    config: ActorConfig,
    client: Any,
) -> JobRequest:
    """The request of an actor group's job: each replica runs :func:`host_actor`. A dead
    actor restarts as on Ray, ``config.max_restarts`` times (-1: without limit; ``None``:
    without limit where preemptible, else never), as Iris retries of its task; one attempt
    more only stores that it died and exits 0, so Iris does not stop the other actors."""
    restarts = config.max_restarts
    if restarts is None:
        restarts = -1 if resources.preemptible else 0
    retries = _UNLIMITED_RETRIES if restarts < 0 else restarts + 1
    task_args = (actor_class, tuple(args), dict(kwargs), name, config, restarts, client.results_url)
    return JobRequest(
        name=name,
        entrypoint=Entrypoint.from_callable(host_actor, task_args),
        resources=resources.model_copy(update={"replicas": 1}),
        replicas=count,
        max_retries_failure=retries,
        max_retries_preemption=retries,
        priority=config.priority,
    )


class IrisActorGroup(BaseActorGroup):
    """``count`` actors served by one Iris job; see ``fray.ActorGroup``. An actor is
    RUNNING while its endpoint is registered and its task runs, PENDING while it restarts,
    and ends as it stored (SUCCEEDED, or FAILED with its error), FAILED when its task ended
    without storing, or FAILED or STOPPED with the job."""

    polls = True

    def __init__(self, client: Any, name: str, count: int, job: Any, config: ActorConfig) -> None:
        wire, retries = job.iris_job_id, config.max_task_retries or 0
        handles = [
            IrisActorHandle(f"{wire}/{name}-{i}", wire, client.address, retries)
            for i in range(count)
        ]
        super().__init__(name, [ActorMember(i, h.name, h) for i, h in enumerate(handles)])
        self.job = job  # the Iris job that hosts the actors
        self._owner = client
        self._wire = wire
        self._delay = _LOOK_FIRST_S

    def discover_new(self, target: int | None = None) -> list[Any]:
        """Ready actors not returned before; with ``target``, up to that many in all."""
        self._refresh(0)
        with self._cond:
            room = len(self._members) if target is None else max(target - len(self._yielded), 0)
            fresh = [
                m
                for m in self._members
                if m.status is JobStatus.RUNNING and m.index not in self._yielded
            ][:room]
            self._yielded.update(m.index for m in fresh)
        return [m.handle for m in fresh]

    def wait_ready(self, count: int | None = None, timeout: float | None = 900.0) -> list[Any]:
        """See ``fray.ActorGroup``; 900 s by default, as the predecessor's Iris groups."""
        return super().wait_ready(count, timeout)

    def _refresh(self, timeout: float) -> None:
        if timeout <= 0:
            self._delay = _LOOK_FIRST_S
            self._look()
            return
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(self._delay, left))  # the pause between two looks
            self._delay = min(self._delay * 1.5, _LOOK_MAX_S)
            if self._look():
                return

    def _stop(self, members: list[ActorMember]) -> None:
        _STOPPED.update(m.handle.endpoint for m in members)
        self.job.terminate()

    def _look(self) -> bool:
        """Learns each member's state; returns whether any changed."""
        live = [m for m in self._members if m.status not in _GONE]
        if self._stopped or not live:
            return False
        raw, prefix = self._owner.iris, f"{self._wire}/{self.name}-"
        with translate_errors(f"actors of {self.name}"):
            names = line.endpoints(raw, prefix)
            tasks = {t.task_index: t for t in line.tasks(raw, JobName.from_wire(self._wire))}
        # An endpoint counts while its task runs: 0.2.227 keeps a dead attempt's one.
        finished = {str(i) for i, t in tasks.items() if t.state in TASK_FINISHED}
        ready = {n[len(prefix) :] for n in names} - finished
        ended = None
        if any(str(m.index) not in ready for m in live) and self.job.status().is_finished:
            info = self.job.info()  # not stopped by this group: its actors died
            why = f"{info.status.value}: {info.error}" if info.error else info.status.value
            error = ActorError(f"the job hosting actor group {self.name} ended {why}")
            ended = JobStatus.FAILED, error
        changed = False
        for member in live:
            if str(member.index) in ready:
                changed |= member.set_status(JobStatus.RUNNING)
                continue
            task = tasks.get(member.index)
            end = self._stored_end(member.index) or ended or _task_end(member.name, task)
            changed |= member.set_status(*(end or (JobStatus.PENDING, None)))
        return changed

    def _stored_end(self, index: int) -> tuple[JobStatus, BaseException | None] | None:
        """SUCCEEDED (its shutdown_event) or FAILED with the error, where the actor stored
        how it ended."""
        store = self._owner.results
        record = store.read(store.task_path(self._wire, index, "actor")) if store else None
        if record is None:
            return None
        failed = record.kind == "failed"
        return (JobStatus.FAILED, record.cause) if failed else (JobStatus.SUCCEEDED, None)


def _task_end(name: str, task: Any) -> tuple[JobStatus, BaseException | None] | None:
    """FAILED for an actor whose task has finished without storing its end: its process
    died with no restarts left."""
    if task is None or task.state not in TASK_FINISHED:
        return None
    why = task.error or f"exit code {task.exit_code}"
    return JobStatus.FAILED, ActorDiedError(f"actor {name} died with no restarts left: {why}")


# -- handles ------------------------------------------------------------------------------


@functools.cache
def _remote(controller: str) -> Any:
    return RawIrisClient.remote(controller)


def _connection(controller: str | None) -> Any:
    """The current job's Iris client, else one per controller for this process."""
    ctx = get_iris_ctx()
    if ctx is not None and ctx.client is not None:
        return ctx.client
    if not controller:
        raise ActorError("this actor handle cannot be resolved: no Iris context or controller")
    return _remote(controller)


class IrisActorFuture(concurrent.futures.Future[Any]):
    """The pending result of an actor call; see ``fray.ActorFuture``."""

    def result(self, timeout: float | None = None) -> Any:
        """The call's return value; re-raises the method's own exception."""
        try:
            return super().result(timeout)
        except concurrent.futures.TimeoutError:
            if self.done():
                raise
            raise JobTimeoutError(f"actor call did not finish within {timeout}s") from None


class IrisActorMethod:
    """``handle.method``: call it, or ``.remote()`` it for a future."""

    __slots__ = ("_handle", "_method")

    def __init__(self, handle: IrisActorHandle, method: str) -> None:
        self._handle = handle
        self._method = method

    def remote(self, *args: Any, **kwargs: Any) -> IrisActorFuture:
        """Starts the call; calls from one handle run in the order they were made."""
        return self._handle._enqueue(self._method, args, kwargs)

    def submit(self, *args: Any, **kwargs: Any) -> IrisActorFuture:
        """A long-running call: on Iris the same as :meth:`remote` (one RPC)."""
        return self.remote(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls and waits."""
        with self._handle._lock:
            busy = self._handle._pending > 0
        if busy:  # keep the order of calls made through this handle
            return self.remote(*args, **kwargs).result()
        return self._handle._call(self._method, args, kwargs)


class IrisActorHandle:
    """Handle to one actor of an Iris actor group. Pickles as its endpoint name, its job
    and ``retries``: how many times a call interrupted by the actor dying is sent again
    (the group's ``max_task_retries``; -1: without limit)."""

    def __init__(
        self, endpoint: str, job_wire: str, controller: str | None, retries: int = 0
    ) -> None:
        self.endpoint = endpoint  # the Iris endpoint name the actor registered
        self.name = endpoint.rsplit("/", 1)[-1]  # {group}-{index}
        self._job_wire = job_wire
        self._controller = controller
        self._retries = retries
        self._rpc: Any = None
        self._interrupted = False
        self._lock = threading.Lock()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending = 0

    def __getattr__(self, method: str) -> IrisActorMethod:
        if method.startswith("_"):
            raise AttributeError(method)
        return IrisActorMethod(self, method)

    def __reduce__(self) -> tuple[Any, ...]:
        return IrisActorHandle, (self.endpoint, self._job_wire, self._controller, self._retries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IrisActorHandle) and other.endpoint == self.endpoint

    def __hash__(self) -> int:
        return hash(self.endpoint)

    def __repr__(self) -> str:
        return f"IrisActorHandle({self.name!r})"

    def _enqueue(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        future = IrisActorFuture()
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    1, thread_name_prefix=f"fray-iris-{self.name}"
                )
                weakref.finalize(self, self._executor.shutdown, False)
            self._pending += 1
            self._executor.submit(self._run_queued, future, method, args, kwargs)
        return future

    def _run_queued(self, future: IrisActorFuture, method: str, *call: Any) -> None:
        try:
            value, error = self._call(method, *call), None
        except BaseException as exc:
            value, error = None, exc
        with self._lock:
            self._pending -= 1  # first: a blocking call made once this one is done goes direct
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def _died(self, why: str) -> ActorDiedError:
        return ActorDiedError(f"actor {self.name} is gone: {why}")

    def _gone(self) -> str | None:
        """Why the actor is gone for good (its job or its task finished), or ``None``."""
        raw = _connection(self._controller)
        wire = JobName.from_wire(self._job_wire)
        index = self.endpoint.rsplit("-", 1)[-1]
        with translate_errors(f"state of actor {self.name}"):
            state = line.states(raw, [wire]).get(self._job_wire)
            if state is None or state in FINISHED:
                return "its job has finished"
            tasks = {t.task_index: t.state for t in line.tasks(raw, wire)}
        if index.isdigit() and tasks.get(int(index)) in TASK_FINISHED:
            return "its task has finished (it ended itself, or died with no restarts left)"
        return None

    def _client(self) -> Any:
        rpc = self._rpc
        if rpc is not None:
            return rpc
        raw = _connection(self._controller)
        deadline = time.monotonic() + _RESOLVE_WAIT_S
        delay = 0.05
        while True:
            with translate_errors(f"resolve actor {self.name}"):
                found = line.endpoint(raw, JobName.from_wire(self._job_wire), self.endpoint)
            if found:
                break
            gone = self._gone()
            if gone is not None:
                raise self._died(gone)
            if time.monotonic() > deadline:
                raise self._died(f"its endpoint did not come back within {_RESOLVE_WAIT_S}s")
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        # After an interruption, new connections: the shared pool may still hold one to the
        # dead process, and a call written to it fails as if the new process had died.
        http = SyncClient(SyncHTTPTransport()) if self._interrupted else None
        self._rpc = ActorServiceClientSync(
            address=found, timeout_ms=None, accept_compression=[], http_client=http
        )
        return self._rpc

    def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        request = actor_pb2.ActorCall(
            method_name=method,
            actor_name=self.endpoint,
            serialized_args=cloudpickle.dumps(args),
            serialized_kwargs=cloudpickle.dumps(kwargs),
        )
        retries = self._retries
        unreachable_since: float | None = None
        delay = 0.05
        while True:
            if self.endpoint in _STOPPED:
                raise self._died("its group was shut down")
            try:
                response = self._client().call(request)
            except ConnectError as err:
                # Unreachable (gone for good, restarting, or not yet listening on a loaded
                # machine): retry while its task lives, for a while. Any other failure means
                # the actor may have run the call: send it again only with retries left.
                self._rpc, self._interrupted = None, True
                gone = self._gone()
                if gone is not None:
                    raise self._died(gone) from err
                if not never_sent(err):
                    if retries == 0:  # its task lives: it restarts, the call's outcome is lost
                        raise ActorUnavailableError(
                            f"actor {self.name}: {method} was interrupted ({err.code.value}: "
                            f"{err.message}); the actor may have died mid-call, and a call is "
                            "sent again only with ActorConfig(max_task_retries=N)"
                        ) from err
                    retries -= 1 if retries > 0 else 0
                    continue  # resolves the actor again: waits for it to restart
                unreachable_since = unreachable_since or time.monotonic()
                if time.monotonic() - unreachable_since > _UNREACHABLE_WAIT_S:
                    raise ActorError(
                        f"actor {self.name} could not be reached for {_UNREACHABLE_WAIT_S}s: {err}"
                    ) from err
                time.sleep(delay)  # backoff between attempts to reach a restarting actor
                delay = min(delay * 2, 1.0)
                continue
            if response.HasField("error"):
                error = response.error
                if error.error_type in line.ACTOR_NOT_FOUND:
                    raise ActorError(f"actor {self.name}: {error.message}")
                if error.serialized_exception:
                    raise cloudpickle.loads(error.serialized_exception)
                raise ActorError(f"actor {self.name}: {error.error_type}: {error.message}")
            return cloudpickle.loads(response.serialized_value)


# -- in the task ---------------------------------------------------------------------------


class _Serving:
    """Runs an actor's methods: at most ``limit`` at once, with ``current_actor()`` set, and
    with exceptions that always travel back. A method raising ``SystemExit`` ends the actor:
    that call and every later one raise ``ActorDiedError``, and the task exits."""

    def __init__(self, instance: Any, limit: int, context: ActorContext, name: str) -> None:
        self.instance = instance
        self.gate = threading.Semaphore(limit)
        self.context = context
        self.name = name
        self.closed = False
        self.restarting = False  # closed until Iris runs the task again
        self.on_exit: Callable[[], None] = lambda: None

    def wrap(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if self.restarting:
                raise ActorUnavailableError(f"actor {self.name} is restarting")
            if self.closed:
                raise ActorDiedError(f"actor {self.name} has exited")
            with self.gate, binding(actor=self.context):
                outcome = Outcome.of_call(method, *args, **kwargs)
            if outcome.kind == "succeeded":
                return outcome.value
            if isinstance(outcome.cause, SystemExit):
                self.closed = True
                self.on_exit()
                code = outcome.cause.code
                raise ActorDiedError(f"actor {self.name} exited (SystemExit {code!r}) in this call")
            import cloudpickle  # the exception as it pickles (its text, where it would not)

            raise cloudpickle.loads(cloudpickle.dumps(outcome)).cause

        return call

    def namespace(self) -> types.SimpleNamespace:
        methods: dict[str, Callable[..., Any]] = {}
        for name in dir(self.instance):
            attr = None if name.startswith("_") else getattr(self.instance, name, None)
            if callable(attr):
                methods[name] = self.wrap(attr)
        return types.SimpleNamespace(**methods)


def host_actor(
    actor_class: type[Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    group_name: str,
    config: ActorConfig,
    restarts: int,
    results_url: str | None,
) -> None:
    """Builds one actor of a group and serves it on the ``actor`` port as the endpoint
    ``<job id>/<group>-<index>`` until the job is stopped or the actor ends. How it ended is
    stored for the group and the task exits 0 (the other actors go on), except after a
    ``fail(exc)`` with restarts left (``restarts``, in Iris attempts; -1: no limit): exit 1,
    and Iris runs the task again."""
    from iris.actor.server import ActorServer
    from iris.client.client import iris_ctx
    from iris.cluster.client.job_info import get_job_info

    job_wire, index = enter_task(results_url)
    info = get_job_info()
    assert info is not None
    actor_name = f"{group_name}-{index}"
    endpoint = f"{job_wire}/{actor_name}"
    store = ResultStore(results_url) if results_url else None
    record_path = store.task_path(job_wire, index, "actor") if store else ""
    if store is not None and info.attempt_id == 0:
        store.remove(record_path)  # a record left by an earlier group of the same name

    def record(outcome: Outcome) -> None:
        if store is not None:
            store.write(record_path, outcome)

    if 0 <= restarts < info.attempt_id:  # the attempt after the last restart
        why = f"died with no restarts left (max_restarts={restarts})"
        record(Outcome.failed(ActorDiedError(f"actor {actor_name} {why}")))
        print(f"[fray] actor {actor_name} {why}", flush=True)
        return

    handle = IrisActorHandle(
        endpoint, job_wire, info.controller_address, retries=config.max_task_retries or 0
    )
    stop = threading.Event()
    exit_code = 0
    ended: list[Callable[[], None]] = []  # set once serving has started

    def on_shutdown() -> None:
        if ended:
            ended[0]()

    context = ActorContext(handle, index, group_name, ShutdownEvent(on_shutdown, actor_name))
    with binding(actor=context):
        built = Outcome.of_call(actor_class, *args, **kwargs)
    if built.kind != "succeeded":
        sys.stderr.write(built.trace or f"{built.error}\n")
        record(built)
        sys.stderr.flush()
        return

    bind, advertise = serving_hosts(info)
    ctx = iris_ctx()
    server = ActorServer(host=bind, port=ctx.get_port("actor"))
    serving = _Serving(built.value, config.max_concurrency, context, actor_name)
    server.register(endpoint, serving.namespace())
    port = server.serve_background()
    registry = ctx.registry
    endpoint_id = registry.register(
        endpoint, f"http://{advertise}:{port}", metadata={"fray": "actor"}
    )
    print(f"[fray] actor {actor_name} serving on {advertise}:{port}", flush=True)

    def finish(outcome: Outcome | None, code: int) -> None:
        # Takes no more calls; the call that ended it still answers before the exit.
        nonlocal exit_code
        serving.closed = True
        if outcome is not None:
            record(outcome)  # before the endpoint goes: the group reads both
        registry.unregister(endpoint_id)
        exit_code = code
        threading.Timer(_EXIT_DELAY_S, stop.set).start()

    def end_actor() -> None:
        failure = context.failure
        if failure is None:
            finish(Outcome.succeeded(), 0)
        elif restart_allowed(info.attempt_id, restarts):
            print(f"[fray] actor {actor_name} failed ({failure!r}); restarting", flush=True)
            serving.restarting = True
            finish(None, 1)
        else:
            why = f"failed: {type(failure).__name__}: {failure}"
            finish(Outcome.failed(ActorDiedError(f"actor {actor_name} {why}")), 0)

    died = ActorDiedError(f"actor {actor_name} exited (SystemExit in a method)")
    serving.on_exit = lambda: finish(Outcome.failed(died), 0)
    ended.append(end_actor)
    if context.shutdown_event is not None and context.shutdown_event.is_set():
        end_actor()  # set by the constructor, before there was anything to end
    stop.wait()  # serve until the job is stopped or the actor ends
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
