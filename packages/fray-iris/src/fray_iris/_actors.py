# pyright: standard
"""Actor groups on Iris: one Iris job whose replicas each serve one actor (:func:`host_actor`)
as the endpoint ``<job id>/<group>-<index>``. A handle pickles as that endpoint name and
resolves it lazily, again after the actor restarts; calls through one handle run in order.
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

from fray import ActorConfig, ActorContext, JobStatus
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
_EXIT_DELAY_S = 0.5  # lets the call that ended an actor send its answer
_STOPPED: set[str] = set()  # endpoints of groups shut down from this process
_RESOLVE_WAIT_S = 300.0  # how long a handle waits for a restarting actor to come back
_UNREACHABLE_WAIT_S = 60.0  # how long a call retries an actor that does not answer
End = tuple[JobStatus, BaseException | None]


class IrisActorGroup(BaseActorGroup):
    """``count`` actors served by one Iris job; see ``fray.ActorGroup`` (PENDING: restarting)."""

    polls = True

    def __init__(
        self, client: Any, name: str, count: int, job: Any, config: ActorConfig, records: str
    ) -> None:
        wire, retries = job.iris_job_id, config.max_task_retries or 0
        handles = [
            IrisActorHandle(f"{wire}/{name}-{i}", wire, client.address, retries)
            for i in range(count)
        ]
        super().__init__(name, [ActorMember(i, h.name, h) for i, h in enumerate(handles)])
        self.job = job  # the Iris job that hosts the actors
        self._owner = client
        self._wire = wire
        self._records = records  # the leaf of its actors' records in the results store
        self._delay = _LOOK_FIRST_S

    def discover_new(self, target: int | None = None) -> list[Any]:
        """Ready actors not returned before; with ``target``, up to that many in all."""
        self._refresh(0)
        with self._cond:
            room = len(self._members) if target is None else max(target - len(self._yielded), 0)
            ready = (m for m in self._members if m.status is JobStatus.RUNNING)
            fresh = [m for m in ready if m.index not in self._yielded][:room]
            self._yielded.update(m.index for m in fresh)
        return [m.handle for m in fresh]

    def wait_ready(self, count: int | None = None, timeout: float | None = 900.0) -> list[Any]:
        """See ``fray.ActorGroup``; 900 s by default, as the predecessor's Iris groups."""
        return super().wait_ready(count, timeout)

    def _stop(self, members: list[ActorMember]) -> None:
        _STOPPED.update(m.handle.endpoint for m in members)
        self.job.terminate()

    def _refresh(self, timeout: float) -> None:
        """Learns each member's state (waiting: after a pause that grows)."""
        if timeout > 0:
            time.sleep(min(self._delay, timeout))
            self._delay = min(self._delay * 1.5, _LOOK_MAX_S)
        else:
            self._delay = _LOOK_FIRST_S
        live = [m for m in self._members if m.status not in _GONE]
        if self._stopped or not live:
            return
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
        for member in live:
            if str(member.index) in ready:
                member.set_status(JobStatus.RUNNING)
            else:
                member.set_status(*self._end(member, tasks.get(member.index), ended))

    def _end(self, member: ActorMember, task: Any, ended: End | None) -> End:
        """A member not serving: ended as stored, with the job, or (task finished) died; PENDING."""
        store = self._owner.results
        record = (
            store.read(store.task_path(self._wire, member.index, self._records)) if store else None
        )
        if record is not None:
            failed = record.kind == "failed"
            return (JobStatus.FAILED, record.cause) if failed else (JobStatus.SUCCEEDED, None)
        if ended is not None or task is None or task.state not in TASK_FINISHED:
            return ended or (JobStatus.PENDING, None)
        why = f"died with no restarts left: {task.error or f'exit code {task.exit_code}'}"
        return JobStatus.FAILED, ActorDiedError(f"actor {member.name} {why}")


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
        self._handle, self._method = handle, method

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
    """Handle to one actor of an Iris actor group. A call that never reached the actor is sent
    again while its task lives; one it may have run, ``retries`` times (-1: without limit)."""

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
                prefix = f"fray-iris-{self.name}"
                self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=prefix)
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
        raw, wire = _connection(self._controller), JobName.from_wire(self._job_wire)
        with translate_errors(f"state of actor {self.name}"):
            state = line.states(raw, [wire]).get(self._job_wire)
            if state is None or state in FINISHED:
                return "its job has finished"
            tasks = {t.task_index: t.state for t in line.tasks(raw, wire)}
        if tasks.get(int(self.endpoint.rsplit("-", 1)[-1])) in TASK_FINISHED:
            return "its task has finished (it ended itself, or died with no restarts left)"
        return None

    def _client(self) -> Any:
        """The actor's RPC client, or ``None`` while its endpoint is not registered."""
        if self._rpc is None:
            raw = _connection(self._controller)
            with translate_errors(f"resolve actor {self.name}"):
                found = line.endpoint(raw, JobName.from_wire(self._job_wire), self.endpoint)
            if found:
                # After an interruption, new connections: the shared pool may still hold one
                # to the dead process, and a call written to it fails as if the new one died.
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
        retries, delay = self._retries, 0.05
        since: dict[bool, float] = {}  # when first found missing (False) or unreachable (True)
        while True:
            if self.endpoint in _STOPPED:
                raise self._died("its group was shut down")
            err = None
            try:
                if (rpc := self._client()) is not None:
                    response = rpc.call(request)
                    break
            except ConnectError as caught:
                err, self._rpc, self._interrupted = caught, None, True
            # Not registered, unreachable or interrupted: it restarts, or is gone for good.
            gone = self._gone()
            if gone is not None:
                raise self._died(gone) from err
            if err is not None and not never_sent(err):  # the actor may have run the call
                if retries == 0:  # its task lives: it restarts, the call's outcome is lost
                    raise ActorUnavailableError(
                        f"actor {self.name}: {method} was interrupted ({err.code.value}: "
                        f"{err.message}); the actor may have died mid-call, and a call is "
                        "sent again only with ActorConfig(max_task_retries=N)"
                    ) from err
                retries -= 1 if retries > 0 else 0
                since.clear()
                continue  # resolves the actor again: waits for it to restart
            unreachable = err is not None  # restarting, or not yet listening on a loaded machine
            limit = _UNREACHABLE_WAIT_S if unreachable else _RESOLVE_WAIT_S
            if time.monotonic() - since.setdefault(unreachable, time.monotonic()) > limit:
                if unreachable:
                    why = f"could not be reached for {limit}s: {err}"
                    raise ActorError(f"actor {self.name} {why}") from err
                raise self._died(f"its endpoint did not come back within {limit}s")
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        if response.HasField("error"):
            error = response.error
            if error.error_type in line.ACTOR_NOT_FOUND:
                raise ActorError(f"actor {self.name}: {error.message}")
            if error.serialized_exception:
                raise cloudpickle.loads(error.serialized_exception)
            raise ActorError(f"actor {self.name}: {error.error_type}: {error.message}")
        return cloudpickle.loads(response.serialized_value)


