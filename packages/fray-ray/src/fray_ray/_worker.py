"""What runs inside a Ray worker for a callable job: the wrapper around the user's function.

The wrapper captures the job's output (returned with the result, so the last line is never
lost, and streamed to the registry every half second while the job runs), sets the job's
identity (``FRAY_JOB_ID``, ``FRAY_TASK_INDEX``, ``FRAY_NUM_TASKS`` and a client bound to the
job, so jobs submitted from here become its children), and turns the user's exception into
a value, so a user failure can never be mistaken for a Ray failure.

It runs once per job, so it is kept lean: a job that prints nothing and succeeds returns
its value as it is (what Ray carries cheapest), and its output buffer is only registered for
streaming once it holds a line.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import contextlib
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, NamedTuple

from fray.backend import (
    bind_client,
    job_id_part,
    portable_error,
    restore_output,
    route_output,
    unbind_client,
)
from fray.environment_variables import FRAY_JOB_ID, FRAY_NUM_TASKS, FRAY_TASK_INDEX
from fray_ray._environ import job_env
from fray_ray._registry import REGISTRY_NAMESPACE

__all__ = ["ClientFor", "Outcome", "bound", "job_token", "outcome_of", "runner"]

# What the wrapper binds as ``fray.current_client()`` inside a job: the client for a
# (namespace, registry name), one per worker process (``fray_ray._client.job_client``, handed
# in by the client, so that this module needs nothing above it).
ClientFor = Callable[[str, str], Any]


class Outcome(NamedTuple):
    """How a replica ended. A replica that succeeded without printing returns its bare
    value instead (see :func:`outcome_of`)."""

    kind: str  # "ok", "error" (the user's exception) or "ray-error" (Ray could not run it)
    value: Any  # the return value or the exception
    lines: tuple[str, ...] | list[str] = ()
    traceback: str = ""


def outcome_of(result: Any) -> Outcome:
    """What a replica's task returned, as an :class:`Outcome`."""
    return result if type(result) is Outcome else Outcome("ok", result)


_FLUSH_INTERVAL = 0.5


class _Output:
    """A replica's output lines. Written only by the thread running the job (``print`` is
    routed per thread), read by the flusher; registered with the flusher on the first
    complete line."""

    __slots__ = ("job_id", "lines", "namespace", "partial", "registered", "registry", "sent")

    def __init__(self, job_id: str, namespace: str, registry: str) -> None:
        self.lines: list[str] = []
        self.partial = ""
        self.sent = 0  # lines the flusher has streamed
        self.registered = False
        self.job_id = job_id
        self.namespace = namespace
        self.registry = registry

    def write(self, text: str) -> None:
        if not text:
            return
        text = self.partial + text
        *complete, self.partial = text.split("\n")
        if complete:
            self.lines.extend(complete)
            if not self.registered:
                self.registered = True
                _stream(self)

    def close(self) -> None:
        if self.partial:
            self.lines.append(self.partial)
            self.partial = ""
        if self.registered:
            with _active_lock:
                _active.pop(self.job_id, None)


_active: dict[str, _Output] = {}
_active_lock = threading.Lock()
_flusher: threading.Thread | None = None


def _stream(output: _Output) -> None:
    global _flusher
    with _active_lock:
        _active[output.job_id] = output
        if _flusher is None or not _flusher.is_alive():
            _flusher = threading.Thread(target=_flush_loop, name="fray-log-flush", daemon=True)
            _flusher.start()


def _flush_loop() -> None:
    import ray

    registries: dict[tuple[str, str], Any] = {}
    while True:
        time.sleep(_FLUSH_INTERVAL)  # the streaming cadence, not synchronisation
        with _active_lock:
            pending = list(_active.values())
        for output in pending:
            lines = output.lines[output.sent :]
            if not lines:
                continue
            key = (output.namespace, output.registry)
            try:
                if key not in registries:
                    registries[key] = ray.get_actor(output.registry, namespace=REGISTRY_NAMESPACE)
                registries[key].append_logs.remote(output.job_id, lines)
                output.sent += len(lines)
            except Exception:  # the driver went away: nothing to stream to
                registries.pop(key, None)


def _report_placed(registry: str, key: str, index: int) -> None:
    """Tells the driver's registry that replica ``index`` of attempt ``key`` started (not
    waited for: the replica's own work goes on at once)."""
    import ray

    with contextlib.suppress(Exception):  # the driver went away: nobody waits to know
        ray.get_actor(registry, namespace=REGISTRY_NAMESPACE).placed.remote(key, index)


def job_token(task_id: bytes, salt: int) -> str:
    """The random part of a job id taken from the Ray task that runs its first attempt:
    the task id's leading (hashed, unique) bytes mixed with a per-function salt, so ids do
    not repeat across Ray sessions. Driver and worker compute the same token (the driver
    from the task's object id, which starts with the task id)."""
    return f"{int.from_bytes(task_id[:4], 'big') ^ salt:08x}"


