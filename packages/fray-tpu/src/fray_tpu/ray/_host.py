# pyright: standard
"""One actor per TPU VM of a claimed slice, and the task it launches there.

The host actor holds the VM for the gang (it takes the slice's ``{<slice-name>: 1}``
resource, and on worker 0 also ``TPU-<type>-head``), removes libtpu's lockfile before each
launch, answers health checks (is it alive, does the metadata server say preempted) and
launches the user's code as a task pinned to its VM with the TPU chips. Ray starts a fresh
worker process for every launch (``max_calls=1``), so no process keeps libtpu's lock between
attempts.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from fray_tpu._lockfile import LockfileOutcome, remove_libtpu_lockfile
from fray_tpu._metadata import is_preempted
from fray_tpu.ray._util import rget

__all__ = ["CommandFailedError", "HostPayload", "TpuHost"]


@dataclass(frozen=True)
class HostPayload:
    """What every host runs: a callable with its arguments, or a command line."""

    fn: Callable[..., Any] | None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    command: tuple[str, ...] | None = None
    name: str = "tpu-job"


class CommandFailedError(RuntimeError):
    """A command entrypoint exited with a non-zero code on one host."""

    def __init__(self, command: str, code: int, last_line: str = "") -> None:
        message = f"command {command!r} exited with code {code}"
        if last_line:
            message += f"; last output: {last_line}"
        super().__init__(message)
        self.command = command
        self.code = code
        self.last_line = last_line

    def __reduce__(self) -> Any:
        return (type(self), (self.command, self.code, self.last_line))


class _LineForwarder:
    """Sends complete lines to the job's state actor in small batches; never blocks output."""

    def __init__(self, state: Any, flush_s: float = 0.2) -> None:
        self._state = state
        self._pending: list[str] = []
        self._partial = ""
        self._lock = threading.Lock()
        self._flush_s = flush_s
        self._last = time.monotonic()

    def write(self, text: str) -> None:
        with self._lock:
            text = self._partial + text
            *complete, self._partial = text.split("\n")
            self._pending.extend(complete)
            due = time.monotonic() - self._last >= self._flush_s or len(self._pending) > 500
        if due:
            self.flush()

    def flush(self, *, final: bool = False) -> None:
        with self._lock:
            if final and self._partial:
                self._pending.append(self._partial)
                self._partial = ""
            batch, self._pending = self._pending, []
            self._last = time.monotonic()
        if not batch:
            return
        ref = self._state.append_logs.remote(batch)
        if final:
            # The last lines must reach the job's log before the task reports its end.
            with contextlib.suppress(Exception):
                rget(ref, timeout=30)


@contextlib.contextmanager
def _captured_output(state: Any) -> Iterator[_LineForwarder]:
    """Sends everything written to this process's fds 1 and 2 to the job's log, and still to
    the worker's own log files. Safe because the worker runs only this task (max_calls=1)."""
    forwarder = _LineForwarder(state)
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)

    def pump() -> None:
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while True:
                chunk = pipe.read(65536)
                if not chunk:
                    return
                with contextlib.suppress(OSError):
                    os.write(saved_out, chunk)
                forwarder.write(chunk.decode("utf-8", errors="replace"))

    reader = threading.Thread(target=pump, name="fray-tpu-output", daemon=True)
    reader.start()
    try:
        yield forwarder
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        os.close(saved_out)
        os.close(saved_err)
        reader.join(timeout=30)
        forwarder.flush(final=True)


def _run_command(command: tuple[str, ...]) -> None:
    proc = subprocess.Popen(
        list(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    last = ""
    for raw in iter(proc.stdout.readline, b""):
        os.write(1, raw)
        text = raw.decode("utf-8", errors="replace").rstrip("\n")
        if text.strip():
            last = text
    proc.stdout.close()
    code = proc.wait()
    if code != 0:
        raise CommandFailedError(" ".join(command), code, last)


def host_main(payload_bytes: bytes, env: dict[str, str], state: Any) -> Any:
    """The task run on every host: the user's callable or command, output to the job log.

    The env is applied here, before the payload is unpickled (so modules it imports, jax
    included, see it), rather than through a Ray runtime env: a task without one can start
    on one of the node's idle, already started workers. The worker runs only this task
    (``max_calls=1``), so nothing leaks into later work.
    """
    import cloudpickle

    os.environ.update(env)
    with _captured_output(state):
        payload: HostPayload = cloudpickle.loads(payload_bytes)
        if payload.command is not None:
            _run_command(payload.command)
            return None
        assert payload.fn is not None
        return payload.fn(*payload.args, **payload.kwargs)


class _TpuHostImpl:
    """The gang's hold on one TPU VM (see the module docstring)."""

    def __init__(self, slice_name: str, worker_id: int, settings: dict[str, str]) -> None:
        self.slice_name = slice_name
        self.worker_id = worker_id
        self.metadata_host = settings.get("GCE_METADATA_HOST")
        self.lockfile = settings.get("FRAY_TPU_LIBTPU_LOCKFILE")
        self.node_id = ray.get_runtime_context().get_node_id()
        self.ip = ray.util.get_node_ip_address()
        self.ref: Any = None

    def info(self) -> dict[str, Any]:
        return {
            "slice": self.slice_name,
            "worker": self.worker_id,
            "node_id": self.node_id,
            "ip": self.ip,
            "pid": os.getpid(),
        }

    def health(self) -> dict[str, Any]:
        return {"preempted": is_preempted(self.metadata_host)}

    def launch(
        self,
        payload: bytes,
        state: Any,
        *,
        env: dict[str, str],
        runtime_env: dict[str, Any],
        num_cpus: float,
        memory: int | None,
        resources: dict[str, float],
        label: str,
    ) -> list[Any]:
        """Removes the lockfile, then starts the user's code on this VM; returns ``[ref]``
        (wrapped, so that the reference stays owned by this actor)."""
        result = remove_libtpu_lockfile(self.lockfile)
        if result.outcome is LockfileOutcome.FAILED:
            state.append_logs.remote([f"[fray-tpu] {label}: {result.describe()}"])
        options: dict[str, Any] = {
            "num_cpus": num_cpus,
            "num_gpus": 0,
            "resources": resources,
            "scheduling_strategy": NodeAffinitySchedulingStrategy(self.node_id, soft=False),
            "runtime_env": runtime_env or None,
            "max_retries": 0,
            "retry_exceptions": False,
            "name": label,
        }
        if memory:
            options["memory"] = memory
        task = ray.remote(max_calls=1)(host_main).options(**options)
        self.ref = task.remote(payload, env, state)
        return [self.ref]

    def lockfile_result(self) -> str:
        return remove_libtpu_lockfile(self.lockfile).outcome.value

    def stop(self) -> None:
        """Cancels the running task (its worker is killed) and waits briefly for it."""
        ref, self.ref = self.ref, None
        if ref is None:
            return
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)
        with contextlib.suppress(Exception):
            ray.wait([ref], timeout=10)


TpuHost = ray.remote(num_cpus=0, max_concurrency=8, max_restarts=0, max_task_retries=0)(  # pyright: ignore[reportCallIssue]
    _TpuHostImpl
)
