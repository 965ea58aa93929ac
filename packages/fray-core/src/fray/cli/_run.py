"""``fray run``: submit a command as a job, stream its output, exit with its exit code."""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from fray._model import MEMORY_ALLOWED
from fray._state import LogSink, Masker, StateStore, process_start_ticks
from fray._types import (
    Entrypoint,
    EnvironmentConfig,
    GpuConfig,
    JobRequest,
    JobStatus,
    ResourceConfig,
    parse_memory,
    redact_env,
)
from fray.cli._common import CliError, UsageError, choose_spec, format_duration, is_tty
from fray.errors import InvalidRequestError

__all__ = ["add_parser"]

_NAME_CLEAN = re.compile(r"[^A-Za-z0-9_.-]+")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Where an InvalidRequestError's field came from on the command line.
_FIELD_FLAGS = {
    "name": "--name",
    "cpu": "--cpu",
    "ram": "--ram",
    "disk": "--disk",
    "replicas": "--slices",
    "slice_count": "--slices",
    "max_retries_failure": "--max-retries-failure",
    "max_retries_preemption": "--max-retries-preemption",
    "env_vars": "--env",
    "command": "CMD",
}


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``fray run`` to the subcommand parsers."""
    p: argparse.ArgumentParser = sub.add_parser(
        "run",
        parents=[common],
        help="run a command as a job, stream its output and exit with its exit code",
        description=(
            "Runs CMD as a Fray job on the chosen backend (local unless --spec or "
            "FRAY_CLIENT_SPEC says otherwise), streams its output to stdout and exits with "
            "its exit code. Ctrl-C stops the job and exits 130. Local runs are recorded in "
            "the state directory (FRAY_STATE_DIR) for 'fray jobs'."
        ),
        epilog=(
            "example: fray run --name train --tpu v5p-64 --env WANDB_MODE=offline -- "
            "python train.py"
        ),
    )
    p.add_argument(
        "--spec", help="backend spec: local, ray, ray://host:port, iris://host:port, ..."
    )
    p.add_argument("--name", help="job name (default: from the command)")
    p.add_argument("--cpu", type=float, help="CPU cores per replica, e.g. 4 or 0.5")
    p.add_argument("--ram", help="memory per replica, e.g. 16g or 512Mi")
    p.add_argument("--disk", help="disk per replica, e.g. 100g")
    p.add_argument(
        "--tpu", metavar="TYPE", help="TPU slice type, e.g. v5p-64 (see 'fray tpu list')"
    )
    p.add_argument("--slices", type=int, metavar="N", help="number of TPU slices (with --tpu)")
    p.add_argument("--gpu", metavar="TYPE[:N]", help="GPU type and count per replica, e.g. H100:8")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set an env var in the job (repeatable); secret-looking values are redacted",
    )
    p.add_argument("--max-retries-failure", type=int, metavar="N", help="re-runs after a failure")
    p.add_argument(
        "--max-retries-preemption", type=int, metavar="N", help="re-runs after a preemption"
    )
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    p.set_defaults(handler=run_command)


# ---------------------------------------------------------------------------------------------
# Building the request


def parse_env(items: Sequence[str]) -> dict[str, str]:
    """``["A=1", "B=x=y"]`` → ``{"A": "1", "B": "x=y"}``; anything else is a usage error."""
    env: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError("--env", f"{item!r} must look like NAME=VALUE")
        if not _ENV_NAME.match(name):
            raise UsageError(
                "--env",
                f"{name!r} is not a valid name; use letters, digits and '_', not starting "
                "with a digit",
            )
        if name in env:
            raise UsageError("--env", f"{name} is given twice")
        env[name] = value
    return env


def parse_gpu(text: str) -> GpuConfig:
    """``H100`` or ``H100:8`` → a GpuConfig."""
    variant, sep, count_text = text.partition(":")
    count = 1
    if sep:
        try:
            count = int(count_text)
        except ValueError:
            count = 0
        if count < 1:
            raise UsageError("--gpu", f"{text!r}: the count after ':' must be an integer >= 1")
    try:
        return GpuConfig(variant=variant.strip(), count=count)
    except InvalidRequestError as err:
        raise UsageError("--gpu", f"{variant!r} is not valid; {err.allowed}") from None


def _flag_for(err: InvalidRequestError) -> str:
    field = (err.field or "").split(".")
    for part in reversed(field):
        if part in _FIELD_FLAGS:
            return _FIELD_FLAGS[part]
    if "variant" in field:
        return "--tpu/--gpu"
    return "CMD"


def build_resources(args: argparse.Namespace) -> ResourceConfig:
    """The ResourceConfig the flags ask for."""
    fields: dict[str, Any] = {}
    if args.cpu is not None:
        fields["cpu"] = args.cpu
    for flag in ("ram", "disk"):
        value = getattr(args, flag)
        if value is not None:
            try:
                parse_memory(value, field=f"--{flag}")
            except InvalidRequestError:
                raise UsageError(
                    f"--{flag}", f"{value!r} is not a size; {MEMORY_ALLOWED}"
                ) from None
            fields[flag] = value
    if args.tpu is not None and args.gpu is not None:
        raise UsageError("--gpu", "cannot be combined with --tpu; a job asks for one device kind")
    if args.slices is not None and args.tpu is None:
        raise UsageError("--slices", "only applies together with --tpu TYPE")
    if args.slices is not None and args.slices < 1:
        raise UsageError("--slices", f"{args.slices} is not valid; must be an integer >= 1")
    try:
        if args.tpu is not None:
            from fray.topology import UnknownTpuTypeError, canonical_tpu_name

            try:
                canonical_tpu_name(args.tpu)
            except UnknownTpuTypeError as err:
                raise UsageError("--tpu", str(err)) from None
            return ResourceConfig.with_tpu(args.tpu, slice_count=args.slices or 1, **fields)
        if args.gpu is not None:
            return ResourceConfig(device=parse_gpu(args.gpu), **fields)
        return ResourceConfig(**fields)
    except InvalidRequestError as err:
        raise UsageError(_flag_for(err), f"{err.value!r} is not valid; {err.allowed}") from None


def default_name(command: Sequence[str]) -> str:
    """A job name from the command: ``python train.py`` → ``train``."""
    prog = os.path.basename(command[0])
    label = prog
    if prog.startswith("python") and len(command) > 1:
        if command[1] == "-m" and len(command) > 2:
            label = command[2]
        elif command[1].endswith(".py"):
            label = os.path.basename(command[1])[: -len(".py")]
    label = _NAME_CLEAN.sub("-", label).strip("-._")[:64]
    return label or "run"


def build_request(
    args: argparse.Namespace, command: list[str]
) -> tuple[JobRequest, dict[str, str]]:
    """The JobRequest for ``fray run`` and the env vars given with ``--env``."""
    env = parse_env(args.env)
    resources = build_resources(args)
    extra: dict[str, Any] = {}
    if args.max_retries_failure is not None:
        extra["max_retries_failure"] = args.max_retries_failure
    if args.max_retries_preemption is not None:
        extra["max_retries_preemption"] = args.max_retries_preemption
    name = args.name if args.name is not None else default_name(command)
    try:
        request = JobRequest(
            name=name,
            entrypoint=Entrypoint.from_command(command),
            resources=resources,
            environment=EnvironmentConfig(env_vars=env) if env else None,
            **extra,
        )
    except InvalidRequestError as err:
        raise UsageError(_flag_for(err), f"{err.value!r} is not valid; {err.allowed}") from None
    return request, env


def describe_resources(resources: ResourceConfig, replicas: int) -> dict[str, Any]:
    """A JSON-friendly summary of a ResourceConfig."""
    device = resources.device
    if device.kind == "tpu":
        text = f"tpu {device.variant} x{resources.slice_count} slice(s)"
    elif device.kind == "gpu":
        text = f"gpu {device.variant} x{device.count}"
    else:
        text = "cpu"
    return {
        "cpu": resources.cpu,
        "ram": resources.ram,
        "disk": resources.disk,
        "device": text,
        "replicas": replicas,
    }


# ---------------------------------------------------------------------------------------------
# Running


class _Recorder:
    """Keeps a local run's record and log up to date in the state directory."""

    def __init__(self, store: StateStore, record: dict[str, Any]) -> None:
        self.store = store
        self.record = record
        self.log: LogSink = store.open_log(str(record["job_id"]))
        self._lock = threading.Lock()
        store.write_record(record)

    def update(self, info: Any, mask: Callable[[str], str], **extra: Any) -> None:
        fields = {
            "status": info.status.value,
            "attempts": info.attempts,
            "failures": info.failures,
            "preemptions": info.preemptions,
            "exit_code": info.exit_code,
            "error": mask(info.error) if info.error else None,
            "started_at": info.started_at,
            "finished_at": info.finished_at,
            **extra,
        }
        with self._lock:
            if all(self.record.get(k) == v for k, v in fields.items()):
                return
            self.record.update(fields)
            self.store.write_record(self.record)

    def close(self) -> None:
        self.log.close()


