"""Records of local runs, so that ``fray jobs`` in a later process can see them.

A local ``fray run`` is its own job runner: it records the run under the state directory
(``FRAY_STATE_DIR``, default ``$XDG_STATE_HOME/fray`` or ``~/.local/state/fray``), one folder
per run::

    <state dir>/runs/<job id, '/' written as '+'>/record.json   what ran, status, runner pid
    <state dir>/runs/<job id>/log                               "<unix time> <line>" per line

The directory may be an fsspec URL (``gs://bucket/fray-state``). On the local disk every
folder Fray creates is 0700 and every file 0600, written atomically (temp file, then rename),
so a reader never sees half a record. Values of env vars whose names look secret are stored
as ``***``, and the log holds the job's output with those values masked.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from fray._types import JobStatus, is_secret_name, redact_env
from fray.environment_variables import FRAY_STATE_DIR
from fray.errors import FrayError, JobNotFoundError

__all__ = [
    "RECORD_VERSION",
    "LogSink",
    "Masker",
    "StateStore",
    "default_state_dir",
    "effective_status",
    "process_start_ticks",
    "runner_alive",
]

RECORD_VERSION = 1
_RUNS = "runs"
_RECORD = "record.json"
_LOG = "log"
_MIN_SECRET_LEN = 4


def default_state_dir() -> str:
    """``FRAY_STATE_DIR`` if set, else ``$XDG_STATE_HOME/fray`` or ``~/.local/state/fray``."""
    configured = os.environ.get(FRAY_STATE_DIR, "").strip()
    if configured:
        return configured
    base = os.environ.get("XDG_STATE_HOME", "").strip()
    if not base:
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "fray")


def _dir_name(job_id: str) -> str:
    return job_id.replace("/", "+")


# ---------------------------------------------------------------------------------------------
# Secrets


class Masker:
    """Replaces the values of secret-looking env vars in text with ``***``.

    Values shorter than four characters are left alone: masking ``1`` or ``yes`` everywhere
    would garble output and protect nothing.
    """

    def __init__(self, envs: Iterable[Mapping[str, str]]) -> None:
        values: set[str] = set()
        for env in envs:
            for name, value in env.items():
                if is_secret_name(name) and len(value) >= _MIN_SECRET_LEN:
                    values.add(value)
        self._values = sorted(values, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, "***")
        return text


# ---------------------------------------------------------------------------------------------
# Runner liveness


def process_start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or ``None`` if unknown.

    Recorded next to a pid so that a recycled pid is not mistaken for the runner.
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def runner_alive(record: Mapping[str, Any]) -> bool | None:
    """Whether the ``fray run`` process of a record still runs (``None``: another host)."""
    runner: Mapping[str, Any] = record.get("runner") or {}
    pid = runner.get("pid")
    if not isinstance(pid, int):
        return False
    if runner.get("host") != socket.gethostname():
        return None
    if not _pid_alive(pid):
        return False
    started = runner.get("start_ticks")
    if isinstance(started, int):
        now = process_start_ticks(pid)
        if now is not None and now != started:
            return False  # the pid was reused by another process
    return True


def effective_status(record: Mapping[str, Any]) -> tuple[JobStatus, str | None]:
    """The record's status and error, accounting for a runner that died without a word.

    A run whose record says it is still going, but whose runner process on this host is gone,
    is reported FAILED (its job died with the runner: local jobs never outlive it).
    """
    try:
        status = JobStatus(record.get("status", "failed"))
    except ValueError:
        status = JobStatus.FAILED
    error = record.get("error")
    if not status.is_finished and runner_alive(record) is False:
        runner: Mapping[str, Any] = record.get("runner") or {}
        pid = runner.get("pid")
        return JobStatus.FAILED, (
            f"the 'fray run' process (pid {pid}) ended without recording a result "
            "(it was killed); its job ended with it"
        )
    return status, error if isinstance(error, str) else None


# ---------------------------------------------------------------------------------------------
# The store


class StateStore:
    """The state directory: run records and their logs.

    Args:
        url: A local path or an fsspec URL; ``None`` for :func:`default_state_dir`.
    """

    def __init__(self, url: str | None = None) -> None:
        import fsspec
        from fsspec.implementations.local import LocalFileSystem

        self.url = url or default_state_dir()
        try:
            fs, path = fsspec.core.url_to_fs(self.url)  # pyright: ignore[reportUnknownVariableType]
        except (ValueError, ImportError) as err:
            raise FrayError(
                f"{FRAY_STATE_DIR}={self.url!r} cannot be opened: {err}. Use a local path or "
                "an fsspec URL whose filesystem package is installed (e.g. gcsfs for gs://)"
            ) from err
        self.fs: Any = fs
        self.is_local = isinstance(fs, LocalFileSystem)
        where = str(path)  # pyright: ignore[reportUnknownArgumentType]
        self.root: str = os.path.abspath(where) if self.is_local else where.rstrip("/")

    # -- paths -------------------------------------------------------------------------------

    def _join(self, *parts: str) -> str:
        if self.is_local:
            return os.path.join(self.root, *parts)
        return "/".join([self.root, *parts])

    def run_dir(self, job_id: str) -> str:
        """Where a run's files live."""
        return self._join(_RUNS, _dir_name(job_id))

    def record_path(self, job_id: str) -> str:
        """The run's ``record.json``."""
        return self._join(_RUNS, _dir_name(job_id), _RECORD)

    def log_path(self, job_id: str) -> str:
        """The run's log file."""
        return self._join(_RUNS, _dir_name(job_id), _LOG)

    # -- writing -----------------------------------------------------------------------------

    def _ensure_private_dir(self, path: str) -> None:
        if not self.is_local:
            return  # object stores have no folders or modes; access is the bucket's policy
        if not os.path.isdir(self.root):
            os.makedirs(self.root, mode=0o700, exist_ok=True)
            with contextlib.suppress(OSError):
                os.chmod(self.root, 0o700)
        runs = os.path.join(self.root, _RUNS)
        for folder in (runs, path):
            if folder == self.root:
                continue
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, 0o700)
            os.chmod(folder, 0o700)

    def prepare(self) -> None:
        """Creates the state directory (0700) if needed.

        Raises:
            OSError: It cannot be created or written.
        """
        if not self.is_local:
            self.fs.makedirs(self._join(_RUNS), exist_ok=True)
            return
        runs = self._join(_RUNS)
        self._ensure_private_dir(runs)
        if not os.access(runs, os.W_OK | os.X_OK):
            raise PermissionError(f"{runs} is not writable")

    def write_record(self, record: Mapping[str, Any]) -> None:
        """Writes (replaces) a run's record atomically."""
        job_id = str(record["job_id"])
        self._ensure_private_dir(self.run_dir(job_id))
        data = json.dumps(record, indent=1, sort_keys=True).encode()
        path = self.record_path(job_id)
        if self.is_local:
            tmp = f"{path}.tmp-{os.getpid()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        else:
            self.fs.pipe_file(path, data)

    def open_log(self, job_id: str) -> LogSink:
        """A writer for the run's log."""
        self._ensure_private_dir(self.run_dir(job_id))
        return LogSink(self, self.log_path(job_id))

    # -- reading -----------------------------------------------------------------------------

    def read_record(self, job_id: str) -> dict[str, Any]:
        """A run's record.

        Raises:
            JobNotFoundError: No record for that id.
        """
        try:
            data = self.fs.cat_file(self.record_path(job_id))
        except (FileNotFoundError, NotADirectoryError):
            raise JobNotFoundError(job_id, f"no recorded run with id {job_id!r}") from None
        try:
            record = json.loads(data)
        except ValueError as err:
            raise FrayError(f"the record of run {job_id!r} is damaged: {err}") from err
        if not isinstance(record, dict):
            raise FrayError(f"the record of run {job_id!r} is damaged: not a JSON object")
        return dict(record)  # pyright: ignore[reportUnknownArgumentType]

    def list_records(self) -> list[dict[str, Any]]:
        """Every readable record, oldest submission first."""
        runs = self._join(_RUNS)
        try:
            entries: list[str] = self.fs.ls(runs, detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        records: list[dict[str, Any]] = []
        for entry in entries:
            name = str(entry).rstrip("/").rsplit("/", 1)[-1]
            try:
                records.append(self.read_record(name.replace("+", "/")))
            except FrayError:
                continue  # a run being created, or a stray folder
        records.sort(key=lambda r: (r.get("submitted_at") or 0.0, str(r.get("job_id"))))
        return records

    def find(self, ident: str) -> dict[str, Any]:
        """The record whose id is ``ident``, or whose id starts with it, or whose name it is.

        Raises:
            JobNotFoundError: Nothing matches, or several runs do (the message lists them).
        """
        with contextlib.suppress(JobNotFoundError):
            return self.read_record(ident)
        records = self.list_records()
        matches = [r for r in records if str(r.get("job_id", "")).startswith(ident)]
        if not matches:
            matches = [r for r in records if r.get("name") == ident]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise JobNotFoundError(ident, f"no recorded run matches {ident!r}")
        shown = ", ".join(str(r.get("job_id")) for r in matches[:5])
        more = f" and {len(matches) - 5} more" if len(matches) > 5 else ""
        raise JobNotFoundError(
            ident, f"{ident!r} matches {len(matches)} runs ({shown}{more}); give the full id"
        )

    def read_log(self, job_id: str, offset: int = 0) -> tuple[list[tuple[float, str]], int]:
        """Complete log lines from byte ``offset`` on, and the offset after the last one."""
        try:
            if self.is_local:
                with open(self.log_path(job_id), "rb") as f:
                    f.seek(offset)
                    data = f.read()
            else:
                data = self.fs.cat_file(self.log_path(job_id))[offset:]
        except FileNotFoundError:
            return [], offset
        end = data.rfind(b"\n")
        if end < 0:
            return [], offset
        lines: list[tuple[float, str]] = []
        for raw in data[: end + 1].decode("utf-8", errors="replace").splitlines():
            stamp, _, text = raw.partition(" ")
            try:
                lines.append((float(stamp), text))
            except ValueError:
                lines.append((0.0, raw))
        return lines, offset + end + 1

    def follow_log(
        self,
        job_id: str,
        *,
        poll_max: float = 0.5,
        finished: Any = None,
    ) -> Iterator[tuple[float, str]]:
        """Yields log lines, then new ones as they are written, until the run has finished."""
        offset = 0
        delay = 0.02
        while True:
            lines, offset = self.read_log(job_id, offset)
            yield from lines
            if lines:
                delay = 0.02
                continue
            done = finished() if finished is not None else self._finished(job_id)
            if done:
                lines, offset = self.read_log(job_id, offset)
                yield from lines
                return
            time.sleep(delay)  # polling a file written by another process
            delay = min(delay * 1.5, poll_max)

    def _finished(self, job_id: str) -> bool:
        try:
            record = self.read_record(job_id)
        except FrayError:
            return True
        return effective_status(record)[0].is_finished

    def describe(self) -> str:
        """The state directory as shown to users."""
        return self.root if self.is_local else self.url


class LogSink:
    """Appends timestamped lines to a run's log.

    On the local disk each line is appended as it comes (0600 file). On an object store,
    which cannot append, the whole log is rewritten at most every two seconds and at close.
    """

    _REMOTE_FLUSH_S = 2.0

    def __init__(self, store: StateStore, path: str) -> None:
        self._store = store
        self._path = path
        self._fd: int | None = None
        self._buffer: list[bytes] = []
        self._dirty = False
        self._last_flush = 0.0
        if store.is_local:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)

    def write(self, line: str, stamp: float | None = None) -> None:
        """Records one line of output (without its newline)."""
        data = f"{time.time() if stamp is None else stamp:.6f} {line}\n".encode(
            "utf-8", errors="replace"
        )
        if self._fd is not None:
            os.write(self._fd, data)
            return
        self._buffer.append(data)
        self._dirty = True
        if time.monotonic() - self._last_flush >= self._REMOTE_FLUSH_S:
            self.flush()

    def flush(self) -> None:
        """Pushes buffered lines to an object store."""
        if self._fd is None and self._dirty:
            self._store.fs.pipe_file(self._path, b"".join(self._buffer))
            self._dirty = False
            self._last_flush = time.monotonic()

    def close(self) -> None:
        """Flushes and closes."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        else:
            self.flush()


def redacted_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` as it may be recorded or shown: secret-looking values replaced by ``***``."""
    return redact_env(env)
