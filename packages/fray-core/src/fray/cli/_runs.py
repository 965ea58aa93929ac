"""Records of local runs, so that ``fray jobs`` in a later process sees what ``fray run`` ran.

A local ``fray run`` is its own job runner. It records each run in the state directory
(``FRAY_STATE_DIR``, default ``$XDG_STATE_HOME/fray`` or ``~/.local/state/fray``)::

    <state dir>/runs/<job id, '/' written as '+'>/record.json   the job's facts, runner pid
    <state dir>/runs/<job id>/log                               "<unix time> <line>" per line

Folders are 0700 and files 0600; a record is replaced atomically (temp file, then rename).
Values of secret-looking env vars are stored as ``***``, and masked in the log.
:class:`RunStore` answers ``list_jobs`` and ``get_job`` like a client, so ``fray jobs`` is
written once for local runs and for clusters.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from fray import JobStatus
from fray._types import is_secret_name
from fray.environment_variables import FRAY_STATE_DIR
from fray.errors import FrayError, JobNotFoundError

__all__ = ["RecordedJob", "RunStore", "masker", "redact", "runner"]

_POLL_S = 0.1  # how often a follower reads files that another process writes


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


def _process_key(pid: int) -> str | None:
    """Tells a live process from a later one with the same pid: its start time on Linux,
    ``""`` where there is no ``/proc``; ``None`` when no such process runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            state, *fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return ""
    return None if state == "Z" else fields[18]


def runner() -> dict[str, Any]:
    """This process, as a record names the ``fray run`` process that owns a run."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "key": _process_key(os.getpid())}


def _runner_alive(record: Mapping[str, Any]) -> bool | None:
    """Whether the run's ``fray run`` process still runs (``None``: it runs on another host)."""
    owner: Mapping[str, Any] = record.get("runner") or {}
    if owner.get("host") != socket.gethostname():
        return None
    key = _process_key(owner["pid"])
    return key is not None and key == owner.get("key")


