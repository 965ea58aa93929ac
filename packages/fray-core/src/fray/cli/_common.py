"""Shared pieces of the ``fray`` command line: errors, output, progress and client choice."""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from fray.environment_variables import FRAY_CLIENT_SPEC
from fray.errors import FrayError

__all__ = [
    "CliError",
    "Progress",
    "UsageError",
    "choose_spec",
    "format_duration",
    "format_time",
    "print_json",
    "print_table",
]


class UsageError(Exception):
    """A bad command-line argument: exit code 2, naming the argument and what is allowed."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"argument {argument}: {message}")
        self.argument = argument


class CliError(Exception):
    """A failure to report as one line plus an optional hint (exit code 1 by default)."""

    def __init__(self, message: str, *, hint: str | None = None, code: int = 1) -> None:
        super().__init__(message)
        self.hint = hint
        self.code = code


def choose_spec(explicit: str | None) -> tuple[str | None, str]:
    """Which backend a command talks to, and why.

    ``--spec`` wins, then ``FRAY_CLIENT_SPEC``; inside an Iris job ``None`` is returned (use
    ``current_client()``, which keeps the job's own Iris context); otherwise ``local``.
    """
    if explicit is not None:
        if not explicit.strip():
            raise UsageError("--spec", "must not be empty; e.g. local, ray, iris://host:port")
        return explicit, f"--spec {explicit}"
    env = os.environ.get(FRAY_CLIENT_SPEC, "").strip()
    if env:
        return env, f"{FRAY_CLIENT_SPEC}={env!r}"
    if os.environ.get("IRIS_CONTROLLER_ADDRESS") and os.environ.get("IRIS_TASK_ID"):
        return None, "inside an Iris job"
    return "local", "the default (no --spec, no FRAY_CLIENT_SPEC)"


def print_json(value: Any, out: TextIO | None = None) -> None:
    """Writes ``value`` as indented JSON and a newline."""
    stream = out or sys.stdout
    stream.write(json.dumps(value, indent=2, sort_keys=False, default=str) + "\n")
    stream.flush()


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO | None = None
) -> None:
    """Writes rows as aligned columns under ``headers``."""
    stream = out or sys.stdout
    cells = [
        [str(h) for h in headers],
        *[["" if c is None else str(c) for c in row] for row in rows],
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        stream.write(line.rstrip() + "\n")
    stream.flush()


def format_time(stamp: float | None) -> str:
    """A Unix time as local ``YYYY-MM-DD HH:MM:SS``, or ``-``."""
    if not stamp:
        return "-"
    return datetime.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S")


def format_duration(seconds: float | None) -> str:
    """``3.2s``, ``4m05s`` or ``2h03m``; ``-`` when unknown."""
    if seconds is None or seconds < 0:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def is_tty(stream: TextIO) -> bool:
    """Whether ``stream`` is an interactive terminal."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """A status line redrawn in place on a terminal; silent when the stream is piped."""

    def __init__(self, stream: TextIO | None = None, *, every: float = 0.5) -> None:
        self._stream = stream or sys.stderr
        self._enabled = is_tty(self._stream)
        self._every = every
        self._last = 0.0
        self._width = 0
        self.start = time.monotonic()

    @property
    def enabled(self) -> bool:
        """Whether anything is drawn."""
        return self._enabled

    def show(self, text: str, *, force: bool = False) -> None:
        """Redraws the line (at most every ``every`` seconds unless ``force``)."""
        if not self._enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < self._every:
            return
        self._last = now
        line = f"{text} ({now - self.start:.0f}s)"
        pad = max(self._width - len(line), 0)
        self._stream.write("\r" + line + " " * pad)
        self._stream.flush()
        self._width = len(line)

    def done(self, text: str | None = None) -> None:
        """Ends the line: replaces it with ``text`` (if given) and a newline."""
        if not self._enabled:
            return
        if text is None and not self._width:
            return
        line = text or ""
        pad = max(self._width - len(line), 0)
        self._stream.write("\r" + line + " " * pad + "\n")
        self._stream.flush()
        self._width = 0


def counts_line(statuses: Sequence[Any], total: int) -> str:
    """``jobs: 2/5 done, 3 running, 1 failed`` from a list of JobStatus values."""
    done = sum(1 for s in statuses if s.is_finished)
    failed = sum(1 for s in statuses if s.value == "failed")
    return f"jobs: {done}/{total} done, {total - done} running, {failed} failed"


def fray_error_hint(err: FrayError) -> str | None:
    """A next step for common errors."""
    from fray.errors import BackendUnavailableError, InvalidRequestError, JobNotFoundError

    if isinstance(err, JobNotFoundError):
        return "'fray jobs list' shows the known jobs"
    if isinstance(err, BackendUnavailableError):
        return "'fray doctor' lists the installed backends"
    if isinstance(err, InvalidRequestError) and err.field and FRAY_CLIENT_SPEC in err.field:
        return f"check {FRAY_CLIENT_SPEC}; 'fray doctor' shows what is configured"
    if isinstance(err, InvalidRequestError) and err.field == "--spec":
        return "'fray doctor' lists the installed backends"
    return None
