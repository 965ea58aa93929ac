"""What runs inside a Ray worker for a callable job: the wrapper around the user's function.

The wrapper captures the job's output (returned with the result, so the last line is never
lost, and streamed to the registry every half second while the job runs), sets the job's
identity (``FRAY_JOB_ID``, ``FRAY_TASK_INDEX``, ``FRAY_NUM_TASKS`` and a client bound to the
job, so jobs submitted from here become its children), and turns the user's exception into
a value, so a user failure can never be mistaken for a Ray failure.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import contextvars
import dataclasses
import os
import pickle
import sys
import threading
import time
import traceback
from typing import Any

from fray import _client
from fray._logbuf import LogBuffer, capture_into
from fray.environment_variables import FRAY_JOB_ID, FRAY_NUM_TASKS, FRAY_TASK_INDEX

__all__ = ["JobContext", "bound", "current_job", "execute", "job_token"]

_current_job: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "fray_ray_current_job", default=None
)


def current_job() -> str | None:
    """The id of the job this code runs in (``None`` in a driver)."""
    return _current_job.get() or os.environ.get(FRAY_JOB_ID)


@dataclasses.dataclass(frozen=True)
class JobContext:
    """Who a replica is: travels with the task."""

    job_id: str
    index: int
    count: int
    namespace: str
    registry: str
    echo: bool
    env: tuple[tuple[str, str], ...] = ()


_FLUSH_INTERVAL = 0.5
_active: dict[str, tuple[LogBuffer, list[int], JobContext]] = {}
_active_lock = threading.Lock()
_flusher: threading.Thread | None = None


def _flush_loop() -> None:
    import ray

    from fray_ray._client import REGISTRY_NAMESPACE

    registries: dict[tuple[str, str], Any] = {}
    while True:
        time.sleep(_FLUSH_INTERVAL)  # the streaming cadence, not synchronisation
        with _active_lock:
            pending = list(_active.items())
        for job_id, (buffer, sent, ctx) in pending:
            lines = [line for _ts, line in buffer.lines[sent[0] :]]
            if not lines:
                continue
            key = (ctx.namespace, ctx.registry)
            try:
                if key not in registries:
                    registries[key] = ray.get_actor(ctx.registry, namespace=REGISTRY_NAMESPACE)
                registries[key].append_logs.remote(job_id, lines)
                sent[0] += len(lines)
            except Exception:  # the driver went away: nothing to stream to
                registries.pop(key, None)


def _ensure_flusher() -> None:
    global _flusher
    if _flusher is None or not _flusher.is_alive():
        _flusher = threading.Thread(target=_flush_loop, name="fray-log-flush", daemon=True)
        _flusher.start()


def _picklable(exc: BaseException, text: str) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc} (the exception could not be pickled)")
    return exc


def job_token(task_id: str, salt: int) -> str:
    """The random part of a job id taken from the Ray task that runs its first attempt:
    the task id's leading (hashed, unique) bytes mixed with a per-function salt, so ids do
    not repeat across Ray sessions. Driver and worker compute the same token."""
    return f"{int(task_id[:8], 16) ^ salt:08x}"


def bound(
    pickled: bytes,
    name: str,
    parent: str | None,
    context: tuple[str, str, bool, tuple[tuple[str, str], ...]],
    salt: int,
) -> Any:
    """A job function that needs no task arguments: the entrypoint and the job's context
    are part of the function, and the job id comes from the Ray task id. Ray charges for
    every task argument; a request submitted again and again is exported once this way."""

    def run() -> tuple[Any, ...]:
        import ray

        token = job_token(ray.get_runtime_context().get_task_id() or "", salt)
        job_id = f"{parent}/{name}-{token}" if parent else f"{name}-{token}"
        namespace, registry, echo, env = context
        return _run(pickled, JobContext(job_id, 0, 1, namespace, registry, echo, env))

    return run


def execute(payload: tuple[bytes, tuple[Any, ...]]) -> tuple[Any, ...]:
    """Runs one replica. Returns ``("ok", value, lines)`` or ``("error", exc, tb, lines)``.

    The payload is ``(cloudpickle.dumps((fn, args, kwargs)), JobContext fields)``: bytes
    and plain values only, pickled once per job by the client. Ray serialises such an
    argument several times faster than a function and a dataclass.
    """
    pickled, fields = payload
    return _run(pickled, JobContext(*fields))


def _run(pickled: bytes, ctx: JobContext) -> tuple[Any, ...]:
    import cloudpickle

    from fray_ray._client import RayClient

    fn, args, kwargs = cloudpickle.loads(pickled)
    buffer = LogBuffer()
    names = (FRAY_JOB_ID, FRAY_TASK_INDEX, FRAY_NUM_TASKS, *(k for k, _v in ctx.env))
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(ctx.env)
    os.environ[FRAY_JOB_ID] = ctx.job_id
    os.environ[FRAY_TASK_INDEX] = str(ctx.index)
    os.environ[FRAY_NUM_TASKS] = str(ctx.count)
    client = RayClient.for_job(ctx.namespace, ctx.registry)
    client_token = _client._explicit.set(client)
    current_token = _current_job.set(ctx.job_id)
    with _active_lock:
        _active[ctx.job_id] = (buffer, [0], ctx)
    _ensure_flusher()
    outcome: tuple[Any, ...]
    try:
        with capture_into(buffer, ctx.echo):
            try:
                value = fn(*args, **kwargs)
            except BaseException as exc:
                text = traceback.format_exc()
                print(text, end="", file=sys.stderr)
                outcome = ("error", _picklable(exc, text), text)
            else:
                outcome = ("ok", value)
    finally:
        with _active_lock:
            _active.pop(ctx.job_id, None)
        client.end_children_of(ctx.job_id)
        _current_job.reset(current_token)
        _client._explicit.reset(client_token)
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
    buffer.close()
    return (*outcome, [line for _ts, line in buffer.lines])