class RunStore:
    """The state directory, seen as a client of the runs recorded there.

    Args:
        root: The directory; ``None`` for ``FRAY_STATE_DIR`` or its default.
    """

    def __init__(self, root: str | None = None) -> None:
        default = os.path.join(os.environ.get("XDG_STATE_HOME") or "~/.local/state", "fray")
        root = root or os.environ.get(FRAY_STATE_DIR, "").strip() or default
        self.root = os.path.abspath(os.path.expanduser(root))
        self._runs = os.path.join(self.root, "runs")

    def _path(self, job_id: str, name: str = "") -> str:
        return os.path.join(self._runs, job_id.replace("/", "+"), name)

    def prepare(self) -> None:
        """Creates the state directory (0700) if needed.

        Raises:
            OSError: It cannot be created or written.
        """
        os.makedirs(os.path.dirname(self.root), exist_ok=True)
        for folder in (self.root, self._runs):
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, 0o700)
        if not os.access(self._runs, os.W_OK | os.X_OK):
            raise PermissionError(f"{self._runs} is not writable")

    def save(self, record: Mapping[str, Any]) -> None:
        """Replaces a run's record (atomically; one writer per process at a time)."""
        path = self._path(record["job_id"], "record.json")
        with contextlib.suppress(FileExistsError):
            os.mkdir(os.path.dirname(path), 0o700)
        tmp = f"{path}.tmp-{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
        os.replace(tmp, path)

    def open_log(self, job_id: str) -> Callable[[str], object]:
        """A function that appends one line to the run's log (the file stays open)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
        fd = os.open(self._path(job_id, "log"), flags, 0o600)
        return lambda line: os.write(fd, f"{time.time():.6f} {line}\n".encode(errors="replace"))

    def load(self, job_id: str) -> dict[str, Any]:
        """A run's record as written, or ``JobNotFoundError``."""
        try:
            with open(self._path(job_id, "record.json"), "rb") as f:
                record = json.load(f)
        except (FileNotFoundError, NotADirectoryError):
            raise JobNotFoundError(job_id, f"no recorded run with id {job_id!r}") from None
        except ValueError as err:
            raise FrayError(f"the record of run {job_id!r} is damaged: {err}") from err
        return record

    def records(self) -> list[dict[str, Any]]:
        """Every readable record, oldest submission first."""
        try:
            names = os.listdir(self._runs)
        except (FileNotFoundError, NotADirectoryError):
            return []
        found: list[dict[str, Any]] = []
        for name in names:
            with contextlib.suppress(FrayError):  # a run being created, or a stray folder
                found.append(self.load(name.replace("+", "/")))
        return sorted(found, key=lambda r: (r.get("submitted_at") or 0.0, r["job_id"]))

    def list_jobs(self) -> list[dict[str, Any]]:
        """Every recorded run, as :meth:`RecordedJob.info` shows it."""
        return [_effective(record) for record in self.records()]

    def get_job(self, ident: str) -> RecordedJob:
        """The run whose id is ``ident``, or starts with it, or whose name it is.

        Raises:
            JobNotFoundError: Nothing matches, or several runs do (the message lists them).
        """
        with contextlib.suppress(JobNotFoundError):
            return RecordedJob(self, self.load(ident)["job_id"])
        records = self.records()
        ids = [r["job_id"] for r in records if r["job_id"].startswith(ident)]
        ids = ids or [r["job_id"] for r in records if r.get("name") == ident]
        if len(ids) == 1:
            return RecordedJob(self, ids[0])
        if not ids:
            raise JobNotFoundError(ident, f"no recorded run matches {ident!r}")
        more = f" and {len(ids) - 5} more" if len(ids) > 5 else ""
        raise JobNotFoundError(
            ident, f"{ident!r} matches {len(ids)} runs ({', '.join(ids[:5])}{more}); give the id"
        )

    def shutdown(self) -> None:
        """Nothing to release: the runs belong to their ``fray run`` processes."""

    def read_log(self, job_id: str, offset: int) -> tuple[list[tuple[float, str]], int]:
        """The complete log lines from byte ``offset`` on, and the offset after them."""
        try:
            with open(self._path(job_id, "log"), "rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return [], offset
        data = data[: data.rfind(b"\n") + 1]
        lines = [raw.partition(" ") for raw in data.decode(errors="replace").splitlines()]
        return [(float(stamp), text) for stamp, _, text in lines], offset + len(data)


def _effective(record: dict[str, Any]) -> dict[str, Any]:
    """The record, where a run whose ``fray run`` process is gone without a word is FAILED
    (its job died with it: local jobs never outlive their runner)."""
    if not JobStatus(record["status"]).is_finished and _runner_alive(record) is False:
        pid = record["runner"]["pid"]
        record["status"] = JobStatus.FAILED.value
        record["error"] = (
            f"the 'fray run' process (pid {pid}) ended without recording a result "
            "(it was killed); its job ended with it"
        )
    return record


class RecordedJob:
    """A recorded run, with the job-handle methods ``fray jobs`` uses."""

    def __init__(self, store: RunStore, job_id: str) -> None:
        self._store = store
        self.job_id = job_id

    def info(self) -> dict[str, Any]:
        """The run's record, its effective status and its children's ids."""
        prefix = self.job_id + "/"
        children = [r["job_id"] for r in self._store.records() if r["job_id"].startswith(prefix)]
        return {**self._record(), "children": children}

    def _record(self) -> dict[str, Any]:
        return _effective(self._store.load(self.job_id))

    def status(self) -> JobStatus:
        """The run's effective status."""
        return JobStatus(self._record()["status"])

    def terminate(self) -> None:
        """Asks the run's ``fray run`` process to stop it (SIGTERM), as Ctrl-C would."""
        record = self._record()
        if JobStatus(record["status"]).is_finished:
            return
        pid, host = record["runner"]["pid"], record["runner"]["host"]
        if _runner_alive(record) is None:
            raise FrayError(f"job {self.job_id} runs on host {host}; stop it there")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)

    def logs(self, *, follow: bool = False, include_children: bool = False) -> Iterator[str]:
        """The run's lines (with its children's, as ``[child-id] line``) in time order; with
        ``follow``, then the new ones until every run shown has finished."""
        offsets: dict[str, int] = {}
        while True:
            ids = [self.job_id, *(self.info()["children"] if include_children else ())]
            done = not follow or all(RecordedJob(self._store, i).status().is_finished for i in ids)
            fresh: list[tuple[float, str]] = []
            for one in ids:
                lines, offsets[one] = self._store.read_log(one, offsets.get(one, 0))
                prefix = "" if one == self.job_id else f"[{one}] "
                fresh += [(stamp, prefix + text) for stamp, text in lines]
            yield from (text for _, text in sorted(fresh, key=lambda line: line[0]))
            if done:
                return
            if not fresh:
                time.sleep(_POLL_S)  # another process writes the log: nothing to wait on
