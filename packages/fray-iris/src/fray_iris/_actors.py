# pyright: standard
"""The driver's side of Iris actor groups: one Iris job whose replicas each serve one actor
(see ``fray_iris._host``) as the endpoint ``<job id>/<group>-<index>``. A handle pickles as
that endpoint name and resolves it lazily, again after the actor restarts; calls through one
handle run in the order they were made.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import cloudpickle
from connectrpc.errors import ConnectError
from iris.client import IrisClient as RawIrisClient
from iris.client.client import get_iris_ctx
from iris.cluster.types import JobName
from iris.rpc import actor_pb2
from iris.rpc.actor_connect import ActorServiceClientSync
from pyqwest import SyncClient, SyncHTTPTransport

from fray import ActorConfig, JobStatus
from fray.backend import ActorMember, BaseActorGroup, CallFuture, Outcome
from fray.errors import ActorDiedError, ActorError, ActorUnavailableError
from fray_iris._convert import line, never_sent, translate_errors
from fray_iris._views import FINISHED, TASK_FINISHED, TaskView

RESOLVE_WAIT_S = 300.0  # how long a call waits for a restarting actor's endpoint to come back
UNREACHABLE_WAIT_S = 60.0  # how long a call retries an actor that does not answer
RETRY_FIRST_S = 0.05  # the first pause between two tries of a call; it doubles each try
RETRY_MAX_S = 1.0
End = tuple[JobStatus, BaseException | None]


class IrisActorGroup(BaseActorGroup):
    """``count`` actors served by one Iris job; see ``fray.ActorGroup``.

    A member is RUNNING while its endpoint is registered and its task runs, PENDING while it
    starts or restarts, and SUCCEEDED or FAILED once it ended (as its task stored). One look
    at the group is two controller calls, whatever its size: its endpoints by prefix, and
    its job's tasks.

    Args:
        client: The :class:`~fray_iris.IrisClient` that submitted the group's job.
        name: The group's name.
        count: How many actors it has.
        job: The handle of the job that hosts the actors.
        config: The group's actor config.
        records: The leaf of its actors' records in the results store.
    """

    polls = True

    def __init__(
        self, client: Any, name: str, count: int, job: Any, config: ActorConfig, records: str
    ) -> None:
        wire = job.iris_job_id
        retries = config.max_task_retries or 0
        members = [
            ActorMember(
                i,
                f"{name}-{i}",
                IrisActorHandle(wire, f"{name}-{i}", client.address, retries, group=self),
            )
            for i in range(count)
        ]
        super().__init__(name, members)
        self.job = job  # the Iris job that hosts the actors
        self._owner = client
        self._wire = wire
        self._records = records

    def wait_ready(self, count: int | None = None, timeout: float | None = 900.0) -> list[Any]:
        """See ``fray.ActorGroup``; 900 s by default, as the predecessor's Iris groups."""
        return super().wait_ready(count, timeout)

    def _stop(self, members: list[ActorMember]) -> None:
        """Stops the group's job; its handles refuse calls from now on."""
        del members  # the job hosts them all
        self.job.terminate()

    def _refresh(self, timeout: float) -> None:
        """Learns each member's state in two controller calls, after a pause of ``timeout``
        (the engine's step between two looks, at most 0.25 s)."""
        time.sleep(timeout)
        live = [m for m in self._members if not m.status.is_finished]
        if self._stopped or not live:
            return
        raw = self._owner.iris
        prefix = f"{self._wire}/{self.name}-"
        with translate_errors(f"actors of {self.name}"):
            names = line.endpoints(raw, prefix)
            tasks = line.tasks(raw, JobName.from_wire(self._wire))
        # An endpoint counts while its task runs: 0.2.227 keeps a dead attempt's one.
        finished = {t.task_index: t for t in tasks if t.state in TASK_FINISHED}
        ready = {int(n[len(prefix) :]) for n in names} - finished.keys()
        ended = None
        # The client's watcher follows the job: its record says whether it ended.
        if self.job._job.is_done and any(m.index not in ready for m in live):
            info = self.job.info()  # not stopped by this group: its actors died
            why = f"{info.status.value}: {info.error}" if info.error else info.status.value
            error = ActorError(f"the job hosting actor group {self.name} ended {why}")
            ended = JobStatus.FAILED, error
        elif tasks and len(finished) == len(tasks):
            ended = JobStatus.PENDING, None  # the job ends with its tasks: its record says how
        for member in live:
            if member.index in ready:
                member.set_status(JobStatus.RUNNING)
            else:
                member.set_status(*self._end(member, finished.get(member.index), ended))

    def _end(self, member: ActorMember, finished: TaskView | None, ended: End | None) -> End:
        """The state of a member not serving: ended as it stored, with its job, or died (its
        task ``finished``, else ``None``); else PENDING (starting or restarting)."""
        store = self._owner.results
        record = None
        # Only an actor that served or whose task ended can have stored its end.
        if store is not None and (finished or ended or member.status is JobStatus.RUNNING):
            record = store.read(store.task_path(self._wire, member.index, self._records))
        if record is not None:  # an Outcome: a succeeded one has no cause
            return (
                JobStatus.FAILED if record.kind == "failed" else JobStatus.SUCCEEDED,
                record.cause,
            )
        if ended is not None:
            return ended
        if finished is None:
            return JobStatus.PENDING, None
        why = f"died with no restarts left: {finished.error or f'exit code {finished.exit_code}'}"
        return JobStatus.FAILED, ActorDiedError(f"actor {member.name} {why}")