def host_actor(
    actor_class: type[Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    group_name: str,
    config: ActorConfig,
    restarts: int,
    results_url: str | None,
    records: str,
) -> None:
    """Builds one actor of a group and serves it on the ``actor`` port until the job is stopped
    or it ends: its end is stored for the group (as ``records``) and the task exits 0 (the
    other actors go on), except after a ``fail(exc)`` with ``restarts`` left: exit 1, and Iris
    runs it again."""
    from iris.actor.server import ActorServer
    from iris.client.client import iris_ctx
    from iris.cluster.client.job_info import get_job_info

    job_wire, index = enter_task(results_url)
    info = get_job_info()
    assert info is not None
    actor_name = f"{group_name}-{index}"
    endpoint = f"{job_wire}/{actor_name}"
    store = ResultStore(results_url) if results_url else None
    record_path = store.task_path(job_wire, index, records) if store else ""
    # Restarts so far: the earlier attempts that ran (Iris also reruns tasks never started).
    ran = info.attempt_id
    if store is not None:
        ran = store.read(runs := store.task_path(job_wire, index, f"{records}-runs")) or 0
        store.write(runs, ran + 1)

    def record(outcome: Outcome) -> None:
        if store is not None:
            store.write(record_path, outcome)

    if 0 <= restarts < ran:  # the attempt after the last restart
        why = f"died with no restarts left (max_restarts={restarts})"
        record(Outcome.failed(ActorDiedError(f"actor {actor_name} {why}")))
        print(f"[fray] actor {actor_name} {why}", flush=True)
        return
    retries = config.max_task_retries or 0
    handle = IrisActorHandle(endpoint, job_wire, info.controller_address, retries)
    stop, gate = threading.Event(), threading.Semaphore(config.max_concurrency)
    exit_code, refusal = 0, ""  # refusal: why calls are refused once it stops serving
    ctx = iris_ctx()
    registry = ctx.registry
    endpoint_ids: list[str] = []  # once it serves

    def on_shutdown() -> None:
        if endpoint_ids:  # else set by the constructor: it ends once it serves
            end_actor()

    context = ActorContext(handle, index, group_name, ShutdownEvent(on_shutdown, actor_name))
    with binding(actor=context):
        built = Outcome.of_call(actor_class, *args, **kwargs)
    if built.kind != "succeeded":
        sys.stderr.write(built.trace or f"{built.error}\n")
        record(built)
        sys.stderr.flush()
        return

    def finish(outcome: Outcome | None, code: int = 0, why: str = "exited") -> None:
        # Takes no more calls; the call that ended it still answers before the exit.
        nonlocal exit_code, refusal
        refusal, exit_code = why, code
        if outcome is not None:
            record(outcome)  # before the endpoint goes: the group reads both
        registry.unregister(endpoint_ids[0])
        threading.Timer(_EXIT_DELAY_S, stop.set).start()

    def end_actor() -> None:
        failure = context.failure
        if failure is None:
            finish(Outcome.succeeded())
        elif restart_allowed(ran, restarts):
            print(f"[fray] actor {actor_name} failed ({failure!r}); restarting", flush=True)
            finish(None, 1, "restarting")
        else:
            why = f"failed: {type(failure).__name__}: {failure}"
            finish(Outcome.failed(ActorDiedError(f"actor {actor_name} {why}")))

    def serve(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if refusal == "restarting":  # until Iris runs the task again
                raise ActorUnavailableError(f"actor {actor_name} is restarting")
            if refusal:
                raise ActorDiedError(f"actor {actor_name} has exited")
            with gate, binding(actor=context):
                outcome = Outcome.of_call(method, *args, **kwargs)
            if outcome.kind == "succeeded":
                return outcome.value
            if isinstance(outcome.cause, SystemExit):
                died = f"actor {actor_name} exited (SystemExit {outcome.cause.code!r})"
                finish(Outcome.failed(ActorDiedError(f"{died} in a method")))
                raise ActorDiedError(f"{died} in this call")
            # The exception as it pickles (its text, where it would not).
            raise cloudpickle.loads(cloudpickle.dumps(outcome)).cause

        return call

    attrs = {n: getattr(built.value, n, None) for n in dir(built.value) if not n.startswith("_")}
    methods = {name: serve(attr) for name, attr in attrs.items() if callable(attr)}
    bind, advertise = serving_hosts(info)
    server = ActorServer(host=bind, port=ctx.get_port("actor"))
    server.register(endpoint, types.SimpleNamespace(**methods))
    port = server.serve_background()
    address = f"http://{advertise}:{port}"
    endpoint_ids.append(registry.register(endpoint, address, metadata={"fray": "actor"}))
    print(f"[fray] actor {actor_name} serving on {advertise}:{port}", flush=True)
    if context.shutdown_event is not None and context.shutdown_event.is_set():
        end_actor()  # set by the constructor, before there was anything to end
    stop.wait()  # serve until the job is stopped or the actor ends
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
