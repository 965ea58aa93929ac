"""Process jobs: commands, and callables that need a process (env vars, TPU hosts,
``isolation="process"``), each replica under a guardian (``_reaper.py``) in a session of
its own, so that a job is its whole process tree and never outlives the driver."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fray._types import TpuConfig
from fray.backend import echo_stream
from fray.environment_variables import FRAY_JOB_ID, FRAY_NUM_TASKS, FRAY_TASK_INDEX
from fray.errors import InvalidRequestError
from fray.local._jobs import LocalJob, Replica

if TYPE_CHECKING:
    from fray.local._client import LocalClient

__all__ = ["attempt_process", "kill_all", "signal_replicas", "stop_replicas", "write_payload"]

_REAPER = str(Path(__file__).with_name("_reaper.py"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_payload(job: LocalJob, workdir: str) -> None:
    """Pickles the job's callable into ``workdir`` (0700 folder, 0600 file).

    Raises:
        InvalidRequestError: The callable or its arguments cannot be pickled.
    """
    import cloudpickle

    entry = job.request.entrypoint
    try:
        data = cloudpickle.dumps((entry.callable, entry.args, entry.kwargs))
    except Exception as err:
        raise InvalidRequestError.for_field(
            "JobRequest.entrypoint",
            entry.describe(),
            f"a job that runs in its own process must be picklable: {type(err).__name__}: {err}",
        ) from err
    os.makedirs(workdir, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(workdir, "payload.pkl"), os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    job.workdir = workdir


def _replica_env(job: LocalJob, index: int, coordinator_port: int) -> dict[str, str]:
    request = job.request
    env = dict(os.environ)
    device = request.resources.device
    defaults = dict(device.default_env_vars())
    if isinstance(device, TpuConfig):
        # No TPU here: JAX runs on the CPU, with the env a real host of the slice gets.
        defaults["JAX_PLATFORMS"] = "cpu"
        vms = device.vm_count()
        slices = request.replica_count // vms
        slice_id, worker = divmod(index, vms)
        env["TPU_NAME"] = f"{job.job_id.replace('/', '-')}-slice-{slice_id}"
        env["TPU_WORKER_ID"] = str(worker)
        env["TPU_ACCELERATOR_TYPE"] = device.variant
        env["TPU_WORKER_HOSTNAMES"] = ",".join(["127.0.0.1"] * vms)
        if slices > 1:
            env["MEGASCALE_COORDINATOR_ADDRESS"] = f"127.0.0.1:{coordinator_port}"
            env["MEGASCALE_NUM_SLICES"] = str(slices)
            env["MEGASCALE_SLICE_ID"] = str(slice_id)
            env["MEGASCALE_PORT"] = str(coordinator_port)
    for key, value in defaults.items():
        env.setdefault(key, value)
    if request.environment is not None:
        env.update(request.environment.env_vars)
    env[FRAY_JOB_ID] = job.job_id
    env[FRAY_TASK_INDEX] = str(index)
    env[FRAY_NUM_TASKS] = str(request.replica_count)
    env["PYTHONUNBUFFERED"] = "1"
    if request.entrypoint.is_callable:
        # The job unpickles functions by reference: give it the driver's import path.
        paths = [p for p in sys.path if p and os.path.isdir(p)]
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def attempt_process(client: LocalClient, job: LocalJob) -> tuple[Any, ...]:
    """Runs one attempt in guarded processes (one per replica); returns its outcome:
    ``("ok", value)``, ``("failed", exc | None, error, code, failed replicas)``,
    ``("preempted", error, code)`` or ``("stopped",)``. One replica down takes the whole
    attempt down."""
    request = job.request
    entry = request.entrypoint
    count = request.replica_count
    port = _free_port() if isinstance(request.resources.device, TpuConfig) else 0
    replicas = [Replica(i) for i in range(count)]
    exits: queue.SimpleQueue[tuple[int, int]] = queue.SimpleQueue()
    readers: list[threading.Thread] = []
    with job.lock:
        if job.stop_requested:
            return ("stopped",)
        job.replicas = replicas
        job.signalled = False
        for replica in replicas:
            if entry.is_callable:
                assert job.workdir is not None
                replica.result_path = os.path.join(
                    job.workdir, f"result-{job.attempts}-{replica.index}.pkl"
                )
                argv = [
                    sys.executable,
                    "-m",
                    "fray._runner",
                    os.path.join(job.workdir, "payload.pkl"),
                    replica.result_path,
                ]
            else:
                assert entry.command is not None
                argv = list(entry.command)
            replica.process = subprocess.Popen(
                [sys.executable, _REAPER, str(os.getpid()), "--", *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=_replica_env(job, replica.index, port),
                start_new_session=True,
            )
            reader = threading.Thread(
                target=_pump,
                args=(client.echo_logs, job, replica, exits),
                name=f"fray-log-{job.job_id}",
                daemon=True,
            )
            reader.start()
            readers.append(reader)
    codes: dict[int, int] = {}
    first_bad: tuple[int, int] | None = None  # the replica whose exit took the attempt down
    while len(codes) < count:
        index, code = exits.get()
        codes[index] = code
        if code != 0 and first_bad is None:
            first_bad = (index, code)
        if code != 0 and len(codes) < count:
            # Gang semantics: one replica down takes the attempt down.
            stop_replicas(job, client.grace)
    for reader in readers:
        reader.join()
    if job.stop_requested:
        return ("stopped",)
    bad = [(i, c) for i, c in sorted(codes.items()) if c != 0]
    if not bad:
        if not entry.is_callable:
            job.exit_code = 0
            return ("ok", None)
        values = [_read_result(r)[1] for r in replicas]
        return ("ok", values[0] if count == 1 else values)
    assert first_bad is not None
    index, code = first_bad
    failed = sum(1 for _i, c in bad if c > 0)
    if code < 0:
        # Recorded as a shell reports it (128 + the signal), so that `fray jobs` and the
        # exit status of `fray run` agree.
        sig = signal.Signals(-code)
        where = f"replica {index} " if count > 1 else ""
        if sig is signal.SIGKILL:
            # Fray did not send it (a stop it sends is not an attempt's outcome): on one
            # machine that is the out-of-memory killer or a user, not a lost node.
            error = (
                f"{where}was killed by SIGKILL, not by Fray (on one machine usually the "
                "out-of-memory killer)"
            )
            return ("failed", None, error, 128 + sig, max(failed, 1))
        return ("preempted", f"{where}was killed by {sig.name}", 128 + sig)
    last = next((line for _ts, line in reversed(job.log.lines) if line.strip()), "")
    if entry.is_callable:
        record = _read_result(replicas[index])
        if record[0] == "error":
            exc = record[1]
            return ("failed", exc, f"{type(exc).__name__}: {exc}", code, failed)
    where = f"replica {index} " if count > 1 else ""
    error = f"{where}exited with code {code}" + (f"; last output: {last}" if last else "")
    return ("failed", None, error, code, failed)


def _read_result(replica: Replica) -> tuple[Any, ...]:
    import cloudpickle

    assert replica.result_path is not None
    try:
        with open(replica.result_path, "rb") as f:
            return cloudpickle.loads(f.read())
    except FileNotFoundError:
        return ("missing",)
    except Exception as exc:
        return ("error", RuntimeError(f"the job's result could not be read: {exc!r}"), "")


def _pump(
    echo_logs: bool, job: LocalJob, replica: Replica, exits: queue.SimpleQueue[tuple[int, int]]
) -> None:
    process = replica.process
    assert process is not None and process.stdout is not None
    echo = echo_stream() if echo_logs else None
    prefix = f"[{replica.index}] " if job.request.replica_count > 1 else ""
    sweeper = threading.Thread(
        target=_sweep_group, args=(process,), name=f"fray-sweep-{job.job_id}", daemon=True
    )
    sweeper.start()
    for raw in iter(process.stdout.readline, b""):
        text = raw.decode("utf-8", errors="replace")
        if not text.endswith("\n"):  # the output's last line, without its newline
            text += "\n"
        job.log.write(text, prefix)
        if echo is not None:
            with contextlib.suppress(Exception):
                echo.write(prefix + text)
    process.stdout.close()
    sweeper.join()
    exits.put((replica.index, process.wait()))


def _sweep_group(process: subprocess.Popen[bytes]) -> None:
    """Once a replica's guardian has exited, kills whatever is left of its process group.

    The guardian does this itself when its command ends, but a guardian killed outright
    (SIGKILL, the OOM killer) cannot: the job's other processes would outlive it and hold
    the output pipe open, leaving the job RUNNING for good. The exited guardian is left
    unreaped until then (``WNOWAIT``), so the group id cannot have been reused.
    """
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def signal_replicas(job: LocalJob, sig: signal.Signals) -> None:
    """Sends ``sig`` to every running replica's process group."""
    for replica in list(job.replicas):
        process = replica.process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)


def stop_replicas(job: LocalJob, grace: float) -> None:
    """SIGTERM to every running replica now, SIGKILL to what is left after ``grace``."""
    signal_replicas(job, signal.SIGTERM)
    kill = threading.Timer(grace, signal_replicas, (job, signal.SIGKILL))
    kill.daemon = True
    kill.start()


def kill_all(jobs: dict[str, LocalJob]) -> None:
    """SIGKILLs every replica process of these jobs (the client's finalizer)."""
    for job in list(jobs.values()):
        for replica in job.replicas:
            process = replica.process
            if process is not None and process.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
