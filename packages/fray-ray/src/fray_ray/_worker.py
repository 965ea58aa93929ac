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

import os
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

from fray.backend import bind_client, call_outcome, restore_output, route_output, unbind_client
from fray.environment_variables import FRAY_JOB_ID, FRAY_NUM_TASKS, FRAY_TASK_INDEX

__all__ = ["Outcome", "bound", "current_job", "execute", "job_token", "outcome_of"]


def current_job() -> str | None:
    """The id of the job this code runs in (``None`` in a driver): the wrapper sets
    ``FRAY_JOB_ID`` in the worker process for the duration of the job."""
    return _env.get(FRAY_JOB_ID)


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

    from fray_ray._client import REGISTRY_NAMESPACE

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


def job_token(task_id: bytes, salt: int) -> str:
    """The random part of a job id taken from the Ray task that runs its first attempt:
    the task id's leading (hashed, unique) bytes mixed with a per-function salt, so ids do
    not repeat across Ray sessions. Driver and worker compute the same token (the driver
    from the task's object id, which starts with the task id)."""
    return f"{int.from_bytes(task_id[:4], 'big') ^ salt:08x}"


def _task_id() -> bytes:
    """The running Ray task's id, read from Ray's worker object: four times cheaper than
    the public runtime context, which builds an object per call (used where present)."""
    worker = getattr(sys.modules.get("ray._private.worker"), "global_worker", None)
    task_id = getattr(worker, "current_task_id", None)
    if task_id is not None:
        return task_id.binary()
    import ray

    return bytes.fromhex(ray.get_runtime_context().get_task_id() or "")


