"""A job's output: its :class:`LogBuffer`, and the router that sends ``print`` output of
code running inside a job to that job's buffer.

The router stands in for ``sys.stdout``/``sys.stderr`` once any job output is routed; where
text goes is a context variable, so each thread (and each ``contextvars.Context``) routes on
its own and code outside any job writes straight through.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import os
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from fray.backend._record import JobRecord


_last_stamp = 0.0


def _stamp() -> float:
    """The time now, later than every stamp before it: lines of a job and of its children,
    written one after another, interleave in that order."""
    global _last_stamp
    now = time.time()
    _last_stamp = now = now if now > _last_stamp else _last_stamp + 1e-6
    return now


class LogBuffer:
    """An append-only list of timestamped lines that can be read while it grows.

    Partial writes are joined until a newline, per writing thread: the replicas of a job (and
    the readers of its processes) write at once, and one's unfinished line must not take in
    another's. :meth:`close` keeps last lines that have no newline, so nothing a job printed
    is lost. A closed buffer keeps its last :data:`KEEP_LINES` lines in memory and the rest
    in a private temporary file (removed with the buffer), so a client's history of
    finished jobs costs little memory however much they printed.
    """

    KEEP_LINES = 1_000

    __slots__ = ("__weakref__", "_lines", "_lock", "_older", "_partial", "_waiting", "closed")

    def __init__(self) -> None:
        self._lines: list[tuple[float, str]] = []
        # By thread: what it wrote after its last newline, and the prefix of its lines.
        self._partial: dict[int, tuple[str, str]] = {}
        self._lock = threading.Lock()
        # Made by the first reader that waits: most jobs' output is never followed, and a
        # Condition per job costs a job a tenth of its time in the benchmark row "trivial
        # job submit(...).wait(), one at a time".
        self._waiting: threading.Condition | None = None
        self.closed = False
        # Once closed with more than KEEP_LINES lines: the file holding the older ones, and
        # how many.
        self._older: tuple[str, int] | None = None

    def __len__(self) -> int:
        return len(self._lines) + (self._older[1] if self._older else 0)

    def write(self, text: str, prefix: str = "") -> None:
        """Adds ``text``; each line it completes becomes a line, with ``prefix`` first (a
        replica's ``[i] `` where a job has several)."""
        if not text:
            return
        me = threading.get_ident()
        with self._lock:
            pending = self._partial.pop(me, None)
            if pending:
                text = pending[0] + text
            *complete, rest = text.split("\n")
            if rest:
                self._partial[me] = (rest, prefix)
            if complete:
                now = _stamp()
                self._lines.extend((now, prefix + line) for line in complete)
                if self._waiting is not None:
                    self._waiting.notify_all()

    def close(self) -> None:
        """No more output: unfinished last lines become lines."""
        with self._lock:
            if self._partial:
                now = _stamp()
                self._lines.extend((now, prefix + rest) for rest, prefix in self._partial.values())
                self._partial.clear()
            self.closed = True
            if self._waiting is not None:
                self._waiting.notify_all()
            if len(self._lines) > self.KEEP_LINES:
                self._spill()

    def _spill(self) -> None:
        """Under the lock: moves all but the last lines to a file only this user can read."""
        older = self._lines[: -self.KEEP_LINES]
        fd, path = tempfile.mkstemp(prefix="fray-log-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape", newline="\n") as out:
            out.writelines(f"{stamp!r} {line}\n" for stamp, line in older)
        del self._lines[: -self.KEEP_LINES]
        self._older = (path, len(older))
        weakref.finalize(self, os.unlink, path)

    def snapshot(self) -> list[tuple[float, str]]:
        """The ``(time, line)`` pairs so far (read back from the file where spilled)."""
        with self._lock:
            lines, older = list(self._lines), self._older
        if older is None:
            return lines
        with open(older[0], encoding="utf-8", errors="surrogateescape", newline="\n") as spilled:
            kept = [text.rstrip("\n").split(" ", 1) for text in spilled]
        return [(float(stamp), line) for stamp, line in kept] + lines

    def wait_for_more(self, count: int, timeout: float) -> None:
        """Waits up to ``timeout`` for the buffer to hold more than ``count`` lines."""
        with self._lock:
            if len(self._lines) <= count and not self.closed:
                if self._waiting is None:
                    self._waiting = threading.Condition(self._lock)
                self._waiting.wait(timeout)


class LineSink(Protocol):
    """Where :func:`capture_into` routes a thread's output."""

    def write(self, text: str) -> None: ...


class PrefixedSink:
    """A :class:`LogBuffer` (or a job's record, which makes its log on the first write)
    seen by one replica of several: its lines start with ``[i] ``."""

    __slots__ = ("_buffer", "_prefix")

    def __init__(self, buffer: LogBuffer | JobRecord, index: int) -> None:
        self._buffer = buffer
        self._prefix = f"[{index}] "

    def write(self, text: str) -> None:
        self._buffer.write(text, self._prefix)


_route: contextvars.ContextVar[tuple[LineSink, bool] | None] = contextvars.ContextVar(
    "fray_output_route", default=None
)


# Held while a router writes to its stream: whole lines from any thread, to stdout or stderr,
# one after another.
_write_lock = threading.RLock()


class _Router(io.TextIOBase):
    """Stands in for sys.stdout/sys.stderr: writes from a job thread go to its buffer, and
    the stream beneath gets whole lines only (``print`` writes text and newline in two
    calls): a thread's unfinished line waits for its newline, or its ``flush()``."""

    def __init__(self, target: TextIO) -> None:
        self._target = target
        self._partial: dict[int, str] = {}  # by thread: what it wrote after its last newline

    def write(self, text: str) -> int:  # type: ignore[override]
        sink = _route.get()
        if sink is not None:
            sink[0].write(text)
            if not sink[1]:
                return len(text)
        elif not text:
            return 0
        elif not self._partial and text[-1] == "\n":
            # Whole lines from a thread with nothing pending (no thread has anything
            # pending, and only a thread adds its own): straight through. A Ray worker
            # writes its task-name marker to both streams before every task.
            with _write_lock:
                self._target.write(text)
            return len(text)
        self._write_lines(text)
        return len(text)

    def _write_lines(self, text: str, *, end: bool = False) -> None:
        """Writes this thread's complete lines; keeps the rest (with ``end``: completes it)."""
        me = threading.get_ident()
        with _write_lock:
            pending = self._partial.pop(me, None)
            if pending:
                text = pending + text
            if end:
                if text and not text.endswith("\n"):
                    text += "\n"
            else:
                cut = text.rfind("\n") + 1
                if cut < len(text):
                    self._partial[me] = text[cut:]
                    text = text[:cut]
            if text:
                self._target.write(text)

    def flush(self) -> None:
        with _write_lock:
            pending = self._partial.pop(threading.get_ident(), None)
            if pending:
                self._target.write(pending)
        self._target.flush()

    def isatty(self) -> bool:
        return self._target.isatty()

    def fileno(self) -> int:
        return self._target.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._target, "encoding", "utf-8")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


