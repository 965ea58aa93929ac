"""The router that sends ``print`` output of code running inside a job to that job's
buffer (a :class:`fray.backend.LogBuffer`).

The router stands in for ``sys.stdout``/``sys.stderr`` once any job output is routed; where
text goes is a context variable, so each thread (and each ``contextvars.Context``) routes on
its own and code outside any job writes straight through.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from fray.backend._record import LogBuffer


class LineSink(Protocol):
    """Where :func:`capture_into` routes a thread's output."""

    def write(self, text: str) -> None: ...


class PrefixedSink:
    """A :class:`LogBuffer` seen by one replica of several: its lines start with ``[i] ``."""

    __slots__ = ("_buffer", "_prefix")

    def __init__(self, buffer: LogBuffer, index: int) -> None:
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
