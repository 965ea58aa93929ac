"""What runs inside a Ray worker for a callable job: the wrapper around the user's function.

The task is shaped like the user's own: one bytes argument (the job's identity and the
pickled call, built once per job), a replica index only where the job has several, and the
user's value returned as it is. The wrapper binds the job's identity (Fray's own code reads
it from a context variable; ``FRAY_JOB_ID``, ``FRAY_TASK_INDEX`` and ``FRAY_NUM_TASKS`` are
also set in ``os.environ`` for the job's duration, with the device defaults, and restored
after), binds a client so that jobs submitted from here become the job's children, and
captures its output (streamed to the registry every half second while it runs; the whole of
it comes back with the end, so the last line is never lost).

A user's exception is left to Ray (the driver gets ``RayTaskError`` with it as ``cause``),
with its traceback printed into the job's output first. ``SystemExit`` (and any other
``BaseException`` that is not an ``Exception``) becomes :class:`JobExit`: Ray would end the
worker and report ``WorkerCrashedError``, which reads as a preemption. Output lines travel
only when there are any: a value as :class:`Printed`, a failure on the exception.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import os
import pickle
import threading
import time
from collections.abc import Callable
from typing import Any

from fray.backend import Outcome, binding
from fray.environment_variables import FRAY_JOB_ID, FRAY_NUM_TASKS, FRAY_TASK_INDEX
from fray_ray._registry import RegistryLink

__all__ = ["ClientFor", "JobExit", "Printed", "printed_lines", "runner"]

# The client the wrapper binds inside a job: one per worker process and (namespace, registry
# name), handed in by the client (``fray_ray._client.job_client``), so that this module needs
# nothing above it.
ClientFor = Callable[[str, str], Any]

_FLUSH_INTERVAL = 0.5


class _Output:
    """A replica's output lines. Written by the threads running the job (``print`` is routed
    per context), read by the flusher; registered with the flusher on the first line."""

    __slots__ = ("job_id", "lines", "lock", "partial", "registry", "sent")

    def __init__(self, job_id: str, registry: str) -> None:
        self.job_id = job_id
        self.registry = registry
        self.lines: list[str] = []
        self.partial = ""
        self.sent = -1  # lines the flusher has streamed; -1: not registered yet
        self.lock = threading.Lock()

    def write(self, text: str) -> None:
        with self.lock:
            *complete, self.partial = (self.partial + text).split("\n")
            self.lines.extend(complete)
            first = complete and self.sent < 0
            if first:
                self.sent = 0
        if first:
            _FLUSHER.add(self)

    def close(self) -> list[str]:
        """The whole output; stops streaming it."""
        with self.lock:
            if self.partial:
                self.lines.append(self.partial)
                self.partial = ""
        _FLUSHER.remove(self)
        return self.lines


class _Flusher:
    """Streams the new lines of a worker process's running replicas to their registries
    every half second, from one daemon thread started with the first line."""

    def __init__(self) -> None:
        self._outputs: dict[str, _Output] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, output: _Output) -> None:
        with self._lock:
            self._outputs[output.job_id] = output
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="fray-log-flush", daemon=True
                )
                self._thread.start()

    def remove(self, output: _Output) -> None:
        with self._lock:
            self._outputs.pop(output.job_id, None)

    def _run(self) -> None:
        links: dict[str, RegistryLink] = {}
        while True:
            time.sleep(_FLUSH_INTERVAL)  # the streaming cadence, not synchronisation
            with self._lock:
                outputs = list(self._outputs.values())
            for output in outputs:
                with output.lock:
                    lines = output.lines[output.sent :]
                    output.sent += len(lines)
                if lines:
                    link = links.setdefault(
                        output.registry, RegistryLink(output.registry, quiet=True)
                    )
                    link.ref("append_logs", output.job_id, lines)


_FLUSHER = _Flusher()
_LINES_ATTRIBUTE = "_fray_lines"  # where a failure's output lines travel


class JobExit(Exception):
    """The user's code called ``sys.exit`` (or raised another ``BaseException`` that is not
    an ``Exception``): the replica failed with ``code``, its exit code."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(code, text)
        self.code = code
        self.text = text

    def __str__(self) -> str:
        return self.text


