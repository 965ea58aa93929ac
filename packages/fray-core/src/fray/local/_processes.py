"""Process jobs: commands, and callables that need a process (env vars, TPU hosts,
``isolation="process"``), each replica under a guardian (``_reaper.py``) in a session of
its own, so that a job is its whole process tree and never outlives the driver. One reader
thread per replica copies its output into the job's log.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fray._types import JobRequest, TpuConfig
from fray.backend import JobRecord, Outcome, Phase
from fray.backend._capabilities import has_secrets
from fray.backend._events import TIMERS
from fray.backend._output import echo_stream
from fray.environment_variables import FRAY_JOB_ID, FRAY_NUM_TASKS, FRAY_TASK_INDEX

if TYPE_CHECKING:
    from fray.local._client import LocalClient

_REAPER = str(Path(__file__).with_name("_reaper.py"))
SECRETS_DIR_ENV = "RIGGING_SECRETS_DIR"  # where rigging's readers look for secret files
FORWARDED_SECRETS = ("HF_TOKEN", "WANDB_API_KEY", "CW_KEY_ID", "CW_KEY_SECRET")


@dataclasses.dataclass(slots=True)
class _Replica:
    """One process of a process attempt."""

    index: int
    process: subprocess.Popen[bytes] | None = None
    result_path: str | None = None
    code: int | None = None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_private(path: str, data: bytes) -> None:
    """Writes ``data`` to a new file only its owner can read (0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _forwarded_secrets() -> dict[str, str]:
    """The driver's credentials a job inherits (rigging's ``forwarded_secrets``): its
    mounted bundle (``RIGGING_SECRETS_DIR``), then HF, W&B and CoreWeave keys, each read from
    the bundle first, then from the environment."""
    bundle = Path(os.environ.get(SECRETS_DIR_ENV, "/run/rigging/secrets"))
    listed = sorted(p.name for p in bundle.glob("*") if p.is_file() and p.name[0] != ".")
    found: dict[str, str] = {}
    for name in dict.fromkeys((*listed, *FORWARDED_SECRETS)):
        value = (bundle / name).read_text() if (bundle / name).is_file() else os.environ.get(name)
        if value is not None:
            found[name] = value.strip()
    return found


def _deliver_secrets(request: JobRequest, folder: str) -> dict[str, str]:
    """Writes the job's secrets as files (0600) into a private folder (0700) of the job's
    own, removed when it ends; returns the variables its processes get (the folder as
    ``RIGGING_SECRETS_DIR``; with ``isolate``, the driver's forwarded keys removed)."""
    env = request.environment
    if env is None or not has_secrets(request):
        return {}
    values = _forwarded_secrets() if env.secret_behavior == "inherit" else {}
    values.update(env.secrets)
    path = os.path.join(folder, "secrets")
    os.mkdir(path, 0o700)
    for name, value in values.items():
        _write_private(os.path.join(path, name), value.encode())
    hidden = dict.fromkeys(FORWARDED_SECRETS, "") if env.secret_behavior == "isolate" else {}
    return {**hidden, SECRETS_DIR_ENV: path}


def _replica_env(
    job: JobRecord, index: int, coordinator_port: int, secrets: dict[str, str]
) -> dict[str, str]:
    request = job.request
    assert request is not None
    env = dict(os.environ)
    for name, value in secrets.items():  # "" removes a variable: the driver's credentials
        if value:
            env[name] = value
        else:
            env.pop(name, None)
    device = request.resources.device
    defaults = device.default_env_vars()  # a new dict
    if isinstance(device, TpuConfig):
        # No TPU here: JAX runs on the CPU, with the env a real host of the slice gets.
        defaults["JAX_PLATFORMS"] = "cpu"
        vms = device.vm_count()
        slices = job.replicas // vms
        slice_id, worker = divmod(index, vms)
        env.update(
            TPU_NAME=f"{job.job_id.replace('/', '-')}-slice-{slice_id}",
            TPU_WORKER_ID=str(worker),
            TPU_ACCELERATOR_TYPE=device.variant,
            TPU_WORKER_HOSTNAMES=",".join(["127.0.0.1"] * vms),
        )
        if slices > 1:
            env.update(
                MEGASCALE_COORDINATOR_ADDRESS=f"127.0.0.1:{coordinator_port}",
                MEGASCALE_NUM_SLICES=str(slices),
                MEGASCALE_SLICE_ID=str(slice_id),
                MEGASCALE_PORT=str(coordinator_port),
            )
    for key, value in defaults.items():
        env.setdefault(key, value)
    if request.environment is not None:
        env.update(request.environment.env_vars)
    env.update(
        {
            FRAY_JOB_ID: job.job_id,
            FRAY_TASK_INDEX: str(index),
            FRAY_NUM_TASKS: str(job.replicas),
            "PYTHONUNBUFFERED": "1",
        }
    )
    if request.entrypoint.is_callable:
        # The job unpickles functions by reference: give it the driver's import path.
        paths = [p for p in sys.path if p and os.path.isdir(p)]
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def run_processes(client: LocalClient, job: JobRecord) -> Outcome:
    """Runs one attempt in guarded processes, one per replica, and returns its outcome
    once every replica has exited."""
    request = job.request
    assert request is not None
    data = job.data
    if data.workdir is None:
        data.workdir = client.job_folder(job)
        if data.payload is not None:
            _write_private(os.path.join(data.workdir, "payload.pkl"), data.payload)
        data.secrets = _deliver_secrets(request, data.workdir)
    port = _free_port() if isinstance(request.resources.device, TpuConfig) else 0
    replicas = [_Replica(i) for i in range(job.replicas)]
    exits: queue.SimpleQueue[_Replica] = queue.SimpleQueue()  # each replica once it exited
    with job.lock:
        if job.phase is not Phase.RUNNING:
            return Outcome.stopped()
        data.replicas = replicas
        for replica in replicas:
            if data.payload is not None:
                replica.result_path = os.path.join(
                    data.workdir, f"result-{job.attempts}-{replica.index}.pkl"
                )
                payload = os.path.join(data.workdir, "payload.pkl")
                argv = [sys.executable, "-m", "fray._runner", payload, replica.result_path]
            else:
                assert request.entrypoint.command is not None
                argv = list(request.entrypoint.command)
            replica.process = subprocess.Popen(
                [sys.executable, _REAPER, str(os.getpid()), "--", *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=_replica_env(job, replica.index, port, data.secrets),
                start_new_session=True,
            )
            threading.Thread(
                target=_pump,
                args=(client.echo_logs, job, replica, exits),
                name=f"fray-log-{job.job_id}",
                daemon=True,
            ).start()
    # One replica down takes the attempt down: the first to fail stops the others.
    bad: _Replica | None = None
    for left in reversed(range(len(replicas))):
        replica = exits.get()
        if replica.code and bad is None:
            bad = replica
            if left:
                stop_processes(replicas, client.grace)
    with job.lock:  # all have exited: nothing for a stop or a shutdown to signal, or to keep
        data.replicas = []
    return _outcome(job, replicas, bad)


def _outcome(job: JobRecord, replicas: list[_Replica], bad: _Replica | None) -> Outcome:
    """How the attempt went, once every replica has exited (``bad``: the first that failed)."""
    entry = job.request.entrypoint  # pyright: ignore[reportOptionalMemberAccess]
    if bad is None:
        if not entry.is_callable:
            return Outcome.succeeded(None, exit_code=0)
        values = [_read_result(r).value for r in replicas]
        return Outcome.succeeded(values[0] if len(values) == 1 else values)
    code = bad.code
    assert code is not None
    failed = max(sum(1 for r in replicas if r.code is not None and r.code > 0), 1)
    where = f"replica {bad.index} " if len(replicas) > 1 else ""
    if code < 0:
        # Recorded as a shell reports it (128 + the signal), so `fray jobs` and the exit
        # status of `fray run` agree.
        sig = signal.Signals(-code)
        if sig is signal.SIGKILL:
            # Fray did not send it (a stop it sends is not an attempt's outcome): on one
            # machine that is the out-of-memory killer or a user, not a lost node.
            error = (
                f"{where}was killed by SIGKILL, not by Fray (on one machine usually the "
                "out-of-memory killer)"
            )
            return Outcome.failed(None, error, 128 + sig, failed)
        return Outcome.preempted(f"{where}was killed by {sig.name}", 128 + sig)
    if entry.is_callable:
        record = _read_result(bad)
        if record.kind == "failed" and record.cause is not None:
            return Outcome.failed(record.cause, exit_code=code, failed_tasks=failed)
    last = next((line for _ts, line in reversed(job.log.snapshot()) if line.strip()), "")
    error = f"{where}exited with code {code}" + (f"; last output: {last}" if last else "")
    return Outcome.failed(None, error, code, failed)  # the engine masks secrets in it


def _read_result(replica: _Replica) -> Outcome:
    import cloudpickle

    assert replica.result_path is not None
    try:
        with open(replica.result_path, "rb") as f:
            return cloudpickle.loads(f.read())
    except FileNotFoundError:
        return Outcome.failed(None, "the job wrote no result")
    except Exception as exc:
        return Outcome.failed(RuntimeError(f"the job's result could not be read: {exc!r}"))


def _pump(
    echo_logs: bool, job: JobRecord, replica: _Replica, exits: queue.SimpleQueue[_Replica]
) -> None:
    process = replica.process
    assert process is not None and process.stdout is not None
    echo = echo_stream() if echo_logs else None
    prefix = f"[{replica.index}] " if job.replicas > 1 else ""
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
    replica.code = process.wait()
    exits.put(replica)


def _sweep_group(process: subprocess.Popen[bytes]) -> None:
    """Once a replica's guardian has exited, kills what is left of its process group (a
    guardian killed outright cannot, and the rest would hold the output pipe open). It is
    left unreaped until then (``WNOWAIT``), so the group id cannot have been reused."""

    with contextlib.suppress(ChildProcessError, OSError):
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def signal_replicas(replicas: list[Any], sig: signal.Signals) -> None:
    """Sends ``sig`` to every running replica's process group."""
    for replica in replicas:
        process = replica.process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)


def stop_processes(replicas: list[Any], grace: float) -> None:
    """SIGTERM to every running replica now, SIGKILL to what is left after ``grace``."""
    signal_replicas(replicas, signal.SIGTERM)
    TIMERS.call_later(grace, signal_replicas, replicas, signal.SIGKILL)
