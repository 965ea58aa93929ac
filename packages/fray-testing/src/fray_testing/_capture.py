"""Routes ``print`` output of in-process jobs into their logs.

While a job runs in-process, ``sys.stdout`` and ``sys.stderr`` are wrapped by a router that
sends text written from the job's context (a ``ContextVar``, so other threads are unaffected)
to the job, and everything else to the stream it wraps. The originals come back when the
last in-process job returns.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TextIO

__all__ = ["capture_output"]

_sink: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "fray_testing_output_sink", default=None
)


class _Router(io.TextIOBase):
    """Stands in for a standard stream while in-process jobs run."""

    def __init__(self, target: TextIO) -> None:
        self.target = target

    def write(self, text: str) -> int:  # pyright: ignore[reportIncompatibleMethodOverride]
        sink = _sink.get()
        if sink is None:
            return self.target.write(text)
        sink(text)
        return len(text)

    def flush(self) -> None:
        self.target.flush()

    def isatty(self) -> bool:
        return self.target.isatty()

    def fileno(self) -> int:
        return self.target.fileno()

    @property
    def encoding(self) -> str:  # pyright: ignore[reportIncompatibleVariableOverride]
        return getattr(self.target, "encoding", "utf-8")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


class _Routing:
    """Installs the routers for the outermost capture and removes them after it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._installed: tuple[_Router, _Router] | None = None

    def enter(self) -> None:
        with self._lock:
            if self._depth == 0:
                out, err = _Router(sys.stdout), _Router(sys.stderr)
                sys.stdout, sys.stderr = out, err
                self._installed = (out, err)
            self._depth += 1

    def leave(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth or self._installed is None:
                return
            out, err = self._installed
            self._installed = None
            # Someone may have swapped the streams meanwhile (pytest's capture does): only
            # undo what is still ours.
            if sys.stdout is out:
                sys.stdout = out.target
            if sys.stderr is err:
                sys.stderr = err.target


_routing = _Routing()


@contextlib.contextmanager
def capture_output(sink: Callable[[str], None]) -> Iterator[None]:
    """Sends what this context writes to stdout or stderr to ``sink`` instead."""
    _routing.enter()
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)
        _routing.leave()
