"""The deferred watch: completion callbacks for the attempts of callable jobs that nobody
has waited on for a while (see ``fray_ray._callable.CallableJob``)."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["WATCH_AFTER", "Watched", "Watcher"]

logger = logging.getLogger("fray.ray")

WATCH_AFTER = 0.5
"""Seconds an attempt nobody waits on runs before it gets completion callbacks."""


class Watched(Protocol):
    """What the watcher asks of a job."""

    done: Any  # ``done.flag``: it has ended (``fray.backend.JobRecord``)

    @property
    def job_id(self) -> str: ...

    def due(self, attempt: int) -> bool:
        """Registers the callbacks for ``attempt`` if it still needs them; returns whether
        to look again later (someone is fetching its outcome)."""
        ...

    def watch(self, attempt: int) -> None:
        """Registers the callbacks for ``attempt`` now."""
        ...


class Watcher:
    """Registers completion callbacks for attempts nobody has waited on for ``delay``
    seconds (see ``fray_ray._callable.CallableJob``): one thread per client, no polling.

    Every attempt waits the same delay, so they fall due in the order they are added. The
    queue holds one bucket per ``TICK``: the attempts added within a tick of the bucket's
    first fall due together (up to a tick early). The thread sleeps until the oldest bucket
    falls due and takes it whole (one wake-up per tick, not per job); with nothing queued it
    sleeps until :meth:`add` wakes it.

    A bucket holds job ids and attempt numbers in two lists, and ``lookup`` finds an
    unfinished job by id (a job that has ended needs no watching): adding an attempt makes
    no new object for the garbage collector to track, so the half second it waits counts
    towards no collection.
    """

    TICK = 0.05

    def __init__(self, delay: float, lookup: Callable[[str], Watched | None]) -> None:
        self.delay = delay
        self._lookup = lookup
        # (due, job ids, attempts), oldest first; changed only under _lock.
        self._queue: collections.deque[tuple[float, list[str], list[int]]] = collections.deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = False  # the thread is (about to be) asleep with nothing queued
        self._thread: threading.Thread | None = None
        self._stopped = False

    def add(self, job: Watched, attempt: int) -> None:
        due = time.monotonic() + self.delay
        with self._lock:
            queue = self._queue
            if queue and queue[-1][0] > due - self.TICK:
                _due, ids, attempts = queue[-1]
                ids.append(job.job_id)
                attempts.append(attempt)
            else:
                queue.append((due, [job.job_id], [attempt]))
            stopped = self._stopped
            if self._thread is None and not stopped:
                self._thread = threading.Thread(
                    target=self._run, name="fray-ray-watch", daemon=True
                )
                self._thread.start()
        if self._idle:
            self._wake.set()
        if stopped:  # stop() has drained the queue: nobody else will
            self._drain()

    def stop(self) -> None:
        """Watches everything still queued now, and ends the thread."""
        with self._lock:
            self._stopped = True
        self._wake.set()
        self._drain()

    def _pop(self, until: float | None) -> tuple[list[str], list[int]] | None:
        """Takes the oldest bucket if it is due by ``until`` (any bucket: ``None``)."""
        with self._lock:
            queue = self._queue
            if not queue or (until is not None and queue[0][0] > until):
                return None
            _due, ids, attempts = queue.popleft()
        return ids, attempts

    def _drain(self) -> None:
        while (bucket := self._pop(None)) is not None:
            for job_id, attempt in zip(*bucket, strict=True):
                job = self._lookup(job_id)
                if job is not None:
                    job.watch(attempt)

    def _run(self) -> None:
        while not self._stopped:
            with self._lock:
                due = self._queue[0][0] if self._queue else None
                if due is None:
                    # Announced under the lock: an add() after this sees it and wakes us.
                    self._idle = True
            if due is None:
                self._wake.wait()
                self._wake.clear()
                self._idle = False
                continue
            wait = due - time.monotonic()
            if wait > 0:
                self._wake.wait(wait)
                self._wake.clear()
                continue
            bucket = self._pop(time.monotonic())
            if bucket is not None:
                self._take(*bucket)

    def _take(self, ids: list[str], attempts: list[int]) -> None:
        """Handles the attempts of a bucket that fell due."""
        for job_id, attempt in zip(ids, attempts, strict=True):
            job = self._lookup(job_id)
            if job is None or job.done.flag:
                continue
            if self._stopped:  # stop() watches everything at once; this bucket is ours
                job.watch(attempt)
                continue
            try:
                again = job.due(attempt)
            except Exception:  # a bug here must not stop the watching of other jobs
                logger.exception("watching job %s failed", job.job_id)
                continue
            if again:
                self.add(job, attempt)
