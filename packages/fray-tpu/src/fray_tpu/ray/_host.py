# pyright: standard
"""One actor per TPU VM of a claimed slice; the user's code runs inside it.

The host actor is pinned to its VM (hard node affinity) with what the user's code needs
there (the VM's TPU chips, CPUs, memory, custom resources and the user's runtime env). Its
``run`` method removes libtpu's lockfile, then runs the callable or command in the actor's
process, in its main thread (a plain actor: user code may install signal handlers), with the
output sent to the job's hub. The actor lives for one attempt only: the gang kills every
host actor when the attempt ends, so the process that opened the TPU never survives into the
next attempt (no stale holder of libtpu's lock). While ``run`` keeps the main thread busy, a
daemon thread asks the GCE metadata server whether the VM is being preempted and tells the
job's hub the first time it is.
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

from fray.backend import masker
from fray_tpu._errors import CommandFailedError, ExitCalledError
from fray_tpu._lockfile import LockfileOutcome, remove_libtpu_lockfile
from fray_tpu._metadata import is_preempted

__all__ = ["HostPayload", "TpuHost"]


@dataclass(frozen=True)
class HostPayload:
    """What every host runs: a callable with its arguments, or a command line."""

    fn: Callable[..., Any] | None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    command: tuple[str, ...] | None = None
    name: str = "tpu-job"


@contextlib.contextmanager
def _captured_output(hub: Any, prefix: str) -> Iterator[list[str]]:
    """Sends every line written to this process's fds 1 and 2 to the job's hub (after
    ``prefix``), and still to the worker's own log; yields a list for lines of Fray's own.
    Safe because the host actor's process runs nothing else meanwhile (and is killed after
    the attempt). Every line reaches the hub before it returns: the process is killed next;
    in the order written (the hub runs one call at a time, each host's in the order sent)."""
    sent: list[Any] = []
    partial = [""]

    def send(lines: list[str]) -> None:
        if lines:
            with contextlib.suppress(Exception):  # the pump must keep draining the output
                sent.append(hub.append_logs.remote([prefix + line for line in lines]))

    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)

    def pump() -> None:
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                with contextlib.suppress(OSError):
                    os.write(saved_out, chunk)
                *lines, partial[0] = (partial[0] + chunk.decode(errors="replace")).split("\n")
                send(lines)

    reader = threading.Thread(target=pump, name="fray-tpu-output", daemon=True)
    reader.start()
    own: list[str] = []
    try:
        yield own
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        os.close(saved_err)
        reader.join(timeout=30)
        if not reader.is_alive():  # it writes to saved_out: closed under it, the number
            os.close(saved_out)  # could be reused by a socket (Ray's own) and get its output
        send([line for line in partial if line])
        if own:
            with contextlib.suppress(Exception):
                sent.append(hub.append_logs.remote(own))
        with contextlib.suppress(Exception):
            ray.wait(sent, num_returns=len(sent), timeout=30)


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
        raise CommandFailedError(" ".join(command), code, masker([os.environ])(last))


class _TpuHostImpl:
    """The gang's hold on one TPU VM, and where the user's code runs on it (see the module
    docstring)."""

    def __init__(
        self,
        slice_name: str,
        worker_id: int,
        settings: dict[str, str],
        hub: Any,
        gang_token: str,
        health_interval_s: float,
    ) -> None:
        self.metadata_host = settings.get("GCE_METADATA_HOST")
        self.lockfile = settings.get("FRAY_TPU_LIBTPU_LOCKFILE")
        self._hub = hub
        self._token = gang_token
        self._where = f"host {slice_name}/{worker_id}"
        # Held across a metadata question and the note of its answer, so that health() never
        # misses a "preempted" that the watcher has just been told.
        self._check_lock = threading.Lock()
        self._preempted = False
        threading.Thread(
            target=self._watch, args=(health_interval_s,), name="fray-tpu-health", daemon=True
        ).start()

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

        result = remove_libtpu_lockfile(self.lockfile)
        os.environ.update(env)
        several = int(env.get("FRAY_NUM_TASKS", "1")) > 1
        prefix = f"[{env.get('FRAY_TASK_INDEX', '0')}] " if several else ""
        with _captured_output(self._hub, prefix) as own_lines:
            if result.outcome is LockfileOutcome.FAILED:
                own_lines.append(f"[fray-tpu] {label}: {result.describe()}")
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
                try:
                    cloudpickle.loads(cloudpickle.dumps(exc))
                except Exception:  # Ray could not carry it: its type and text travel instead
                    raise RuntimeError(f"{type(exc).__name__}: {exc}") from None
                raise

    # -- preemption watch -------------------------------------------------------------------

    def _check_preempted(self) -> bool:
        with self._check_lock:
            if not self._preempted and is_preempted(self.metadata_host):
                self._preempted = True
                with contextlib.suppress(Exception):
                    self._hub.report_preempted.remote(self._token, self._where)
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
