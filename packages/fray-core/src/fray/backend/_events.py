"""The engine's two threads, Fray's timers (one daemon thread for every deadline and delayed
call in the process) and a client's event thread (work handed off a library's own callback
thread, run in order), and what a waiting caller waits on (:class:`Wakeup`)."""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

logger = logging.getLogger("fray")


class Timers:
    """Calls functions at given times from one daemon thread, started on first use. The
    functions must not block: they run one after another."""

    def __init__(self) -> None:
        self._heap: list[list[Any]] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def call_later(self, delay: float, fn: Callable[..., None], *args: Any) -> list[Any]:
        """Calls ``fn(*args)`` after ``delay`` seconds; returns what :meth:`cancel` takes."""
        entry = [time.monotonic() + delay, next(self._seq), fn, args]
        with self._cond:
            heapq.heappush(self._heap, entry)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="fray-timers", daemon=True)
                self._thread.start()
            self._cond.notify()
        return entry

    @staticmethod
    def cancel(entry: list[Any]) -> None:
        """The call will not happen (it no longer holds its arguments either)."""
        entry[2:] = [None, ()]

    def _run(self) -> None:
        """The thread: sleeps until the earliest call is due, pops it and runs it."""
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._cond.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                _when, _seq, fn, args = heapq.heappop(self._heap)
            if fn is not None:
                try:
                    fn(*args)
                except Exception:
                    logger.exception("a timer of Fray's raised")


TIMERS = Timers()


class EventThread:
    """Calls functions one after another on one daemon thread of a client's, started on
    first use and ended by :meth:`close` once what is queued has run."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None]
        self._queue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def put(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queues ``fn(*args)``; starts the thread if it is not running."""
        self._queue.put((fn, args))
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        """The thread: runs each queued call, logging what raises, until ``close``."""
        while (item := self._queue.get()) is not None:
            try:
                item[0](*item[1])
            except Exception:
                logger.exception("a callback of Fray's raised")
            del item  # an idle thread must not keep its last job alive

    def close(self) -> None:
        """Ends the thread once what is already queued has run."""
        with self._lock:
            if self._thread is not None:
                self._queue.put(None)
                self._thread = None


class Wakeup(Protocol):
    """What :meth:`BaseClient._await` waits on: a job's record, or ``wait_all``'s list of
    finished handles."""

    def wait(self, timeout: float | None) -> bool:
        """Waits at most ``timeout`` seconds for it to be set; whether it is."""
        ...
