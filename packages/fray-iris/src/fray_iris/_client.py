# pyright: standard
"""IrisClient: Fray jobs and actors on an Iris cluster, through the marin-iris client."""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import os
import shlex
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import urlparse

from iris.client import IrisClient as RawIrisClient
from iris.client import get_iris_ctx
from iris.cluster.client import resolve_job_user
from iris.cluster.types import Entrypoint as IrisEntrypoint
from iris.cluster.types import JobName, is_job_finished
from iris.rpc import controller_pb2, job_pb2

from fray import (
    ActorConfig,
    ClientSpec,
    JobInfo,
    JobRequest,
    JobStatus,
    ResourceConfig,
    TpuConfig,
)
from fray.backend import JobHistory, forget_default_client
from fray.backend import validate_actor_args as _validate_actor_args
from fray.environment_variables import FRAY_CLIENT_SPEC
from fray.errors import (
    FrayError,
    InvalidRequestError,
    JobAlreadyExistsError,
    JobFailedError,
    JobNotFoundError,
    JobTimeoutError,
)
from fray_iris._convert import job_status, to_iris_request, translate_errors
from fray_iris._results import ResultStore, default_local_results_url
from fray_iris._task import fray_job_id, run_callable
from fray_iris.environment_variables import FRAY_IRIS_RESULTS_URL

__all__ = ["IrisClient", "IrisJobHandle"]

T = TypeVar("T")
logger = logging.getLogger("fray.iris")

_POLL_FIRST_S = 0.05
_POLL_MAX_S = 1.0
_TERMINATE_WAIT_S = 120.0


def _backoff() -> Iterator[float]:
    delay = _POLL_FIRST_S
    while True:
        yield delay
        delay = min(delay * 1.5, _POLL_MAX_S)


def _seconds(ts: Any) -> float | None:
    ms = getattr(ts, "epoch_ms", 0)
    return ms / 1000.0 if ms else None


def _normalize_address(address: str) -> str:
    if "://" not in address:
        return f"http://{address}"
    return address


def _tpu_shape(resources: ResourceConfig) -> tuple[str, int] | None:
    device = resources.device
    if isinstance(device, TpuConfig):
        return device.variant, device.vm_count()
    return None


def ship_code_by_value(obj: Any) -> None:
    """Pickles the module defining ``obj`` by value when tasks could not import it: the same
    rule raw Iris applies to the callable it is given (``__main__``, modules outside a
    package, and test folders), so Fray runs the same code raw Iris would."""
    import sys

    import cloudpickle

    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    if module is None or module.__name__ in ("builtins",):
        return
    file = getattr(module, "__file__", None)
    path = Path(file).parts if file else ()
    if module.__package__ is None or module.__spec__ is None or "tests" in path:
        cloudpickle.register_pickle_by_value(module)


def _is_loopback(address: str | None) -> bool:
    host = urlparse(address or "").hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


class _Session:
    """The Iris connection a client and its handles share.

    Handles outlive ``IrisClient.shutdown()`` (a stopped job can still be waited on): once
    the client's own connection is closed, a fresh one is opened on first use and closed
    when the session is collected.
    """

    def __init__(
        self,
        raw: RawIrisClient,
        *,
        owned: bool,
        address: str | None,
        reopen: Callable[[], RawIrisClient] | None,
        user: str,
        results: ResultStore | None,
    ) -> None:
        self._raw = raw
        self._owned = owned
        self._closed = False
        self._reopen = reopen
        self._lock = threading.Lock()
        self.address = address
        self.user = user
        self.results = results
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def take_ownership(self, reopen: Callable[[], RawIrisClient]) -> None:
        """This session opened its client itself (``reopen`` opens another): it closes it."""
        self._owned = True
        self._reopen = reopen

    @property
    def raw(self) -> RawIrisClient:
        """The live marin-iris client."""
        if not self._closed:
            return self._raw
        with self._lock:
            if self._closed and self._reopen is not None:
                self._raw = self._reopen()
                self._closed = False
                self._finalizer = weakref.finalize(self, _close_quietly, self._raw)
        return self._raw

    def close(self) -> None:
        with self._lock:
            if self._closed or not self._owned:
                self._closed = True
                return
            self._closed = True
            _close_quietly(self._raw)

    def wire(self, fray_id: str) -> JobName:
        """The Iris id of a Fray job id (Iris ids start with ``/<user>/``)."""
        if fray_id.startswith("/"):
            return JobName.from_wire(fray_id)
        return JobName.from_wire(f"/{self.user}/{fray_id}")

    def what(self, action: str) -> Any:
        return translate_errors(action, address=self.address)


