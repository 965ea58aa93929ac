# pyright: standard
"""One actor per TPU VM of a claimed slice; the user's code runs inside it.

The host actor holds the VM for the gang: it is created pinned to the VM with the slice's
``{<slice-name>: 1}`` resource (and on worker 0 also ``TPU-<type>-head``) together with what
the user's code needs there (the VM's TPU chips, CPUs, memory, custom resources and the
user's runtime env). Its ``run`` method removes libtpu's lockfile, then runs the callable or
command in the actor's process, in its main thread (a plain actor: user code may install
signal handlers), with the output sent to the job's log.

The actor lives for one attempt only: the gang kills every host actor when the attempt ends,
so the process that opened the TPU never survives into the next attempt (no stale holder of
libtpu's lock). While ``run`` keeps the main thread busy, a daemon thread asks the GCE
metadata server whether the VM is being preempted and tells the job's state actor the first
time it is.
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

from fray_tpu._lockfile import LockfileOutcome, remove_libtpu_lockfile
from fray_tpu._metadata import is_preempted

__all__ = ["CommandFailedError", "ExitCalledError", "HostPayload", "TpuHost"]


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


class ExitCalledError(RuntimeError):
    """The user's callable called ``sys.exit`` with a failing code on one host.

    Raised in place of ``SystemExit``, which would otherwise end the host actor and look
    like the loss of the VM (a preemption) rather than the program's own failure.
    """

    def __init__(self, code: object) -> None:
        super().__init__(f"the function called sys.exit: SystemExit({code!r})")
        self.code = code

    def __reduce__(self) -> Any:
        return (type(self), (self.code,))


class _LineForwarder:
    """Sends complete lines to the job's state actor in small batches; never blocks output."""

    def __init__(self, state: Any, prefix: str = "", flush_s: float = 0.2) -> None:
        self._state = state
        self._prefix = prefix  # "[i] " on a gang of several hosts: whose line it is
        self._pending: list[str] = []
        self._partial = ""
        self._lock = threading.Lock()
        self._flush_s = flush_s
        self._last = time.monotonic()
        self._sent: list[Any] = []  # refs of batches not yet known to have arrived

    def write(self, text: str) -> None:
        with self._lock:
            text = self._partial + text
            *complete, self._partial = text.split("\n")
            prefix = self._prefix
            self._pending.extend([prefix + line for line in complete] if prefix else complete)
            due = time.monotonic() - self._last >= self._flush_s or len(self._pending) > 500
        if due:
            self.flush()

    def add_line(self, line: str) -> None:
        """A line of fray-tpu's own for the job's log, sent with the next batch."""
        with self._lock:
            self._pending.append(line)

    def flush(self, *, final: bool = False) -> None:
        with self._lock:
            if final and self._partial:
                self._pending.append(self._prefix + self._partial)
                self._partial = ""
            batch, self._pending = self._pending, []
            self._last = time.monotonic()
            # Never raise here: the output pump must keep draining the user's output.
            if batch:
                with contextlib.suppress(Exception):
                    self._sent.append(self._state.append_logs.remote(batch))
            sent = self._sent
            if not final and sent:
                with contextlib.suppress(Exception):
                    _done, self._sent = ray.wait(sent, num_returns=len(sent), timeout=0)
        if final and sent:
            # Every line must reach the job's log before the host reports its end: the process
            # is killed right after, which would drop a batch still on its way.
            with contextlib.suppress(Exception):
                ray.wait(sent, num_returns=len(sent), timeout=30)


@contextlib.contextmanager
def _captured_output(state: Any, prefix: str) -> Iterator[_LineForwarder]:
    """Sends everything written to this process's fds 1 and 2 to the job's log (each line
    after ``prefix``), and still to the worker's own log files. Safe because the host
    actor's process runs nothing else while the user's code runs (and is killed after the
    attempt)."""
    forwarder = _LineForwarder(state, prefix)
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


class _TpuHostImpl:
    """The gang's hold on one TPU VM, and where the user's code runs on it (see the module
    docstring)."""

    def __init__(
        self,
        slice_name: str,
        worker_id: int,
        settings: dict[str, str],
        state: Any,
        gang_token: str,
        health_interval_s: float,
    ) -> None:
        self.slice_name = slice_name
        self.worker_id = worker_id
        self.metadata_host = settings.get("GCE_METADATA_HOST")
        self.lockfile = settings.get("FRAY_TPU_LIBTPU_LOCKFILE")
        self.node_id = ray.get_runtime_context().get_node_id()
        self.ip = ray.util.get_node_ip_address()
        self._state = state
        self._token = gang_token
        self._where = f"host {slice_name}/{worker_id}"
        self._ran = False
        # Held across a metadata question and the note of its answer, so that health() never
        # misses a "preempted" that the watcher has just been told.
        self._check_lock = threading.Lock()
        self._preempted = False
        watcher = threading.Thread(
            target=self._watch, args=(health_interval_s,), name="fray-tpu-health", daemon=True
        )
        watcher.start()

    def info(self) -> dict[str, Any]:
        return {
            "slice": self.slice_name,
            "worker": self.worker_id,
            "node_id": self.node_id,
            "ip": self.ip,
            "pid": os.getpid(),
        }

    def health(self) -> dict[str, Any]:
        """Answers only while ``run`` is not running (the actor runs one method at a time)."""
        return {"preempted": self._check_preempted()}

    def run(self, payload: bytes, *, env: dict[str, str], label: str) -> Any:
        """Runs the user's callable or command here; returns the callable's value.

        Removes libtpu's lockfile first (a failure is noted in the job's log, never fatal),
        then applies ``env`` to ``os.environ`` before the payload is unpickled (so modules it
        imports, jax included, see it).
        """
        import cloudpickle

        if self._ran:
            raise RuntimeError(f"{self._where} already ran this attempt's payload")
        self._ran = True
        result = remove_libtpu_lockfile(self.lockfile)
        os.environ.update(env)
        several = int(env.get("FRAY_NUM_TASKS", "1")) > 1
        prefix = f"[{env.get('FRAY_TASK_INDEX', '0')}] " if several else ""
        with _captured_output(self._state, prefix) as output:
            if result.outcome is LockfileOutcome.FAILED:
                output.add_line(f"[fray-tpu] {label}: {result.describe()}")
            host_payload: HostPayload = cloudpickle.loads(payload)
            if host_payload.command is not None:
                _run_command(host_payload.command)
                return None
            assert host_payload.fn is not None
            try:
                return host_payload.fn(*host_payload.args, **host_payload.kwargs)
            except SystemExit as exc:
                if exc.code in (None, 0):
                    return None
                raise ExitCalledError(exc.code) from None
            except Exception as exc:
                from fray.backend import portable_error  # only on this path: hosts start lean

                portable = portable_error(exc)
                if portable is exc:
                    raise
                # Ray could not carry it to the supervisor: its type and text travel instead.
                raise portable from None

    # -- preemption watch -------------------------------------------------------------------

    def _check_preempted(self) -> bool:
        with self._check_lock:
            if not self._preempted and is_preempted(self.metadata_host):
                self._preempted = True
                with contextlib.suppress(Exception):
                    self._state.report_preempted.remote(self._token, self._where)
            return self._preempted

    def _watch(self, interval_s: float) -> None:
        """Asks the metadata server every ``interval_s`` until it says preempted once."""
        while True:
            time.sleep(interval_s)
            with contextlib.suppress(Exception):
                if self._check_preempted():
                    return


TpuHost = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(  # pyright: ignore[reportCallIssue]
    _TpuHostImpl
)
