"""``wait_all``: wait for many jobs, event-driven where the backend can notify."""

from __future__ import annotations

import collections
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO, cast

from fray.errors import InvalidRequestError, JobTimeoutError

if TYPE_CHECKING:
    from fray._types import JobStatus

_POLL_START_S = 0.02
_POLL_MAX_S = 1.0
_PROGRESS_EVERY_S = 0.5
_PROGRESS_AFTER_S = 1.0
#: How long one backend waits in its ``_await`` while jobs of other backends are pending too.
_SHARED_SLICE_S = 0.05


class _Ended:
    """The indexes of handles that finished, put by their done callbacks (any thread) and
    taken by ``wait_all``; what a backend's ``_await`` waits on (``wait``) besides its own
    jobs."""

    def __init__(self) -> None:
        self._indexes: collections.deque[int] = collections.deque()
        self._cond = threading.Condition()

    def put(self, index: int) -> None:
        """Handle ``index`` finished."""
        with self._cond:
            self._indexes.append(index)
            self._cond.notify_all()

    def wait(self, timeout: float | None) -> bool:
        """Waits at most ``timeout`` seconds for a finished handle; whether there is one."""
        with self._cond:
            return self._cond.wait_for(lambda: bool(self._indexes), timeout)

    def take(self) -> list[int]:
        """The indexes put since the last call."""
        with self._cond:
            taken = list(self._indexes)
            self._indexes.clear()
        return taken


class _Progress:
    """A one-line ``done/running/failed`` counter, redrawn in place on a terminal."""

    def __init__(self, enabled: bool | None, total: int, stream: TextIO) -> None:
        self._stream = stream
        self.enabled = stream.isatty() if enabled is None else enabled
        self._after = 0.0 if enabled else _PROGRESS_AFTER_S  # on a terminal: after a second
        self._total = total
        self._start = time.monotonic()
        self._last = 0.0
        self._drawn = False

    def update(self, done: int, failed: int, *, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._start < self._after and not self._drawn:
            return
        if not final and now - self._last < _PROGRESS_EVERY_S:
            return
        self._last = now
        running = self._total - done
        line = (
            f"jobs: {done}/{self._total} done, {running} running, {failed} failed "
            f"({now - self._start:.0f}s)"
        )
        self._stream.write(("\r" if self._drawn else "") + line + ("\n" if final else ""))
        self._stream.flush()
        self._drawn = not final


def _check(jobs: Any, timeout: Any, progress: Any) -> list[Any]:
    if isinstance(jobs, str | bytes) or not isinstance(jobs, Iterable):
        raise InvalidRequestError.for_field(
            "wait_all.jobs", jobs, "must be a sequence of job handles or actor futures"
        )
    handles = list(cast("Iterable[Any]", jobs))
    for handle in handles:
        if not callable(getattr(handle, "status", None)) and not callable(
            getattr(handle, "result", None)
        ):
            raise InvalidRequestError.for_field(
                "wait_all.jobs", handle, "each item must be a job handle or an actor future"
            )
    if len({hasattr(h, "status") for h in handles}) > 1:
        raise InvalidRequestError.for_field(
            "wait_all.jobs", handles, "give job handles or actor futures, not both at once"
        )
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0
    ):
        raise InvalidRequestError.for_field(
            "wait_all.timeout", timeout, "must be a number of seconds >= 0, or None"
        )
    if progress is not None and not isinstance(progress, bool):
        raise InvalidRequestError.for_field(
            "wait_all.progress", progress, "must be True, False or None"
        )
    return handles