class _Output:
    """Writes job lines to stdout; after a broken pipe keeps going silently."""

    def __init__(self) -> None:
        self.broken = False

    def write(self, line: str) -> None:
        if self.broken:
            return
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError, OSError):
            self.broken = True
            with contextlib.suppress(OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())


def _exit_code(status: JobStatus, info: Any, stop_signal: int | None) -> int:
    if status is JobStatus.SUCCEEDED:
        return 0
    if stop_signal is not None:
        return 128 + stop_signal
    code = info.exit_code
    if isinstance(code, int) and code > 0:
        return min(code, 255)
    if isinstance(code, int) and code < 0:
        return 128 + (-code)
    return 1


# How often the main thread looks for a stop signal while a background thread waits on the
# backend; a stop must end `fray run` within 2 s whatever the backend is doing.
_TICK_S = 0.05
# After a stop signal: how long a submission already on its way may take before `fray run`
# gives up on it (and on stopping the job it may have started), and how long the last lines
# of the stopped job may take to arrive.
_SUBMIT_GRACE_S = 1.0
_LOG_DRAIN_ON_STOP_S = 0.3
# A remote backend that does not confirm the stop within this (its controller hung or gone)
# is left to finish it: `fray run` exits, saying so. The local backend is always waited for,
# since the job's processes are this process's children. Closing the client after a stop
# gets a moment more (a client whose jobs have all ended closes in milliseconds).
_STOP_BUDGET_S = 0.9
_CLOSE_AFTER_STOP_S = 0.2