class Printed:
    """A replica's return value with the lines it printed (only a replica that printed
    returns one; the others return their value as it is)."""

    __slots__ = ("lines", "value")

    def __init__(self, value: Any, lines: list[str]) -> None:
        self.value = value
        self.lines = lines

    def __reduce__(self) -> tuple[Any, ...]:
        return (Printed, (self.value, self.lines))


def printed_lines(error: BaseException) -> list[str]:
    """The output lines a failed replica sent back on its exception (and takes them off)."""
    return error.__dict__.pop(_LINES_ATTRIBUTE, None) or []


def _portable(exc: Exception) -> Exception:
    """``exc`` if it makes the round trip through pickling (Ray sends it to the driver,
    which must rebuild it); else a ``RuntimeError`` with its type and text."""
    import cloudpickle

    try:
        cloudpickle.loads(cloudpickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _call(call: bytes) -> Any:
    """Runs the cloudpickled ``(fn, args, kwargs)``."""
    import cloudpickle

    fn, args, kwargs = cloudpickle.loads(call)
    return fn(*args, **kwargs)


# Fray's own variables as this process had them before any job set them (None: unset),
# read once: in a worker only this wrapper sets them, and each job's end puts them back, so
# a job does not read them again (reading an unset variable raises and catches two
# KeyErrors inside os.environ). The job's other variables are read per job.
_OWN = {name: os.environ.get(name) for name in (FRAY_JOB_ID, FRAY_TASK_INDEX, FRAY_NUM_TASKS)}


def _set_env(variables: tuple[tuple[str, str], ...]) -> list[tuple[str, str | None]]:
    """Sets a job's ``(name, value)`` pairs in ``os.environ``; returns those it changed,
    each with the value it had (``None``: unset)."""
    changed = []
    for name, value in variables:
        old = _OWN[name] if name in _OWN else os.environ.get(name)
        if old != value:
            os.environ[name] = value
            changed.append((name, old))
    return changed


def _restore_env(changed: list[tuple[str, str | None]]) -> None:
    """Gives the variables a job changed back the values they had before it."""
    for name, old in changed:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def runner(client_for: ClientFor) -> tuple[Callable[[bytes], Any], Callable[[bytes, int], Any]]:
    """The task functions of a callable job's replica (each made a Ray remote function once
    per client): for a job of one replica, and for one of several (which also takes the
    replica's index). The payload is a pickled ``(job_id, count, namespace, registry, echo,
    env, placed_key, call)`` where ``call`` is the cloudpickled ``(fn, args, kwargs)``."""

    def one(payload: bytes) -> Any:
        return execute(payload, 0)

    def execute(payload: bytes, index: int) -> Any:
        job_id, count, namespace, registry, echo, env, placed_key, call = pickle.loads(payload)
        if placed_key is not None:  # a scheduling_timeout: say this replica started
            RegistryLink(registry, quiet=True).ref("placed", placed_key, index)
        client = client_for(namespace, registry)
        variables = (
            (FRAY_JOB_ID, job_id),
            (FRAY_TASK_INDEX, str(index)),
            (FRAY_NUM_TASKS, str(count)),
        )
        changed = _set_env((*variables, *env))
        output = _Output(job_id, registry)
        try:
            with binding(client, job=(job_id, index, None), output=(output, echo)):
                outcome = Outcome.of_call(_call, call)
                if outcome.trace:
                    print(outcome.trace, end="")  # into the job's output
            client.stop_children_of(job_id)  # children do not outlive their parent
        finally:
            _restore_env(changed)
        lines = output.close()
        if outcome.kind == "succeeded":
            return Printed(outcome.value, lines) if lines else outcome.value
        failure = outcome.cause
        if not isinstance(failure, Exception):  # SystemExit: Ray would end the worker
            failure = JobExit(outcome.exit_code or 1, outcome.error or "")
        failure = _portable(failure)
        if lines:
            failure.__dict__[_LINES_ATTRIBUTE] = lines
        raise failure

    return one, execute