def wait_all(
    jobs: Sequence[Any],
    *,
    timeout: float | None = None,
    raise_on_failure: bool = True,
    progress: bool | None = None,
) -> list[JobStatus]:
    """Waits until every job (handles from any backend) is finished; returns their statuses
    in input order. Handles that can notify (``add_done_callback``) are not polled. Given
    actor futures instead, it returns their results (with ``raise_on_failure`` off, a failed
    call's exception stands in its place).

    Args:
        timeout: Seconds to wait in total, or ``None`` for no limit.
        raise_on_failure: Raise as soon as any job FAILED (the others keep running);
            STOPPED is not a failure.
        progress: A ``done/running/failed`` line on stderr: ``None`` on a terminal after a
            second, ``True`` always, ``False`` never.

    Raises:
        InvalidRequestError: An argument has the wrong type or value.
        JobFailedError: A job failed and ``raise_on_failure`` is set (its own error).
        JobTimeoutError: ``timeout`` passed before every job finished.
    """
    from fray._types import JobStatus
    from fray.backend._handle import BaseJobHandle

    handles = _check(jobs, timeout, progress)
    futures = bool(handles) and not hasattr(handles[0], "status")

    total = len(handles)
    results: list[Any] = [None] * total
    pending = set(range(total))
    failed = 0
    bar = _Progress(False if futures else progress, total, sys.stderr)

    def settle(index: int) -> None:
        nonlocal failed
        handle = handles[index]
        if index not in pending:
            return
        if futures:
            if not handle.done():
                return
            try:
                results[index] = handle.result(timeout=0)
            except BaseException as exc:
                if raise_on_failure:
                    raise
                results[index] = exc
        else:
            status = results[index] = handle.status()
            if not status.is_finished:
                return
            if status is JobStatus.FAILED:
                failed += 1
                if raise_on_failure:
                    bar.update(total - len(pending) + 1, failed, final=True)
                    # The handle raises its own JobFailedError, with the cause chained.
                    handle.wait(timeout=0, raise_on_failure=True)
        pending.discard(index)

    ended = _Ended()
    polled: list[int] = []
    # Jobs of the engine's handles, by client: each client's ``_await`` is given its own,
    # so a backend that learns ends in the caller's thread (Ray) waits for all of them at once.
    by_client: dict[Any, dict[int, Any]] = {}
    for index, handle in enumerate(handles):
        add_callback = getattr(handle, "add_done_callback", None)
        if add_callback is None:
            polled.append(index)
            continue
        add_callback(lambda _h, i=index: ended.put(i))  # pyright: ignore[reportUnknownLambdaType]
        if isinstance(handle, BaseJobHandle):
            job = handle._job  # pyright: ignore[reportPrivateUsage]
            by_client.setdefault(job.client, {})[index] = job
    deadline = None if timeout is None else time.monotonic() + timeout
    interval = _POLL_START_S
    looked = False  # a timeout is only raised after one look at the jobs
    while True:
        for index in polled:
            settle(index)
        polled = [i for i in polled if i in pending]
        for index in ended.take():  # whatever finished meanwhile
            settle(index)
            for jobs_of_client in by_client.values():
                jobs_of_client.pop(index, None)
        bar.update(total - len(pending), failed)
        if not pending:
            break
        now = time.monotonic()
        if deadline is not None and now >= deadline and looked:
            bar.update(total - len(pending), failed, final=True)
            what = "actor calls" if futures else "jobs"
            unfinished = [] if futures else [handles[i].job_id for i in sorted(pending)]
            shown = ": " + ", ".join(unfinished[:5]) + (", ..." if len(unfinished) > 5 else "")
            raise JobTimeoutError(
                f"wait_all timed out after {timeout}s with {len(pending)} of {total} {what} "
                f"unfinished{shown if unfinished else ''}"
            )
        # Nothing to poll and no counter to redraw: the backends wait until a job ends (Ray
        # learns ends in this thread: one bulk wait for the whole time, not one per slice).
        wait_for = interval if polled else _PROGRESS_EVERY_S if bar.enabled else None
        if deadline is not None:
            left = max(deadline - now, 0.0)
            wait_for = left if wait_for is None else min(wait_for, left)
        looked = True
        waiting = [(c, jobs) for c, jobs in by_client.items() if jobs]
        if len(waiting) > 1:  # each backend in turn, a short slice each
            wait_for = _SHARED_SLICE_S if wait_for is None else min(wait_for, _SHARED_SLICE_S)
        woken = False
        for client, jobs_of_client in waiting:
            woken = client._await(jobs_of_client.values(), wait_for, ended) or woken  # pyright: ignore[reportPrivateUsage]
        if not waiting:
            woken = ended.wait(wait_for)
        if not woken and polled:
            interval = min(interval * 1.5, _POLL_MAX_S)
    bar.update(total, failed, final=True)
    return results