_install_lock = threading.Lock()


def _ensure_routers() -> None:
    with _install_lock:
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if not isinstance(stream, _Router) and stream is not None:
                setattr(sys, name, _Router(stream))


@contextlib.contextmanager
def capture_into(buffer: LineSink, echo: bool) -> Iterator[None]:
    """Context manager: in this context, route ``print`` output into ``buffer`` (and also to
    the real stream when ``echo``)."""
    previous = route_output(buffer, echo)
    try:
        yield
    finally:
        restore_output(previous)


def route_output(sink: LineSink, echo: bool) -> Any:
    """:func:`capture_into` as two calls, for hot paths: routes this thread's ``print``
    output into ``sink`` and returns what :func:`restore_output` takes to undo it."""
    if not (type(sys.stdout) is _Router and type(sys.stderr) is _Router):
        _ensure_routers()
    previous = _route.get()
    _route.set((sink, echo))
    return previous


def restore_output(previous: Any) -> None:
    """Undoes :func:`route_output` (``previous``: what it returned)."""
    current = _route.get()
    _route.set(previous)
    if current is not None and current[1]:
        # The routed code's echoed last line ends with it: this thread may next run
        # another job, whose first line must not be joined to it. Only this thread adds or
        # takes its own unfinished line, so whether it has one is read without the lock.
        me = threading.get_ident()
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, _Router) and me in stream._partial:
                stream._write_lines("", end=True)


def echo_stream() -> TextIO:
    """Where job output is echoed, a whole line per write: this process's stdout, through
    the routers (installed now if need be), so that an echoed line never lands inside a
    line that another thread of this process is printing."""
    _ensure_routers()
    return sys.stdout