def _task_id_reader() -> Callable[[], Any]:
    """What gives the running Ray task's id (an object with ``binary()``) in this worker:
    Ray's core worker, four times cheaper than the public runtime context, which builds an
    object per call (used where present)."""
    worker = getattr(sys.modules.get("ray._private.worker"), "global_worker", None)
    current = getattr(getattr(worker, "core_worker", None), "get_current_task_id", None)
    if current is not None:
        return current
    import ray

    return lambda: ray.TaskID.from_hex(ray.get_runtime_context().get_task_id() or "")


def bound(
    client_for: ClientFor,
    pickled: bytes,
    name: str,
    parent: str | None,
    context: tuple[str, str, bool, tuple[tuple[str, str], ...]],
    salt: int,
) -> Any:
    """A job function that needs no task arguments: the entrypoint and the job's context
    are part of the function, and the job id comes from the Ray task id. Ray charges for
    every task argument; a request submitted again and again is exported once this way.

    Like a Ray remote function, the entrypoint's callable is loaded once per worker
    process; its arguments, if any, are loaded afresh for every run."""
    namespace, registry, echo, env = context
    part = job_id_part(name)
    prefix = f"{parent}/{part}-" if parent else f"{part}-"
    loaded: list[tuple[Any, tuple[Any, ...], dict[str, Any], Callable[[], Any]]] = []

    def run() -> Any:
        if not loaded:
            import cloudpickle

            loaded.append((*cloudpickle.loads(pickled), _task_id_reader()))
        fn, args, kwargs, task_id = loaded[0]
        if args or kwargs:
            import cloudpickle

            fn, args, kwargs = cloudpickle.loads(pickled)
        job_id = prefix + job_token(task_id().binary(), salt)
        return _run(client_for, fn, args, kwargs, job_id, 0, 1, namespace, registry, echo, env)

    return run


def runner(client_for: ClientFor) -> Callable[[tuple[bytes, tuple[Any, ...]]], Any]:
    """The task function of a callable job's replica (made a Ray remote function once per
    session by the client).

    It runs one replica and returns its value, or an :class:`Outcome` where it printed or
    failed. Its payload is ``(cloudpickle.dumps((fn, args, kwargs)), (job_id, index, count,
    namespace, registry, echo, env[, placed_key]))``: bytes and plain values only, pickled
    once per job by the client (``placed_key`` only for a job with a scheduling timeout).
    Ray serialises such an argument several times faster than a function and a dataclass.
    """

    def execute(payload: tuple[bytes, tuple[Any, ...]]) -> Any:
        import cloudpickle

        pickled, fields = payload
        fn, args, kwargs = cloudpickle.loads(pickled)
        return _run(client_for, fn, args, kwargs, *fields)

    return execute


def _run(
    client_for: ClientFor,
    fn: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    job_id: str,
    index: int,
    count: int,
    namespace: str,
    registry: str,
    echo: bool,
    env: tuple[tuple[str, str], ...],
    placed_key: str | None = None,
) -> Any:
    if placed_key is not None:  # the job has a scheduling_timeout: say this replica started
        _report_placed(registry, placed_key, index)
    client = client_for(namespace, registry)  # one per worker process
    # The job's identity, then the device defaults (e.g. JAX_PLATFORMS=cpu, which the
    # worker may already have).
    undo = job_env.swap(
        ((FRAY_JOB_ID, job_id), (FRAY_TASK_INDEX, str(index)), (FRAY_NUM_TASKS, str(count)), *env)
    )
    client_token = bind_client(client)
    output = _Output(job_id, namespace, registry)
    routed = route_output(output, echo)
    # What ``fray.backend.call_outcome`` does, written out (as are the checks before the
    # calls below): this runs once per job, where each call costs about a microsecond
    # on a busy worker.
    try:
        try:
            outcome: tuple[Any, ...] = ("ok", fn(*args, **kwargs))
        except BaseException as exc:
            outcome = ("error", portable_error(exc), traceback.format_exc())
            print(outcome[2], end="", file=sys.stderr)  # the traceback, into the job's output
    finally:
        restore_output(routed)
        if client._book.history.running:
            client._book.end_children_of(job_id)
        unbind_client(client_token)
        job_env.restore(undo)
        if output.partial or output.registered:
            output.close()
    if outcome[0] != "ok":
        return Outcome("error", outcome[1], output.lines, outcome[2])
    result = outcome[1]
    if output.lines or type(result) is Outcome:  # a user value that is an Outcome stays one
        return Outcome("ok", result, output.lines)
    return result
