"""``fray run``: submit a command as a job, stream its output, exit with its exit code."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import queue
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from fray import Entrypoint, EnvironmentConfig, JobRequest, JobStatus, ResourceConfig
from fray._secrets import masker, redact_env
from fray.cli._common import (
    add_command,
    number,
    open_client,
    quiet_local_client,
    silence_stdout,
    usage,
)
from fray.cli._info import tpu_type
from fray.cli._jobs import Run, RunStore
from fray.errors import InvalidRequestError

# After a signal: how long a submission on its way may take (its job is then stopped too),
# how long a remote backend may take to confirm the stop (the local one, whose processes are
# ours, is always waited for), to deliver the last lines, and to close the client.
_SUBMIT_GRACE_S = 1.0
_STOP_BUDGET_S = 0.9
_LOG_DRAIN_S = 0.3
_CLOSE_S = 0.2
_RECORD_EVERY_S = 0.2  # how often a local run's record follows the job's status
_TICK_S = 0.05


def add_parser(sub: Any) -> None:
    """Adds ``fray run``."""
    what = "run a command as a job, stream its output and exit with its exit code"
    p = add_command(sub, "run", run_command, spec=True, help=what)
    p.add_argument("--name", help="job name (default: from the command)")
    p.add_argument("--cpu", type=float, help="CPU cores per replica, e.g. 4 or 0.5")
    p.add_argument("--ram", help="memory per replica, e.g. 16g or 512Mi")
    p.add_argument("--disk", help="disk per replica, e.g. 100g")
    p.add_argument("--tpu", type=tpu_type, metavar="TYPE", help="TPU slice type, e.g. v5p-64")
    p.add_argument("--slices", type=number(int, 1), metavar="N", help="TPU slices (with --tpu)")
    p.add_argument("--gpu", type=_gpu, metavar="TYPE[:N]", help="GPUs per replica, e.g. H100:8")
    p.add_argument("--env", type=_env, action="append", default=[], metavar="NAME=VALUE")
    for budget in ("failure", "preemption"):
        how = {"type": number(int, 0), "metavar": "N", "help": f"re-runs after a {budget}"}
        p.add_argument(f"--max-retries-{budget}", **how)
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...")


def _gpu(text: str) -> tuple[str, int]:
    variant, sep, n = text.partition(":")
    if sep and not (n.isdigit() and int(n) >= 1):
        raise argparse.ArgumentTypeError(f"{text!r}: the count after ':' must be an integer >= 1")
    return variant.strip(), int(n) if sep else 1


def _env(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r} must look like NAME=VALUE")
    return name, value


def default_name(command: list[str]) -> str:
    """A job name from the command: ``python train.py`` → ``train``."""
    label = os.path.basename(command[0])
    if label.startswith("python") and command[1:2] == ["-m"] and len(command) > 2:
        label = command[2]
    elif label.startswith("python") and len(command) > 1 and command[1].endswith(".py"):
        label = os.path.basename(command[1])[: -len(".py")]
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-._")[:64] or "run"


def build_request(args: argparse.Namespace, command: list[str], env: dict[str, str]) -> JobRequest:
    """The JobRequest the flags ask for; a bad value is a usage error naming its flag."""
    if args.tpu and args.gpu:
        raise usage("--gpu", "cannot be combined with --tpu; a job asks for one device kind")
    if args.slices and not args.tpu:
        raise usage("--slices", "only applies together with --tpu TYPE")
    given = {k: v for k, v in vars(args).items() if v is not None}
    sizes = {k: given[k] for k in ("cpu", "ram", "disk") if k in given}
    try:
        if args.tpu:
            resources = ResourceConfig.with_tpu(
                args.tpu.name, slice_count=args.slices or 1, **sizes
            )
        else:
            resources = ResourceConfig.with_gpu(*args.gpu, **sizes) if args.gpu else None
        return JobRequest(
            name=default_name(command) if args.name is None else args.name,
            entrypoint=Entrypoint.from_command(command),
            resources=resources or ResourceConfig(**sizes),
            environment=EnvironmentConfig(env_vars=env) if env else None,
            **{k: v for k, v in given.items() if k.startswith("max_retries_")},
        )
    except InvalidRequestError as err:
        field = (err.field or "").rsplit(".", 1)[-1]
        named = {"env_vars": "--env", "variant": "--gpu", "count": "--gpu", "command": "CMD"}
        flag = named.get(field, "--" + field.replace("_", "-"))
        shown = "" if flag == "--env" else f"{err.value!r} is not valid; "  # no secret values
        raise usage(flag, shown + err.allowed) from None


def run_command(args: argparse.Namespace) -> int:
    """``fray run``."""
    command: list[str] = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise usage("CMD", "give the command to run after --, e.g. fray run -- python train.py")
    env = dict(args.env)
    request = build_request(args, command, env)
    client = open_client(args.spec, quiet_local_client)
    local = getattr(client, "scheme", None) == "local"
    run = _Run(client, request, masker([env, os.environ]))
    try:
        return run.execute(RunStore().prepare() if local else None, command, env)
    finally:
        if local or run.signum is None:
            client.shutdown()
        else:  # stopped: a remote backend may be unreachable by now
            run.start("closed", client.shutdown)
            run.wait("closed", _CLOSE_S)


class _Run:
    """One ``fray run``. Its main thread waits on an inbox that background threads and the
    signal handler feed, so it acts on a signal at once, whatever the backend is doing."""

    def __init__(self, client: Any, request: JobRequest, mask: Callable[[str], str]) -> None:
        self.client, self.request, self.mask = client, request, mask
        self.inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.signum: int | None = None

    def start(self, kind: str, call: Callable[[], Any]) -> None:
        """Runs ``call`` on a daemon thread; its outcome arrives in the inbox as ``kind``."""

        def target() -> None:
            outcome: Future[Any] = Future()
            try:
                outcome.set_result(call())
            except BaseException as err:  # handed to the main thread
                outcome.set_exception(err)
            self.inbox.put((kind, outcome))

        threading.Thread(target=target, name=f"fray-run-{kind}", daemon=True).start()

    def wait(self, kind: str, timeout: float | None = None) -> Future[Any] | None:
        """The outcome of ``kind``; ``None`` once ``timeout`` has passed or at the first
        signal (later ones are ignored: the run is stopping already)."""
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        # Never blocks long: a signal is handled only once the main thread runs Python code.
        while (left := deadline - time.monotonic()) > 0:
            with contextlib.suppress(queue.Empty):
                got, value = self.inbox.get(timeout=min(left, _TICK_S))
                if got == kind:
                    return value
                if got == "signal" and self.signum is None:
                    self.signum = value
                    return None
        return None

    def execute(self, store: RunStore | None, command: list[str], env: dict[str, str]) -> int:
        """Submits the job, streams its output (recording it in ``store`` if given), stops it
        on a signal; returns the exit code."""
        # SimpleQueue.put is reentrant: safe in a signal handler.
        previous = {
            signum: signal.signal(signum, lambda n, _: self.inbox.put(("signal", n)))
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        }
        try:
            self.start("submitted", lambda: self.client.submit(self.request))
            submitted = self.wait("submitted") or self.wait("submitted", _SUBMIT_GRACE_S)
            if submitted is None:
                print(f"fray: {self._signal()}: stopped while submitting", file=sys.stderr)
                return 128 + (self.signum or 0)
            handle = submitted.result()
            run = Run(store, handle.job_id) if store else None
            if run:
                run.start(handle, self.mask, **self._what_ran(command, env))
            return self._follow(handle, run)
        finally:
            for signum, old in previous.items():
                signal.signal(signum, old)

    def _follow(self, handle: Any, run: Run | None) -> int:
        """Streams the job's output until it ends, or stops it at a signal; the exit code."""
        if sys.stderr.isatty():
            print(f"fray: job {handle.job_id} started; Ctrl-C stops it", file=sys.stderr)
        self.start("finished", lambda: self._pump(handle, run))
        finished, every = None, _RECORD_EVERY_S if run else None
        while self.signum is None and (finished := self.wait("finished", every)) is None:
            if run:  # (a remote backend is asked nothing: it may hang)
                run.update()
        if finished is not None:
            finished.result()  # a backend error, if waiting raised one
        else:
            self.start("stopped", lambda: handle.status().is_finished or handle.terminate())
            if self.wait("stopped", None if run else _STOP_BUDGET_S) is None:
                why = f"the backend did not confirm the stop of job {handle.job_id} in time"
                print(f"fray: {self._signal()}: {why}", file=sys.stderr)
                return 128 + (self.signum or 0)
            self.wait("finished", _LOG_DRAIN_S)  # the last lines
        info = handle.info()
        signum = self.signum if info.status is JobStatus.STOPPED else None
        if run:
            run.update(stop_signal=signum and self._signal())
        if info.status is JobStatus.SUCCEEDED:
            return 0
        error = self.mask(info.error or "no error text")
        stopped = info.status is JobStatus.STOPPED
        outcome = "stopped" if stopped else f"failed: {error}"
        print(f"fray: job {handle.job_id} {outcome}", file=sys.stderr)
        code = info.exit_code or 0
        if signum:
            return 128 + signum
        return min(code, 255) if code > 0 else (128 - code if code < 0 else 1)

    def _what_ran(self, command: list[str], env: dict[str, str]) -> dict[str, Any]:
        resources, device = self.request.resources, self.request.resources.device
        if device.kind == "tpu":
            text = f"tpu {device.variant} x{resources.slice_count} slice(s)"
        else:
            text = f"gpu {device.variant} x{device.count}" if device.kind == "gpu" else "cpu"
        return {
            "command": [self.mask(part) for part in command],
            "cwd": os.getcwd(),
            "env": redact_env(env),
            "resources": {
                **{k: getattr(resources, k) for k in ("cpu", "ram", "disk")},
                "device": text,
                "replicas": self.request.replica_count,
            },
        }

    def _signal(self) -> str:
        return signal.Signals(self.signum or 0).name

    def _pump(self, handle: Any, run: Run | None) -> JobStatus:
        """Copies the job's lines, masked, to stdout and the run's log, until the job ends."""
        for line in handle.logs(follow=True):
            text = self.mask(line)
            if run:
                run.line(text)
            try:
                print(text, flush=True)
            except (OSError, ValueError):  # the reader went away: the job runs on, unheard
                silence_stdout()
        return handle.wait(raise_on_failure=False)  # in case the stream ended first