def _in_background(call: Callable[[], Any], name: str) -> concurrent.futures.Future[Any]:
    """Runs ``call`` on a daemon thread: the main thread stays free to notice a signal
    (a signal handler runs only in the main thread, and only between bytecodes)."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def target() -> None:
        try:
            future.set_result(call())
        except BaseException as err:  # handed to the main thread
            future.set_exception(err)

    threading.Thread(target=target, name=name, daemon=True).start()
    return future


def _wait_or_stop(
    future: concurrent.futures.Future[Any], stop_signal: list[int], timeout: float | None
) -> bool:
    """Waits up to ``timeout`` (``None``: no limit) for ``future``, returning early on a stop
    signal; returns whether it is done."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not stop_signal:
        left = _TICK_S if deadline is None else deadline - time.monotonic()
        if left <= 0:
            break
        concurrent.futures.wait([future], timeout=min(left, _TICK_S))
        if future.done():
            return True
    return future.done()


def _stop(handle: Any) -> None:
    """Terminates the job unless it has finished."""
    if not handle.status().is_finished:
        handle.terminate()


def _open_client(spec: str | None) -> tuple[Any, bool]:
    """The client for ``spec`` and whether it is the local backend."""
    from fray._client import client_from_spec, current_client, parse_client_spec

    if spec is None:
        client = current_client()
        return client, getattr(client, "scheme", None) == "local"
    parsed = parse_client_spec(spec)
    if parsed.scheme == "local":
        from fray.local import LocalClient

        parsed.reject_unknown({"threads"}, address=False)
        return LocalClient(max_threads=parsed.param_int("threads"), echo_logs=False), True
    return client_from_spec(parsed), False


def run_command(args: argparse.Namespace) -> int:
    """``fray run``."""
    command: list[str] = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError(
            "CMD", "give the command to run after --, e.g. fray run -- python train.py"
        )
    request, env = build_request(args, command)
    spec, _reason = choose_spec(args.spec)
    mask = Masker([env, os.environ])
    store: StateStore | None = None
    stop_signal: list[int] = []  # the signal that stopped this run, once one has
    client, local = _open_client(spec)
    try:
        if local:
            store = StateStore()
            try:
                store.prepare()
            except OSError as err:
                raise CliError(
                    f"cannot write the state directory {store.describe()}: {err}",
                    hint="set FRAY_STATE_DIR to a writable directory or bucket URL",
                ) from err
        return _run(client, request, command, env, mask, store, stop_signal)
    finally:
        closing = _in_background(client.shutdown, "fray-run-shutdown")
        if local or not stop_signal:
            concurrent.futures.wait([closing])
        else:  # stopped: a remote backend may be unreachable by now
            concurrent.futures.wait([closing], timeout=_CLOSE_AFTER_STOP_S)


