"""``fray jobs``, written once against the client protocol: on Ray and Iris the cluster
answers; locally, :class:`RunStore` reads the runs recorded in the state directory
(``FRAY_STATE_DIR``, default ``$XDG_STATE_HOME/fray``) by ``fray run`` and by a
``LocalClient(record=True)`` (:class:`RunRecorder`), one folder per run: ``record.json`` (the
job's facts, what ran, the runner's pid), ``log`` (``<unix time> <line>`` per line) and
``lock`` (held by the runner while the job runs). Folders are 0700, files 0600;
secret-looking env values are stored as ``***`` and masked in the log.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

from fray import JobStatus, wait_all
from fray._secrets import masker
from fray.cli._common import (
    CliError,
    add_command,
    format_duration,
    format_time,
    number,
    open_client,
    print_json,
    print_pairs,
    print_table,
)
from fray.environment_variables import FRAY_STATE_DIR
from fray.errors import FrayError, InvalidRequestError, JobNotFoundError, JobTimeoutError

# Labels of the facts whose names are long or unclear (`fray jobs status`).
_LABELS = {
    "pending_reason": "waiting",
    "preemptions": "preempted",
    "stop_signal": "signal",
    "attempt_history": "history",
}


def add_parser(sub: Any) -> None:
    """Adds ``fray jobs`` and its subcommands."""
    jobs = add_command(sub, "jobs", None, help="list, inspect, follow and stop jobs")
    inner = jobs.add_subparsers(metavar="COMMAND")
    p = add_command(inner, "list", cmd_list, True, help="list jobs, oldest first", json=True)
    p.add_argument("--limit", type=number(int, 1), metavar="N", help="only the N most recent")
    p = add_command(inner, "status", cmd_status, True, help="show one job in detail", json=True)
    p.add_argument("job_id", metavar="ID", help="job id (locally also a unique prefix or name)")
    p = add_command(inner, "logs", cmd_logs, True, help="print a job's output")
    p.add_argument("job_id", metavar="ID")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")
    p.add_argument("--children", action="store_true", help="interleave child jobs' lines")
    p = add_command(inner, "stop", cmd_stop, True, help="stop a running job")
    p.add_argument("job_id", metavar="ID")
    seconds = number(float, 0)
    p.add_argument("--timeout", type=seconds, default=60.0, metavar="SECONDS", help="default 60")
    p = add_command(inner, "wait", cmd_wait, True, help="wait for jobs (exit 0: all succeeded)")
    p.add_argument("job_ids", metavar="ID", nargs="+")
    p.add_argument("--timeout", type=seconds, metavar="SECONDS", help="then exit 124")


def _facts(info: Any) -> dict[str, Any]:
    """A job's facts (a recorded run's info is a dict already), with its duration."""
    facts = cast("dict[str, Any]", info) if isinstance(info, dict) else info.model_dump(mode="json")
    started, finished = facts.get("started_at"), facts.get("finished_at")
    end = finished or (None if JobStatus(facts["status"]).is_finished else time.time())
    return {**facts, "duration_s": end - started if started and end else None}


def cmd_list(args: argparse.Namespace) -> int:
    """``fray jobs list``."""
    with open_client(args.spec, RunStore) as client:
        rows = [_facts(info) for info in client.list_jobs()][-(args.limit or 0) :]
        where = getattr(client, "root", None)  # the state directory, locally
    if args.json:
        print_json(rows)
    elif not rows:
        print(f"fray: no runs recorded in {where}" if where else "fray: no jobs", file=sys.stderr)
    else:
        width = 7 if where else 6  # local runs show their command
        headers = ["JOB ID", "NAME", "STATUS", "EXIT", "STARTED", "DURATION", "COMMAND"]
        table = [
            [
                *(row[key] for key in ("job_id", "name", "status", "exit_code")),
                format_time(row["started_at"] or row["submitted_at"]),
                format_duration(row["duration_s"]),
                " ".join(row.get("command", ()))[:50],
            ]
            for row in rows
        ]
        print_table(headers[:width], [row[:width] for row in table])
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """``fray jobs status ID``."""
    with open_client(args.spec, RunStore) as client:
        facts = _facts(client.get_job(args.job_id).info())
    if args.json:
        print_json(facts)
        return 0
    pairs: list[tuple[str, Any]] = []
    for key, value in facts.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items() if v is not None) or "-"  # pyright: ignore[reportUnknownVariableType]
        elif key == "attempt_history":  # "1 preempted, 2 succeeded"
            value = ", ".join(f"{a['attempt']} {a['outcome']}" for a in value) or None
        elif isinstance(value, list):
            value = " ".join(map(str, value)) or "-"  # pyright: ignore[reportUnknownArgumentType]
        elif key.endswith(("_at", "_s")):
            value = (format_time if key.endswith("_at") else format_duration)(value)
        label = key.removesuffix("_at").removesuffix("_s").replace("_", " ")
        if value is not None:
            pairs.append((_LABELS.get(key, label), value))
    print_pairs(pairs)
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    """``fray jobs logs ID [-f] [--children]``."""
    with open_client(args.spec, RunStore) as client:
        handle = client.get_job(args.job_id)
        for line in handle.logs(follow=args.follow, include_children=args.children):
            print(line, flush=True)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    """``fray jobs stop ID``."""
    with open_client(args.spec, RunStore) as client:
        handle = client.get_job(args.job_id)
        status = handle.status()
        if status.is_finished:
            print(f"job {handle.job_id} is already {status.value}")
            return 0
        handle.terminate()
        try:
            (status,) = wait_all([handle], timeout=args.timeout, raise_on_failure=False)
        except JobTimeoutError:
            raise CliError(f"job {handle.job_id} did not stop within {args.timeout:g}s") from None
    print(f"job {handle.job_id} {status.value}")
    return 0


def cmd_wait(args: argparse.Namespace) -> int:
    """``fray jobs wait ID...``: exit 0 if all succeeded, 1 if any did not, 124 on timeout."""
    with open_client(args.spec, RunStore) as client:
        handles = [client.get_job(one) for one in args.job_ids]
        try:
            statuses = wait_all(handles, timeout=args.timeout, raise_on_failure=False)
        except JobTimeoutError as err:
            print(f"fray: {err}", file=sys.stderr)
            return 124
    for handle, status in zip(handles, statuses, strict=True):
        print(handle.job_id, status.value)
    return 0 if all(s is JobStatus.SUCCEEDED for s in statuses) else 1


_POLL_S = 0.1  # how often a follower reads files that another process writes
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW


class RunStore(contextlib.AbstractContextManager["RunStore"]):
    """The state directory, seen as a client of the runs recorded there."""

    def __init__(self, *_: object) -> None:  # (the local spec's threads and target)
        default = os.path.join(os.environ.get("XDG_STATE_HOME") or "~/.local/state", "fray")
        root = os.environ.get(FRAY_STATE_DIR, "").strip() or default
        self.root = os.path.abspath(os.path.expanduser(root))
        self.runs = os.path.join(self.root, "runs")

    def __exit__(self, *_: object) -> None:
        """Nothing to release: the runs belong to their ``fray run`` processes."""

    def prepare(self) -> RunStore:
        """Creates the state directory (0700) if needed; a CliError if it cannot."""
        try:
            os.makedirs(self.root, 0o700, exist_ok=True)  # the mode of the last folder only
            os.makedirs(self.runs, 0o700, exist_ok=True)
            if not os.access(self.runs, os.W_OK | os.X_OK):
                raise PermissionError(f"{self.runs} is not writable")
        except OSError as err:
            message = f"cannot write the state directory {self.root}: {err}"
            raise CliError(message, hint="set FRAY_STATE_DIR to a writable one") from err
        return self

    def records(self) -> list[dict[str, Any]]:
        """Every readable record, oldest submission first (as :meth:`Run.record` reads it)."""
        found: list[dict[str, Any]] = []
        for name in os.listdir(self.runs) if os.path.isdir(self.runs) else ():
            with contextlib.suppress(FrayError):  # a run being created, or a stray folder
                found.append(Run(self, name.replace("+", "/")).record())
        return sorted(found, key=lambda r: (r["submitted_at"] or 0.0, r["job_id"]))

    list_jobs = records  # the client protocol's name

    def get_job(self, ident: str) -> Run:
        """The run whose id is ``ident``, or starts with it, or whose name it is.

        Raises:
            JobNotFoundError: Nothing matches, or several runs do (the message lists them).
        """
        with contextlib.suppress(JobNotFoundError):
            return Run(self, Run(self, ident).record()["job_id"])
        records = self.records()
        ids = [r["job_id"] for r in records if r["job_id"].startswith(ident)]
        ids = ids or [r["job_id"] for r in records if r["name"] == ident]
        if len(ids) != 1:
            many = f"{ident!r} matches {len(ids)} runs ({', '.join(ids)}); give the id"
            raise JobNotFoundError(ident, many if ids else f"no recorded run matches {ident!r}")
        return Run(self, ids[0])


class Run:
    """One recorded run: ``fray jobs`` reads it through the job-handle methods, and its
    ``fray run`` process writes it (:meth:`start`, :meth:`update`, :meth:`line`)."""

    def __init__(self, store: RunStore, job_id: str) -> None:
        self.store, self.job_id = store, job_id
        self._folder = os.path.join(store.runs, job_id.replace("/", "+"))

    def _file(self, name: str) -> str:
        return os.path.join(self._folder, name)

    def record(self) -> dict[str, Any]:
        """The record; a run whose ``fray run`` process is gone without a word is FAILED (its
        job died with it: local jobs never outlive their runner)."""
        try:
            with open(self._file("record.json"), "rb") as f:
                record = json.load(f)
        except (FileNotFoundError, NotADirectoryError):
            raise JobNotFoundError(self.job_id, f"no recorded run {self.job_id!r}") from None
        except ValueError as err:
            raise FrayError(f"the record of run {self.job_id!r} is damaged: {err}") from err
        if not JobStatus(record["status"]).is_finished and self.runner_alive(record) is False:
            pid = record["runner"]["pid"]
            record["status"] = JobStatus.FAILED.value
            record["error"] = (
                f"the process that ran it (pid {pid}) was killed; the job died with it"
            )
        return record

    def runner_alive(self, record: Mapping[str, Any]) -> bool | None:
        """Whether the process that runs the job still runs: it holds the run's lock until
        the job ends (``None``: it runs on another host)."""
        if record["runner"]["host"] != socket.gethostname():
            return None
        with contextlib.suppress(FileNotFoundError), open(self._file("lock"), "rb") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
        return False

    def info(self) -> dict[str, Any]:
        """The record, with its children's ids."""
        prefix = self.job_id + "/"
        children = [r["job_id"] for r in self.store.records() if r["job_id"].startswith(prefix)]
        return {**self.record(), "children": children}

    def status(self) -> JobStatus:
        """The run's status."""
        return JobStatus(self.record()["status"])

    def terminate(self) -> None:
        """Asks the run's ``fray run`` process to stop it (SIGTERM), as Ctrl-C would."""
        record = self.record()
        if JobStatus(record["status"]).is_finished:
            return
        if self.runner_alive(record) is None:
            raise FrayError(f"job {self.job_id} runs on {record['runner']['host']}; stop it there")
        with contextlib.suppress(ProcessLookupError):
            os.kill(record["runner"]["pid"], signal.SIGTERM)

    def logs(self, *, follow: bool = False, include_children: bool = False) -> Iterator[str]:
        """The run's lines (with its children's, as ``[child-id] line``) in time order; with
        ``follow``, then the new ones until every run shown has finished."""
        offsets: dict[str, int] = {}
        while True:
            children: list[str] = self.info()["children"] if include_children else []
            runs = [self, *(Run(self.store, child) for child in children)]
            done = not follow or all(run.status().is_finished for run in runs)
            fresh: list[tuple[float, str]] = []
            for run in runs:
                lines, offsets[run.job_id] = run._read_log(offsets.get(run.job_id, 0))
                prefix = "" if run is self else f"[{run.job_id}] "
                fresh += [(stamp, prefix + text) for stamp, text in lines]
            yield from (text for _, text in sorted(fresh, key=lambda line: line[0]))
            if done:
                return
            if not fresh:
                time.sleep(_POLL_S)  # another process writes the log: nothing to wait on

    def _read_log(self, offset: int) -> tuple[list[tuple[float, str]], int]:
        try:
            with open(self._file("log"), "rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return [], offset
        data = data[: data.rfind(b"\n") + 1]  # complete lines only
        lines = [raw.partition(" ") for raw in data.decode(errors="replace").splitlines()]
        return [(float(stamp), text) for stamp, _, text in lines], offset + len(data)

    def start(self, handle: Any, mask: Callable[[str], str], **what: Any) -> None:
        """Starts the record of a job this process runs (its facts, then ``what`` ran)."""
        self._handle, self._mask, self._lines = handle, mask, 0
        self._lock = threading.Lock()
        self._record: dict[str, Any] = {}
        os.makedirs(self._folder, 0o700, exist_ok=True)
        # Held until close() or this process ends, so that a reader knows when it is gone,
        # however it ends.
        self._held = os.open(self._file("lock"), _FLAGS, 0o600)
        fcntl.flock(self._held, fcntl.LOCK_EX)
        runner = {"pid": os.getpid(), "host": socket.gethostname()}
        self.update(**what, runner=runner)
        self._log = os.open(self._file("log"), _FLAGS | os.O_APPEND, 0o600)

    def update(self, **extra: Any) -> None:
        """Writes the record (atomically) when the job's facts have changed."""
        facts = {**self._handle.info().model_dump(mode="json"), **extra}
        facts["error"] = facts["error"] and self._mask(facts["error"])
        with self._lock:  # (called from two threads)
            if any(self._record.get(k) != v for k, v in facts.items()):
                self._record.update(facts)
                tmp = self._file("record.json.tmp")
                with os.fdopen(os.open(tmp, _FLAGS | os.O_TRUNC, 0o600), "w") as f:
                    json.dump(self._record, f, indent=1)
                os.replace(tmp, self._file("record.json"))

    def line(self, text: str) -> None:
        """Appends a line of the job's output to the log."""
        if not self._lines:  # whoever sees this line may ask `fray jobs`: it says running
            self.update()
        self._lines += 1
        os.write(self._log, f"{time.time():.6f} {text}\n".encode(errors="replace"))

    def lines(self, stamped: list[tuple[float, str]]) -> None:
        """Appends lines of the job's output, each with the time it was printed, masked."""
        data = "".join(f"{stamp:.6f} {self._mask(text)}\n" for stamp, text in stamped)
        os.write(self._log, data.encode(errors="replace"))

    def close(self) -> None:
        """Releases the run's files once the record is final (the job has ended)."""
        os.close(self._log)
        os.close(self._held)


class RunRecorder:
    """Records the jobs of a ``LocalClient(record=True)`` in the run store, so that ``fray
    jobs`` and ``fray dashboard`` show them after the process has exited: the record when
    the job is submitted, placed and ended, and its output when it ends (a process killed
    mid-job leaves the record, read as FAILED, without that job's output).

    Raises:
        InvalidRequestError: The state directory cannot be written.
    """

    def __init__(self, store: RunStore | None = None) -> None:
        try:
            self.store = (store or RunStore()).prepare()
        except CliError as err:
            raise InvalidRequestError.for_field(
                "LocalClient.record", True, f"{err}; {err.hint}"
            ) from None
        self._runs: dict[str, Run] = {}  # one get, set or pop at a time: atomic, no lock

    def submitted(self, handle: Any, env: Mapping[str, str], what: str) -> None:
        """Starts the record of a job (``env``: its env vars, whose secrets are masked)."""
        run = Run(self.store, handle.job_id)
        run.start(handle, masker([os.environ, env]), command=[what], recorded_by="LocalClient")
        self._runs[handle.job_id] = run

    def changed(self, job_id: str) -> None:
        """Writes the record again (the job was placed)."""
        run = self._runs.get(job_id)
        if run is not None:
            run.update()

    def ended(self, job_id: str, stamped: list[tuple[float, str]]) -> None:
        """Writes the final record and the job's output, and releases the run's files."""
        run = self._runs.pop(job_id, None)
        if run is not None:
            run.lines(stamped)
            run.update()
            run.close()