class IrisActorFuture(CallFuture):
    """The pending result of an actor call; see ``fray.ActorFuture``. Its ``result``
    re-raises the method's own exception; its timeout is a ``JobTimeoutError``."""


@dataclasses.dataclass(frozen=True, slots=True)
class IrisActorMethod:
    """``handle.method``: call it, or ``.remote()`` it for a future."""

    _handle: IrisActorHandle
    _method: str

    def remote(self, *args: Any, **kwargs: Any) -> IrisActorFuture:
        """Starts the call; calls from one handle run in the order they were made."""
        return self._handle._enqueue(self._method, args, kwargs)

    submit = remote  # a long-running call: on Iris the same (one RPC)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls and waits."""
        if self._handle._pending:  # keep the order of calls made through this handle
            return self.remote(*args, **kwargs).result()
        return self._handle._call(self._method, args, kwargs)


@dataclasses.dataclass
class Patience:
    """How long one call keeps trying an actor that is not there, with a deadline of its
    own for each way of not being there.

    Attributes:
        resends: How many more times a call that may have run may be sent again (-1:
            without limit).
        missing_since: When the actor's endpoint was first found missing (it restarts),
            or ``None``; the call gives up :data:`RESOLVE_WAIT_S` later.
        unreachable_since: When the actor was first found registered but not answering,
            or ``None``; the call gives up :data:`UNREACHABLE_WAIT_S` later.
        pause: The next pause between two tries (doubling to :data:`RETRY_MAX_S`).
    """

    resends: int
    missing_since: float | None = None
    unreachable_since: float | None = None
    pause: float = RETRY_FIRST_S

    def resend(self) -> bool:
        """Spends one resend, if any is left; the actor is waited for afresh."""
        if self.resends == 0:
            return False
        if self.resends > 0:
            self.resends -= 1
        self.missing_since = self.unreachable_since = None
        return True

    def wait(self, name: str, err: ConnectError | None) -> None:
        """Pauses before the next try (a backoff, not a wait for an event), or raises once
        the actor has been missing (no ``err``: its endpoint is not registered) or
        unreachable (``err``) for longer than that deadline allows."""
        now = time.monotonic()
        if err is None:
            self.missing_since = self.missing_since or now
            if now - self.missing_since > RESOLVE_WAIT_S:
                raise ActorDiedError(
                    f"actor {name} is gone: its endpoint did not come back within {RESOLVE_WAIT_S}s"
                )
        else:
            self.unreachable_since = self.unreachable_since or now
            if now - self.unreachable_since > UNREACHABLE_WAIT_S:
                # Restarting, or not yet listening on a loaded machine, for too long.
                raise ActorError(
                    f"actor {name} could not be reached for {UNREACHABLE_WAIT_S}s: {err}"
                ) from err
        time.sleep(self.pause)
        self.pause = min(self.pause * 2, RETRY_MAX_S)