def _run(
    client: Any,
    request: JobRequest,
    command: list[str],
    env: dict[str, str],
    mask: Callable[[str], str],
    store: StateStore | None,
    stop_signal: list[int],
) -> int:
    from fray.local import grace_seconds

    def on_signal(signum: int, _frame: object) -> None:
        if not stop_signal:
            stop_signal.append(signum)

    watched = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
    previous = {sig: signal.signal(sig, on_signal) for sig in watched}
    tty = is_tty(sys.stderr)
    recorder: _Recorder | None = None
    try:
        submitting = _in_background(lambda: client.submit(request), "fray-run-submit")
        if not _wait_or_stop(submitting, stop_signal, None):
            # Stopped while submitting: a job on its way is given a moment, to be stopped too.
            concurrent.futures.wait([submitting], timeout=_SUBMIT_GRACE_S)
            if not submitting.done():
                name = signal.Signals(stop_signal[0]).name
                sys.stderr.write(f"fray: {name}: stopped while submitting {request.name}\n")
                sys.stderr.flush()
                return 128 + stop_signal[0]
        handle = submitting.result()
        if store is not None:
            info = handle.info()
            recorder = _Recorder(
                store,
                {
                    "version": 1,
                    "job_id": handle.job_id,
                    "name": request.name,
                    "backend": "local",
                    "command": [mask(part) for part in command],
                    "cwd": os.getcwd(),
                    "resources": describe_resources(request.resources, request.replica_count),
                    "env": redact_env(env),
                    "max_retries_failure": request.max_retries_failure,
                    "max_retries_preemption": request.max_retries_preemption,
                    "status": info.status.value,
                    "attempts": info.attempts,
                    "failures": 0,
                    "preemptions": 0,
                    "exit_code": None,
                    "error": None,
                    "parent": info.parent,
                    "submitted_at": info.submitted_at or time.time(),
                    "started_at": info.started_at,
                    "finished_at": None,
                    "stop_signal": None,
                    "terminate_grace_s": grace_seconds(),
                    "runner": {
                        "pid": os.getpid(),
                        "host": socket.gethostname(),
                        "start_ticks": process_start_ticks(os.getpid()),
                    },
                },
            )
        if tty:
            sys.stderr.write(f"fray: job {handle.job_id} started; Ctrl-C stops it\n")
            sys.stderr.flush()
        out = _Output()
        log = recorder.log if recorder is not None else None

        def pump() -> None:
            for line in handle.logs(follow=True):
                text = mask(line)
                out.write(text)
                if log is not None:
                    log.write(text)

        reader = threading.Thread(target=pump, name="fray-run-logs", daemon=True)
        reader.start()
        finishing = _in_background(lambda: handle.wait(raise_on_failure=False), "fray-run-wait")
        while not _wait_or_stop(finishing, stop_signal, 0.2):
            if stop_signal:
                break
            if recorder is not None:
                recorder.update(handle.info(), mask)
        if stop_signal:
            name = signal.Signals(stop_signal[0]).name
            if tty:
                sys.stderr.write(f"\nfray: {name}: stopping job {handle.job_id}...\n")
                sys.stderr.flush()
            stopping = _in_background(lambda: _stop(handle), "fray-run-stop")
            budget = None if store is not None else _STOP_BUDGET_S
            if not concurrent.futures.wait([stopping], timeout=budget).done:
                sys.stderr.write(
                    f"fray: {name}: asked job {handle.job_id} to stop; its backend did not "
                    f"confirm within {_STOP_BUDGET_S:g} s\n"
                )
                sys.stderr.flush()
                return 128 + stop_signal[0]
            stopping.result()
        reader.join(timeout=_LOG_DRAIN_ON_STOP_S if stop_signal else 30)
        info = handle.info()
        status = info.status
        signum = stop_signal[0] if stop_signal and status is JobStatus.STOPPED else None
        if recorder is not None:
            recorder.update(
                info,
                mask,
                stop_signal=signal.Signals(signum).name if signum is not None else None,
            )
        elapsed = None
        if info.started_at and info.finished_at:
            elapsed = info.finished_at - info.started_at
        if status is JobStatus.SUCCEEDED:
            if tty:
                sys.stderr.write(
                    f"fray: job {handle.job_id} succeeded in {format_duration(elapsed)}\n"
                )
        elif status is JobStatus.STOPPED:
            sys.stderr.write(f"fray: job {handle.job_id} stopped\n")
        else:
            error = mask(info.error) if info.error else "no error text"
            sys.stderr.write(f"fray: job {handle.job_id} {status.value}: {error}\n")
        sys.stderr.flush()
        return _exit_code(status, info, signum)
    finally:
        if recorder is not None:
            recorder.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
