# pyright: standard
"""Handles to Iris actors: calls over Iris's actor RPC, in order per handle.

A handle pickles as its endpoint name (``<group job id>/<group>-<index>``, absolute) and its
job; it resolves lazily, from the current Iris context inside a job or a connection to the
controller outside one, and again after the actor restarts (a new process, a new address).
A call that never reached the actor is sent again while the actor's task lives; one the
actor may have started (its process killed mid-call) only while ``max_task_retries`` allows.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
import weakref
from typing import Any

import cloudpickle
from connectrpc.errors import ConnectError
from iris.client import IrisClient as RawIrisClient
from iris.client.client import get_iris_ctx
from iris.cluster.types import JobName
from iris.rpc import actor_pb2
from iris.rpc.actor_connect import ActorServiceClientSync

from fray.errors import ActorDiedError, ActorError, ActorUnavailableError, JobTimeoutError
from fray_iris._convert import line, never_sent, translate_errors
from fray_iris._views import FINISHED, TASK_FINISHED

_STOPPED: set[str] = set()  # endpoints of groups shut down from this process
_RESOLVE_WAIT_S = 300.0  # how long a handle waits for a restarting actor to come back
_UNREACHABLE_WAIT_S = 60.0  # how long a call retries an actor that does not answer


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


def forget_endpoints(endpoints: list[str]) -> None:
    """Calls through these endpoints' handles raise ``ActorDiedError`` from now on."""
    _STOPPED.update(endpoints)


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
        if self.endpoint in _STOPPED:
            raise self._died("its group was shut down")
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
        self._rpc = ActorServiceClientSync(address=found, timeout_ms=None, accept_compression=[])
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
                self._rpc = None
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