def _close_quietly(raw: RawIrisClient) -> None:
    with contextlib.suppress(Exception):  # closing is best effort
        raw.shutdown()


# ---------------------------------------------------------------------------------------------
# Jobs


class IrisJobHandle:
    """Handle to an Iris job; see ``fray.JobHandle``."""

    def __init__(self, session: _Session, wire: JobName, *, replicas: int | None = None) -> None:
        self._session = session
        self._wire = wire
        self._final: job_pb2.JobStatus | None = None
        self._final_tasks: list[job_pb2.TaskStatus] | None = None
        self._value: tuple[Any] | None = None
        self._replicas = replicas

    @property
    def job_id(self) -> str:
        """Fray's id: the Iris id without ``/<user>/`` (children are ``parent/child``)."""
        return fray_job_id(self._wire.to_wire())

    @property
    def iris_job_id(self) -> str:
        """The Iris job id (wire form, ``/<user>/<name>...``)."""
        return self._wire.to_wire()

    # -- status ------------------------------------------------------------------------------

    def _state(self) -> int:
        if self._final is not None:
            return self._final.state
        with translate_errors(f"status of {self.job_id}", job_id=self.job_id):
            states = self._session.raw._cluster_client.get_job_states([self._wire])
        state = states.get(self._wire.to_wire())
        if state is None:
            raise JobNotFoundError(self.job_id)
        return state

    def _status_proto(self) -> job_pb2.JobStatus:
        if self._final is not None:
            return self._final
        with translate_errors(f"status of {self.job_id}", job_id=self.job_id):
            proto = self._session.raw.status(self._wire)
        if is_job_finished(proto.state):
            self._final = proto
        return proto

    def _tasks(self) -> list[job_pb2.TaskStatus]:
        if self._final_tasks is not None:
            return self._final_tasks
        finished = self._final is not None
        with translate_errors(f"tasks of {self.job_id}", job_id=self.job_id):
            tasks = self._session.raw.list_tasks(self._wire)
        if finished:
            self._final_tasks = tasks
        return tasks

    def status(self) -> JobStatus:
        """The job's current status."""
        return job_status(self._state())

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished; see ``fray.JobHandle.wait``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delays = _backoff()
        while not is_job_finished(self._state()):
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise JobTimeoutError(
                    f"job {self.job_id} is still {self.status().value} after {timeout}s"
                )
            delay = next(delays)
            time.sleep(delay if remaining is None else min(delay, remaining))
        proto = self._status_proto()
        status = job_status(proto.state)
        if status is JobStatus.FAILED and raise_on_failure:
            cause, text = self._failure()
            raise JobFailedError(self.job_id, status, text) from cause
        return status

    def _records(self) -> list[Any | None]:
        store = self._session.results
        count = self._replica_count()
        if store is None:
            return [None] * count
        wire = self._wire.to_wire()
        return [store.read(store.task_path(wire, i)) for i in range(count)]

    def _replica_count(self) -> int:
        if self._replicas is None:
            self._replicas = max(len(self._tasks()), 1)
        return self._replicas

    def _failure(self) -> tuple[BaseException | None, str]:
        """The user's exception (if a task stored one) and the text to report."""
        proto = self._status_proto()
        for record in self._records():
            if record is not None and record[0] == "error":
                exc = record[1]
                return exc, f"{type(exc).__name__}: {exc}"
        return None, proto.error or f"Iris ended the job in {job_pb2.JobState.Name(proto.state)}"

    def result(self, timeout: float | None = None) -> Any:
        """The callable's return value; see ``fray.JobHandle.result``."""
        if self._value is not None:
            return self._value[0]
        status = self.wait(timeout)
        if status is not JobStatus.SUCCEEDED:
            raise JobFailedError(self.job_id, status, self._status_proto().error or "stopped")
        if self._session.results is None:
            raise JobFailedError(
                self.job_id,
                status,
                f"no results location is configured: set {FRAY_IRIS_RESULTS_URL} (or "
                "IrisClient(results_url=...)) to a URL every task can reach",
            )
        records = self._records()
        values: list[Any] = []
        for record in records:
            if record is None or record[0] != "ok":
                raise JobFailedError(
                    self.job_id,
                    status,
                    "the job stored no return value (a command job has none; read its logs())",
                )
            values.append(record[1])
        value = values[0] if len(values) == 1 else values
        self._value = (value,)
        return value

    def terminate(self) -> None:
        """Stops the job and its children; returns once Iris reports them finished."""
        if is_job_finished(self._state()):
            return
        raw = self._session.raw
        with translate_errors(f"terminate {self.job_id}", job_id=self.job_id):
            raw.terminate(self._wire)
        _wait_finished(self._session, [self._wire], include_descendants=True)

    # -- logs --------------------------------------------------------------------------------

    def _fetch(self, include_children: bool) -> list[tuple[tuple[str, int, str], str]]:
        raw = self._session.raw
        with translate_errors(f"logs of {self.job_id}", job_id=self.job_id):
            entries = raw.fetch_task_logs(self._wire)
        own = self._wire.to_wire()
        out: list[tuple[tuple[str, int, str], str]] = []
        for entry in entries:
            task = entry.task_id
            job = task.parent.to_wire() if task.parent is not None else task.to_wire()
            key = (entry.key, entry.timestamp.epoch_ms(), entry.data)
            if job == own:
                out.append((key, entry.data))
            elif include_children:
                out.append((key, f"[{fray_job_id(job)}] {entry.data}"))
        return out

    def logs(self, *, follow: bool = False, include_children: bool = False) -> Iterator[str]:
        """The job's output lines; see ``fray.JobHandle.logs``."""
        if not follow:
            yield from [line for _key, line in self._fetch(include_children)]
            return
        seen: collections.Counter[tuple[str, int, str]] = collections.Counter()
        delays = _backoff()
        while True:
            finished = is_job_finished(self._state())
            if finished and include_children:
                finished = _all_finished(self._session, self._wire)
            fresh: collections.Counter[tuple[str, int, str]] = collections.Counter()
            for key, line in self._fetch(include_children):
                fresh[key] += 1
                if fresh[key] > seen[key]:
                    seen[key] += 1
                    yield line
            if finished:
                return
            time.sleep(next(delays))

    # -- bookkeeping -------------------------------------------------------------------------

    def info(self) -> JobInfo:
        """Attempts, preemptions, failures, Iris's error text, parent and children."""
        proto = self._status_proto()
        tasks = self._tasks()
        with translate_errors(f"children of {self.job_id}", job_id=self.job_id):
            children = _children(self._session, self._wire)
        return _job_info(proto, tuple(fray_job_id(c) for c in children), tasks)

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Calls ``callback(handle)`` from a helper thread once the job is finished."""

        def watch() -> None:
            with contextlib.suppress(FrayError):
                self.wait(raise_on_failure=False)
            callback(self)

        threading.Thread(target=watch, name=f"fray-iris-watch-{self.job_id}", daemon=True).start()

    def __repr__(self) -> str:
        return f"IrisJobHandle({self.job_id!r})"


def _attempts(tasks: list[job_pb2.TaskStatus]) -> int:
    best = 0
    for task in tasks:
        started = task.state not in (job_pb2.TASK_STATE_PENDING, job_pb2.TASK_STATE_UNSPECIFIED)
        count = max(len(task.attempts), task.current_attempt_id + 1 if started else 0)
        best = max(best, count)
    return best


def _exit_code(proto: job_pb2.JobStatus, tasks: list[job_pb2.TaskStatus]) -> int | None:
    if not is_job_finished(proto.state):
        return None
    for task in tasks:
        if task.exit_code:
            return task.exit_code
    return proto.exit_code


def _job_info(
    proto: job_pb2.JobStatus,
    children: tuple[str, ...],
    tasks: list[job_pb2.TaskStatus] | None = None,
) -> JobInfo:
    """Fray's JobInfo; without ``tasks`` (list_jobs), attempts are counted from the job's
    failure and preemption counts."""
    if tasks is None:
        started = proto.started_at.epoch_ms > 0
        attempts = proto.failure_count + proto.preemption_count
        if started and job_status(proto.state) is not JobStatus.FAILED:
            attempts += 1
        attempts = max(attempts, 1 if started else 0)
        exit_code = proto.exit_code if is_job_finished(proto.state) else None
        replicas = max(proto.task_count, 1)
    else:
        attempts = _attempts(tasks)
        exit_code = _exit_code(proto, tasks)
        replicas = max(len(tasks), 1)
    wire = proto.job_id
    name = wire.rstrip("/").rsplit("/", 1)[-1]
    return JobInfo(
        job_id=fray_job_id(wire),
        name=name,
        status=job_status(proto.state),
        attempts=attempts,
        preemptions=proto.preemption_count,
        failures=proto.failure_count,
        error=proto.error or None,
        exit_code=exit_code,
        parent=fray_job_id(proto.parent_job_id) if proto.parent_job_id else None,
        children=children,
        replicas=replicas,
        submitted_at=_seconds(proto.submitted_at),
        started_at=_seconds(proto.started_at),
        finished_at=_seconds(proto.finished_at),
    )


def _children(session: _Session, wire: JobName) -> list[str]:
    query = controller_pb2.Controller.JobQuery(
        scope=controller_pb2.Controller.JOB_QUERY_SCOPE_CHILDREN,
        parent_job_id=wire.to_wire(),
    )
    statuses = session.raw._cluster_client.list_jobs(query=query)
    ordered = sorted(statuses, key=lambda s: s.submitted_at.epoch_ms)
    return [s.job_id for s in ordered]


def _descendants(session: _Session, wire: JobName) -> list[job_pb2.JobStatus]:
    return list(session.raw.list_jobs(prefix=wire.to_wire() + "/"))


def _all_finished(session: _Session, wire: JobName) -> bool:
    return all(is_job_finished(s.state) for s in _descendants(session, wire))


def _wait_finished(session: _Session, wires: list[JobName], *, include_descendants: bool) -> None:
    """Polls until every job (and, if asked, every descendant) is finished."""
    raw = session.raw
    deadline = time.monotonic() + _TERMINATE_WAIT_S
    delays = _backoff()
    pending = list(wires)
    while pending:
        with translate_errors("waiting for jobs to stop"):
            states = raw._cluster_client.get_job_states(pending)
        pending = [w for w in pending if not is_job_finished(states.get(w.to_wire(), 0) or 0)]
        pending = [w for w in pending if w.to_wire() in states]
        if not pending:
            break
        if time.monotonic() > deadline:
            raise FrayError(f"Iris jobs {[str(w) for w in pending]} did not stop in time")
        time.sleep(next(delays))
    if not include_descendants:
        return
    for wire in wires:
        while True:
            with translate_errors("waiting for child jobs to stop"):
                left = [s for s in _descendants(session, wire) if not is_job_finished(s.state)]
            if not left:
                break
            if time.monotonic() > deadline:
                raise FrayError(f"child jobs {[s.job_id for s in left]} did not stop in time")
            for status in left:  # Iris stops children itself; make sure of it
                with translate_errors("stopping a child job"):
                    raw.terminate(JobName.from_wire(status.job_id))
            time.sleep(next(delays))


# ---------------------------------------------------------------------------------------------
# The client


class IrisClient:
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
    """

    scheme = "iris"

    def __init__(
        self,
        address: str | None = None,
        *,
        workspace: str | Path | None = None,
        results_url: str | None = None,
        iris_client: RawIrisClient | None = None,
    ) -> None:
        import os

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
            controller = _normalize_address(address.strip())
            if ctx is not None and ctx.client is not None and ws is None:
                # Inside a job: the job's own client keeps the job tree and namespace.
                raw, owned = ctx.client, False
            else:
                reopen = functools.partial(RawIrisClient.remote, controller, workspace=ws)
                raw, owned = reopen(), True
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
        if url is None and _is_loopback(controller):
            url = default_local_results_url()
        self._session = _Session(
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
        self._groups: list[Any] = []
        self._lock = threading.Lock()
        self.is_shutdown = False

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
        return f"IrisClient({self._session.address!r}, jobs={len(self._jobs)})"

    def _check_open(self) -> None:
        if self.is_shutdown:
            raise FrayError("this IrisClient has been shut down; create a new one")

    # -- jobs --------------------------------------------------------------------------------

    def submit(self, request: JobRequest, *, adopt_existing: bool = True) -> IrisJobHandle:
        """Starts a job on Iris.

        Iris job names are unique while a job runs: with ``adopt_existing`` a running job of
        the same name is returned; otherwise :class:`JobAlreadyExistsError` carries its
        handle. A finished job of the same name is replaced.
        """
        if not isinstance(request, JobRequest):
            raise InvalidRequestError.for_field(
                "submit.request", request, "must be a fray.JobRequest"
            )
        self._check_open()
        entry = request.entrypoint
        store = self._session.results
        converted = to_iris_request(request)
        if entry.callable is not None:
            ship_code_by_value(entry.callable)
            iris_entry = IrisEntrypoint.from_callable(
                run_callable,
                entry.callable,
                tuple(entry.args),
                dict(entry.kwargs),
                store.url if store is not None else None,
                _tpu_shape(request.resources),
            )
        else:
            assert entry.command is not None
            iris_entry = IrisEntrypoint.from_command(*_protect_host_paths(entry.command))
        policy = (
            job_pb2.EXISTING_JOB_POLICY_KEEP
            if adopt_existing
            else job_pb2.EXISTING_JOB_POLICY_UNSPECIFIED
        )
        return self._launch(request.name, iris_entry, converted.kwargs(), policy)

    def _launch(
        self,
        name: str,
        entry: IrisEntrypoint,
        kwargs: dict[str, Any],
        policy: Any,
        ports: list[str] | None = None,
    ) -> IrisJobHandle:
        raw = self._session.raw
        try:
            with translate_errors(f"submit {name}", job_id=name, address=self._session.address):
                job = raw.submit(entry, name, ports=ports, existing_job_policy=policy, **kwargs)
        except JobAlreadyExistsError as err:
            existing = self._existing(name)
            raise JobAlreadyExistsError(name, existing) from err
        handle = IrisJobHandle(self._session, job.job_id, replicas=kwargs.get("replicas"))
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
            unknown = [h._wire for h in handles if h._final is None]
            with translate_errors("status of this client's jobs"):
                raw = self._session.raw
                states = raw._cluster_client.get_job_states(unknown) if unknown else {}
        except FrayError as exc:  # looked at again at the next sweep
            logger.debug("sweeping finished jobs failed: %s", exc)
        finally:
            with self._lock:
                for handle in handles:
                    state = None if states is None else states.get(handle.iris_job_id)
                    if handle._final is not None or (state is not None and is_job_finished(state)):
                        self._jobs.finished(handle.job_id)
                self._sweep_at = max(2 * len(self._jobs.running), self.SWEEP_FROM)

    def _existing(self, name: str) -> IrisJobHandle | None:
        ctx = get_iris_ctx()
        if ctx is not None and ctx.job_id is not None:
            wire = ctx.job_id.child(name)
        else:
            wire = JobName.root(self._session.user, name)
        return IrisJobHandle(self._session, wire)

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
        handle = IrisJobHandle(self._session, wire)
        handle._state()  # raises JobNotFoundError for an unknown id
        return handle

    def list_jobs(self) -> list[JobInfo]:
        """Every job of this client's user on the cluster, oldest first."""
        with self._session.what("list jobs"):
            statuses = self._session.raw.list_jobs(prefix=f"/{self._session.user}/")
        statuses.sort(key=lambda s: (s.submitted_at.epoch_ms, s.job_id))
        children: dict[str, list[str]] = collections.defaultdict(list)
        for status in statuses:
            if status.parent_job_id:
                children[status.parent_job_id].append(fray_job_id(status.job_id))
        return [_job_info(s, tuple(children.get(s.job_id, ()))) for s in statuses]

    # -- actors ------------------------------------------------------------------------------

    def create_actor(
        self,
        actor_class: type[T],
        *args: Any,
        name: str,
        resources: ResourceConfig | None = None,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        """Creates one actor (an Iris job) and returns its handle once it serves.

        Raises:
            ActorError: Its constructor raised (chained as ``__cause__``) or its job died.
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
    ) -> Any:
        """Creates ``count`` actors named ``{name}-{i}`` as one Iris job with ``count``
        replicas, each serving its actor on the ``actor`` port; returns without waiting."""
        from fray_iris._actors import IrisActorGroup, actor_job

        self._check_open()
        _validate_actor_args(actor_class, name, count, resources, actor_config)
        config = actor_config or ActorConfig()
        ship_code_by_value(actor_class)
        store = self._session.results
        entry, kwargs_ = actor_job(
            actor_class,
            args,
            kwargs,
            name=name,
            count=count,
            resources=resources or ResourceConfig(),
            config=config,
            results_url=store.url if store is not None else None,
        )
        try:
            job = self._launch(
                name, entry, kwargs_, job_pb2.EXISTING_JOB_POLICY_UNSPECIFIED, ports=["actor"]
            )
        except JobAlreadyExistsError as err:
            raise InvalidRequestError.for_field(
                "name", name, "an actor group or job of that name is already running"
            ) from err
        group = IrisActorGroup(self._session, name, count, job)
        with self._lock:
            self._groups.append(group)
        return group

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
        for group in groups:
            group._mark_stopped()
        wires = [h._wire for h in handles if h._final is None]
        if wires:
            raw = self._session.raw
            try:
                with translate_errors("shutdown"):
                    states = raw._cluster_client.get_job_states(wires)
                live = [w for w in wires if not is_job_finished(states.get(w.to_wire(), 0) or 0)]
                live = [w for w in live if w.to_wire() in states]
                for wire in live:
                    with translate_errors("shutdown"):
                        raw.terminate(wire)
                if live:
                    _wait_finished(self._session, live, include_descendants=True)
            except FrayError:
                self._session.close()
                forget_default_client(self)
                raise
        self._session.close()
        forget_default_client(self)


def _protect_host_paths(argv: tuple[str, ...] | list[str]) -> list[str]:
    """A local Iris worker rewrites every argument that starts with a container mount path
    (``/tmp`` becomes the task's private temp dir). An interpreter or script that really
    lives under ``/tmp`` on this machine (a checkout or venv there) would then vanish, so
    such a command runs through ``/bin/sh -c "exec ..."``, whose one argument starts with
    ``exec`` and is left alone. Commands that only name ``/tmp`` paths that do not exist
    here keep Iris's remapping."""
    argv = list(argv)
    if any(arg.startswith("/tmp/") and os.path.exists(arg) for arg in argv):
        return ["/bin/sh", "-c", "exec " + shlex.join(argv)]
    return argv