def bound(
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
    prefix = f"{parent}/{name}-" if parent else f"{name}-"
    loaded: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []

    def run() -> Any:
        if not loaded:
            import cloudpickle

            loaded.append(cloudpickle.loads(pickled))
        fn, args, kwargs = loaded[0]
        if args or kwargs:
            import cloudpickle

            fn, args, kwargs = cloudpickle.loads(pickled)
        job_id = prefix + job_token(_task_id(), salt)
        return _run(fn, args, kwargs, job_id, 0, 1, namespace, registry, echo, env)

    return run


def execute(payload: tuple[bytes, tuple[Any, ...]]) -> Any:
    """Runs one replica; returns its value, or an :class:`Outcome` where it printed or
    failed.

    The payload is ``(cloudpickle.dumps((fn, args, kwargs)), (job_id, index, count,
    namespace, registry, echo, env))``: bytes and plain values only, pickled once per job by
    the client. Ray serialises such an argument several times faster than a function and a
    dataclass.
    """
    import cloudpickle

    pickled, fields = payload
    fn, args, kwargs = cloudpickle.loads(pickled)
    return _run(fn, args, kwargs, *fields)


class _Environment:
    """Sets and restores variables of this process's environment, for the C library (what
    subprocesses inherit) and ``os.environ`` alike: a job sets its identity and device
    variables with :meth:`swap` and puts back what was there with :meth:`restore`.

    Where ``os.environ`` keeps its variables as a dict of encoded bytes (CPython on POSIX:
    ``os.environ._data``), they are read and written there directly (names encoded once,
    old values kept as bytes) and in the C library with ``os.putenv``/``os.unsetenv``:
    ``os.environ``'s own layers of Python cost a Ray worker more than the variables do.
    Elsewhere ``os.environ`` does it.

    ``fresh`` names variables that get a new value every job (the job id). glibc's
    ``setenv`` (behind ``os.putenv``) keeps a copy of every value it was ever given, in a
    search tree it walks on every call, so a new value per job grew a worker by ~80 bytes
    per job and made every later call slower (measured: 200,000 jobs, +15 MiB). A fresh
    variable is set with the C library's ``putenv`` and a ``NAME=value`` string this
    object owns instead (one per variable, dropped once the environment no longer points
    into it), as CPython itself did up to 3.8.
    """

    def __init__(self, fresh: Iterable[str] = ()) -> None:
        self._encoding = (sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())
        data = getattr(os.environ, "_data", None)
        probe = next(iter(data), b"") if isinstance(data, dict) else None
        self._data: dict[bytes, bytes] | None = (
            data if isinstance(probe, bytes) and os.name == "posix" else None
        )
        self._keys: dict[str, bytes] = {}  # names, encoded
        self._fresh = {self._key(name) for name in fresh}
        if any(not key or b"=" in key or b"\0" in key for key in self._fresh):
            raise ValueError(f"not environment variable names: {fresh!r}")
        self._putenv: Any = None  # the C library's putenv, found on first use
        self._owned: dict[bytes, bytes] = {}  # NAME=value strings the environment points into

    def get(self, name: str) -> str | None:
        data = self._data
        if data is None:
            return os.environ.get(name)
        value = data.get(self._keys.get(name) or self._key(name))
        return None if value is None else value.decode(*self._encoding)

    def swap(self, values: Iterable[tuple[str, str | None]]) -> list[tuple[Any, Any]]:
        """Sets each ``(name, value)`` (``None`` unsets it); returns what :meth:`restore`
        takes to put back what was there. A variable that already has its value is left
        alone."""
        undo: list[tuple[Any, Any]] = []
        data = self._data
        try:
            if data is None:
                for name, value in values:
                    old = os.environ.get(name)
                    if old != value:
                        if value is None:
                            os.environ.pop(name, None)
                        else:
                            os.environ[name] = value
                        undo.append((name, old))
                return undo
            keys, fresh = self._keys, self._fresh
            encoding, errors = self._encoding
            for name, value in values:
                key = keys.get(name) or self._key(name)
                old = data.get(key)
                if value is None:
                    if old is not None:
                        os.unsetenv(key)
                        del data[key]
                        self._owned.pop(key, None)
                        undo.append((key, old))
                    continue
                raw = value.encode(encoding, errors)
                if raw == old:
                    continue
                if key in fresh:
                    self._put(key, raw)
                else:
                    os.putenv(key, raw)
                data[key] = raw
                undo.append((key, old))
        except BaseException:  # a name or value the environment cannot hold: no half-set
            self.restore(undo)
            raise
        return undo

    def restore(self, undo: list[tuple[Any, Any]]) -> None:
        """Puts back what :meth:`swap` changed."""
        data = self._data
        for key, old in reversed(undo):
            if data is None:
                if old is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = old
            elif old is None:
                os.unsetenv(key)
                data.pop(key, None)
                self._owned.pop(key, None)  # nothing points into it any more
            else:
                if key in self._fresh:
                    self._put(key, old)
                else:
                    os.putenv(key, old)
                data[key] = old

    def _key(self, name: str) -> bytes:
        key = self._keys[name] = name.encode(*self._encoding)
        return key

    def _put(self, key: bytes, raw: bytes) -> None:
        """Sets a fresh variable from a string this object owns."""
        putenv = self._putenv
        if putenv is None:
            putenv = self._putenv = _c_putenv()
        entry = key + b"=" + raw
        if putenv is _NO_PUTENV or b"\0" in raw or putenv(entry):
            os.putenv(key, raw)  # also for a value the C library cannot hold: it says why
            self._owned.pop(key, None)
        else:
            self._owned[key] = entry  # the environment points into it now; the old one is free


_NO_PUTENV = object()


def _c_putenv() -> Any:
    """The C library's ``putenv`` (it keeps the string it is given, not a copy), or
    ``_NO_PUTENV`` where ctypes cannot reach it."""
    try:
        import ctypes

        putenv = ctypes.CDLL(None).putenv
        putenv.argtypes = [ctypes.c_char_p]
        putenv.restype = ctypes.c_int
    except (ImportError, OSError, AttributeError):
        return _NO_PUTENV
    return putenv


_env = _Environment(fresh=(FRAY_JOB_ID,))
_for_job: Any = None  # RayClient.for_job, imported once (a per-job ``from`` import costs)


def _load_for_job() -> Any:
    global _for_job
    from fray_ray._client import RayClient

    _for_job = RayClient.for_job
    return _for_job


def _run(
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
) -> Any:
    client = (_for_job or _load_for_job())(namespace, registry)  # cached per worker
    environ = _env
    # The job's identity, then the device defaults (e.g. JAX_PLATFORMS=cpu, which the
    # worker may already have).
    undo = environ.swap(
        ((FRAY_JOB_ID, job_id), (FRAY_TASK_INDEX, str(index)), (FRAY_NUM_TASKS, str(count)), *env)
    )
    client_token = bind_client(client)
    output = _Output(job_id, namespace, registry)
    routed = route_output(output, echo)
    try:
        outcome = call_outcome(fn, args, kwargs)
        if outcome[0] != "ok":
            print(outcome[2], end="", file=sys.stderr)  # the traceback, into the job's output
    finally:
        restore_output(routed)
        client.end_children_of(job_id)
        unbind_client(client_token)
        environ.restore(undo)
        output.close()
    if outcome[0] != "ok":
        return Outcome("error", outcome[1], output.lines, outcome[2])
    result = outcome[1]
    if output.lines or type(result) is Outcome:  # a user value that is an Outcome stays one
        return Outcome("ok", result, output.lines)
    return result