class IrisActorHandle:
    """Handle to one actor of an Iris actor group.

    A call that never reached the actor is sent again while the actor's task lives; one that
    may have run is sent again ``retries`` times (-1: without limit), after the actor
    restarted. It pickles as its endpoint name, without its group.

    Args:
        job_wire: The wire id of the job that hosts it.
        name: The actor's name, ``<group>-<index>``; it registers as the Iris endpoint
            ``<job_wire>/<name>``.
        controller: The controller's address, for a handle used outside any Iris job.
        retries: How many times a call that may have run is sent again.
        group: The group that made it, in the process that made it: its calls go through
            the group's client and stop when the group is shut down.
    """

    def __init__(
        self,
        job_wire: str,
        name: str,
        controller: str | None,
        retries: int = 0,
        *,
        group: IrisActorGroup | None = None,
    ) -> None:
        self.name = name
        self.endpoint = f"{job_wire}/{name}"
        self._job_wire = job_wire
        self._controller = controller
        self._retries = retries
        self._group = group
        self._raw: Any = None  # an Iris client of its own, outside a job and a group
        self._rpc: Any = None
        self._at: str | None = None  # the id Iris gave the registration _rpc calls
        self._lost: str | None = None  # that of one a call was interrupted in (see _send)
        # After an interrupted call, a connection pool of its own (see _client).
        self._http: SyncClient | None = None
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._pending = 0

    def __getattr__(self, method: str) -> IrisActorMethod:
        if method.startswith("_"):
            raise AttributeError(method)
        return IrisActorMethod(self, method)

    def __reduce__(self) -> tuple[Any, ...]:
        return IrisActorHandle, (self._job_wire, self.name, self._controller, self._retries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IrisActorHandle) and other.endpoint == self.endpoint

    def __hash__(self) -> int:
        return hash(self.endpoint)

    def __repr__(self) -> str:
        return f"IrisActorHandle({self.name!r})"

    def _enqueue(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Queues a call on this handle's own thread (calls run in the order made)."""
        future = IrisActorFuture()
        with self._lock:
            if self._executor is None:  # at the first queued call: a group may have thousands
                prefix = f"fray-iris-{self.name}"
                # Its thread ends once the handle is collected (the executor with it).
                self._executor = ThreadPoolExecutor(1, thread_name_prefix=prefix)
            self._pending += 1
            self._executor.submit(self._run_queued, future, method, args, kwargs)
        return future

    def _run_queued(self, future: IrisActorFuture, method: str, *call: Any) -> None:
        """Runs a queued call and settles its future."""
        outcome = Outcome.of_call(self._call, method, *call)
        with self._lock:
            self._pending -= 1  # first: a blocking call made once this one is done goes direct
        if outcome.kind == "succeeded":
            future.set_result(outcome.value)
        else:
            future.set_exception(outcome.cause)

    def _connection(self) -> Any:
        """The Iris client to ask: the group's, the current job's, else one of its own."""
        if self._group is not None:  # the client that made the group
            return self._group._owner.iris
        client = getattr(get_iris_ctx(), "client", None)  # the current job's
        if client is not None:
            return client
        if not self._controller:
            raise ActorError("this actor handle cannot be resolved: no Iris context or controller")
        with self._lock:
            if self._raw is None:
                self._raw = RawIrisClient.remote(self._controller)
            return self._raw

    def _gone(self) -> str | None:
        """Why the actor is gone for good (its job or its task finished), or ``None``."""
        raw = self._connection()
        wire = JobName.from_wire(self._job_wire)
        with translate_errors(f"state of actor {self.name}"):
            state = line.states(raw, [wire]).get(self._job_wire)
            if state is None or state in FINISHED:
                return "its job has finished"
            tasks = {t.task_index: t.state for t in line.tasks(raw, wire)}
        if tasks.get(int(self.name.rsplit("-", 1)[-1])) in TASK_FINISHED:
            return "its task has finished (it ended itself, or died with no restarts left)"
        return None

    def _send(self, request: Any) -> tuple[Any, ConnectError | None]:
        """One try, through the actor's RPC client (resolved again after a failed try): the
        response, or ``None`` and why (``None``: its endpoint is not registered, or only in
        a process that does not answer).

        A process killed mid-call may still take a connection for a moment, and reset it: a
        call sent there would fail as if interrupted again. So the registration a call was
        interrupted in comes last, and is called only once its server answers a health check
        (which runs nothing of the actor's); the actor's next attempt registers anew."""
        if self._group is not None and self._group._stopped:  # shut down: refused at once
            raise ActorDiedError(f"actor {self.name} is gone: its group was shut down")
        try:
            if self._rpc is None:
                raw = self._connection()
                with translate_errors(f"resolve actor {self.name}"):
                    found = line.endpoint(raw, JobName.from_wire(self._job_wire), self.endpoint)
                if not found:
                    return None, None
                first = min(found, key=lambda e: e.actor_id == self._lost)
                rpc = ActorServiceClientSync(
                    address=first.url,
                    timeout_ms=None,
                    accept_compression=[],
                    http_client=self._http,
                )
                if first.actor_id == self._lost:
                    try:
                        rpc.health_check(actor_pb2.Empty())
                    except ConnectError:  # that process is dying
                        return None, None
                self._rpc, self._at = rpc, first.actor_id
            return self._rpc.call(request), None
        except ConnectError as err:
            self._rpc = None
            # New connections from now on: the shared pool may still hold one to the dead
            # process, and a call written to it fails as if the new one died.
            self._http = SyncClient(SyncHTTPTransport())
            return None, err

    def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Calls ``method`` on the actor, trying again as :class:`Patience` allows."""
        request = actor_pb2.ActorCall(
            method_name=method,
            actor_name=self.endpoint,
            serialized_args=cloudpickle.dumps(args),
            serialized_kwargs=cloudpickle.dumps(kwargs),
        )
        patience = Patience(self._retries)
        while True:
            response, err = self._send(request)
            if response is not None:
                return self._answer(response)
            # Not registered, unreachable or interrupted: it restarts, or is gone for good.
            gone = self._gone()
            if gone is not None:
                raise ActorDiedError(f"actor {self.name} is gone: {gone}") from err
            if err is None or never_sent(err):
                patience.wait(self.name, err)
                continue
            # The actor may have run the call; its task lives: it restarts, the outcome is
            # lost. Sent again, it resolves the actor again: waits for it to restart.
            self._lost = self._at
            if not patience.resend():
                raise ActorUnavailableError(
                    f"actor {self.name}: {method} was interrupted ({err.code.value}: "
                    f"{err.message}); the actor may have died mid-call, and a call is "
                    "sent again only with ActorConfig(max_task_retries=N)"
                ) from err

    def _answer(self, response: Any) -> Any:
        """The call's value, or its error raised (the method's own exception where it pickled)."""
        if not response.HasField("error"):
            return cloudpickle.loads(response.serialized_value)
        error = response.error
        if error.serialized_exception:
            raise cloudpickle.loads(error.serialized_exception)
        raise ActorError(f"actor {self.name}: {error.error_type}: {error.message}")
