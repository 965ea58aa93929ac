"""Records of local runs, so that ``fray jobs`` in a later process sees what ``fray run`` ran.

A local ``fray run`` is its own job runner. It records each run in the state directory
(``FRAY_STATE_DIR``, default ``$XDG_STATE_HOME/fray`` or ``~/.local/state/fray``), in
``runs/<job id, '/' written as '+'>/``: ``record.json`` (the job's facts, what ran, the
runner's pid), ``log`` (``<unix time> <line>`` per line) and ``lock`` (held by the runner
while it lives). Folders are 0700, files 0600, records replaced atomically; secret-looking
env values are stored as ``***`` and masked in the log.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from fray import JobStatus
from fray._types import is_secret_name
from fray.cli._common import CliError
from fray.environment_variables import FRAY_STATE_DIR
from fray.errors import FrayError, JobNotFoundError

__all__ = ["Run", "RunStore", "masker", "redact"]

_POLL_S = 0.1  # how often a follower reads files that another process writes
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW


def redact(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the values of secret-looking names replaced by ``***``."""
    return {name: "***" if is_secret_name(name) else value for name, value in env.items()}


def masker(envs: Iterable[Mapping[str, str]]) -> Callable[[str], str]:
    """A function that masks, in a text, the values of the secret-looking env vars of ``envs``
    (those of four characters or more: masking ``1`` everywhere would protect nothing)."""
    secrets = {v for env in envs for k, v in env.items() if is_secret_name(k) and len(v) >= 4}
    ordered = sorted(secrets, key=len, reverse=True)

    def mask(text: str) -> str:
        for value in ordered:
            text = text.replace(value, "***")
        return text

    return mask


class RunStore:
    """The state directory, seen as a client of the runs recorded there."""

    def __init__(self) -> None:
        default = os.path.join(os.environ.get("XDG_STATE_HOME") or "~/.local/state", "fray")
        root = os.environ.get(FRAY_STATE_DIR, "").strip() or default
        self.root = os.path.abspath(os.path.expanduser(root))
        self.runs = os.path.join(self.root, "runs")

    def __enter__(self) -> RunStore:
        return self

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
            hint = "set FRAY_STATE_DIR to a writable directory"
            raise CliError(
                f"cannot write the state directory {self.root}: {err}", hint=hint
            ) from err
        return self

    def records(self) -> list[dict[str, Any]]:
        """Every readable record, oldest submission first, as :meth:`Run.info` shows it
        (without children)."""
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
            record["status"] = JobStatus.FAILED.value
            record["error"] = (
                f"the 'fray run' process (pid {record['runner']['pid']}) ended without "
                "recording a result (it was killed); its job ended with it"
            )
        return record

    def runner_alive(self, record: Mapping[str, Any]) -> bool | None:
        """Whether the run's ``fray run`` process still runs, holding the run's lock
        (``None``: it runs on another host)."""
        if record["runner"]["host"] != socket.gethostname():
            return None
        try:
            fd = os.open(self._file("lock"), os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
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
        # Held while this process lives, so that a reader knows when it is gone, however.
        fcntl.flock(os.open(self._file("lock"), _FLAGS, 0o600), fcntl.LOCK_EX)
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
