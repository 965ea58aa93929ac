"""What runs inside a Ray worker for a callable job: the wrapper around the user's function.

The wrapper binds the job's identity (Fray's own code reads it from a context variable;
``FRAY_JOB_ID``, ``FRAY_TASK_INDEX`` and ``FRAY_NUM_TASKS`` are also set in ``os.environ``
for the job's duration, with the device defaults, and restored after), binds a client so
that jobs submitted from here become the job's children, captures its output (returned with
the outcome, so the last line is never lost, and streamed to the registry every half second
while it runs) and returns an :class:`~fray.backend.Outcome`, so a user failure can never be
mistaken for a Ray failure.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from fray.backend import Outcome, binding, capture_into
from fray.environment_variables import FRAY_JOB_ID, FRAY_NUM_TASKS, FRAY_TASK_INDEX
from fray_ray._registry import RegistryLink

__all__ = ["ClientFor", "runner"]

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
            _stream(self)

    def close(self) -> list[str]:
        """The whole output; stops streaming it."""
        with self.lock:
            if self.partial:
                self.lines.append(self.partial)
                self.partial = ""
        with _active_lock:
            _active.pop(self.job_id, None)
        return self.lines


_active: dict[str, _Output] = {}
_active_lock = threading.Lock()
_flusher: list[threading.Thread] = []


def _stream(output: _Output) -> None:
    with _active_lock:
        _active[output.job_id] = output
        if not _flusher or not _flusher[0].is_alive():
            _flusher[:] = [threading.Thread(target=_flush_loop, name="fray-log-flush", daemon=True)]
            _flusher[0].start()


def _flush_loop() -> None:
    links: dict[str, RegistryLink] = {}
    while True:
        time.sleep(_FLUSH_INTERVAL)  # the streaming cadence, not synchronisation
        with _active_lock:
            pending = list(_active.values())
        for output in pending:
            with output.lock:
                lines = output.lines[output.sent :]
                output.sent += len(lines)
            if lines:
                link = links.setdefault(output.registry, RegistryLink(output.registry, quiet=True))
                link.ref("append_logs", output.job_id, lines)


def runner(client_for: ClientFor) -> Callable[[bytes, tuple[Any, ...]], tuple[Outcome, list[str]]]:
    """The task function of a callable job's replica (made a Ray remote function once per
    session by the client).

    It runs one replica and returns its outcome and output lines. Its arguments are the
    pickled ``(fn, args, kwargs)`` and ``(job_id, index, count, namespace, registry, echo,
    env, placed_key)``: bytes and plain values, which Ray serialises several times faster
    than a function and a dataclass.
    """

    def execute(payload: bytes, context: tuple[Any, ...]) -> tuple[Outcome, list[str]]:
        import cloudpickle

        job_id, index, count, namespace, registry, echo, env, placed_key = context
        if placed_key is not None:  # a scheduling_timeout: say this replica started
            RegistryLink(registry, quiet=True).ref("placed", placed_key, index)
        client = client_for(namespace, registry)
        variables = {FRAY_JOB_ID: job_id, FRAY_TASK_INDEX: str(index), FRAY_NUM_TASKS: str(count)}
        variables.update(env)
        saved = {key: os.environ.get(key) for key in variables}
        os.environ.update(variables)
        output = _Output(job_id, registry)
        try:
            with binding(client, job=(job_id, index)), capture_into(output, echo):
                outcome = Outcome.of_call(lambda: _call(cloudpickle.loads(payload)))
                if outcome.trace:
                    print(outcome.trace, end="", file=sys.stderr)  # into the job's output
            client.stop_children_of(job_id)  # children do not outlive their parent
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        return outcome, output.close()

    return execute


def _call(loaded: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]) -> Any:
    fn, args, kwargs = loaded
    return fn(*args, **kwargs)
