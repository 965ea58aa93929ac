"""Fetching the outcomes of callable jobs in the thread that waits for them.

Whoever waits for a job fetches its outcome: one blocking Ray call until a first ref is
ready, then everything else that is ready, fetched together (``wait_all`` waits for many
jobs in one such loop). A job whose refs are all being settled elsewhere (a failure, a retry
being started) is waited for on :class:`Progress`, which every retry and every end moves on.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

from fray import JobStatus
from fray_ray._worker import Outcome

__all__ = ["BATCH_LIMIT", "SPAN", "Driven", "Progress", "drive_jobs"]


class Progress:
    """That a callable job of a client started an attempt after its first (a retry) or
    ended: ``generation`` counts both, ``retries`` the retries (new attempts have new refs
    to fetch)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._waiters = 0
        self.generation = 0
        self.retries = 0

    def notify(self, *, retry: bool = False) -> None:
        """Called when a callable job starts a new attempt after its first (``retry``) or
        ends."""
        with self._cond:
            self.generation += 1
            if retry:
                self.retries += 1
            if self._waiters:
                self._cond.notify_all()

    def wait(self, generation: int, timeout: float | None) -> None:
        """Waits until some job started an attempt or ended after ``generation``."""
        with self._cond:
            self._waiters += 1
            try:
                self._cond.wait_for(lambda: self.generation != generation, timeout)
            finally:
                self._waiters -= 1


class Driven(Protocol):
    """What driving asks of a callable job (``fray_ray._callable.CallableJob``)."""

    done: Any  # ``done.flag``: it has ended (``fray.backend.JobRecord``)

    @property
    def status(self) -> JobStatus: ...

    def pending_into(self, owners: dict[Any, Any], places: dict[Any, int]) -> int:
        """Adds the refs of the current attempt that have no outcome yet; returns how many."""
        ...

    def replica_done(self, attempt: int, index: int, result: Any) -> None:
        """Records what a replica's task returned."""
        ...


def drive_jobs(
    jobs: Sequence[Driven],
    progress: Progress,
    deadline: float | None,
    *,
    until_all: bool,
    fail_fast: bool = False,
) -> None:
    """Fetches the outcomes of ``jobs`` in the calling thread, batched: one blocking Ray
    call until a first ref is ready, then everything else that is ready, fetched together.

    Returns at ``deadline``, or once every job is done (``until_all``) or any is, or (with
    ``fail_fast``) once any has failed.
    """
    import ray

    open_jobs = {job for job in jobs if not job.done.flag}
    if not until_all and len(open_jobs) < len(jobs):
        return
    owners: dict[Any, Driven] = {}  # the refs to fetch, and their jobs
    places: dict[Any, int] = {}  # their attempts and replicas (see ``pending_into``)
    left: dict[Driven, int] = {}  # refs in ``owners`` per job
    # Jobs with no ref left to fetch but not done are being settled elsewhere (a failure,
    # a retry being started): nothing Ray can tell us about them.
    settling: set[Driven] = set()
    scanned = None
    flowing = False  # the last call found refs ready
    while open_jobs:
        # Read before looking at the jobs: a job that ends after the look changes it, so
        # the wait below cannot miss that end.
        generation = progress.generation
        ended = [job for job in settling if job.done.flag]
        if ended:
            settling.difference_update(ended)
            open_jobs.difference_update(ended)
            if _stop(ended, until_all, fail_fast) or not open_jobs:
                return
        if scanned != progress.retries:  # new attempts have new refs
            scanned = progress.retries
            owners.clear()
            places.clear()
            left.clear()
            settling.clear()
            for job in open_jobs:
                count = job.pending_into(owners, places)
                left[job] = count
                if not count:
                    settling.add(job)
            if any(job.done.flag for job in settling):
                continue  # ended before the generation was read: the look above takes it
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        if not owners:
            progress.wait(generation, remaining)
        else:
            limit = remaining
            if settling:  # look again soon
                limit = _SETTLE_LOOK if remaining is None else min(remaining, _SETTLE_LOOK)
            refs = list(owners)
            # With many jobs in flight, completions are let gather for a moment: one call
            # per batch instead of one per job (each call costs in proportion to refs; when
            # the last one is ready it returns at once). While they keep coming, one call
            # does it; after a lull, a first call blocks until one is ready.
            many = len(refs) > _LINGER_FROM
            if flowing and many:
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=_linger(deadline))
            else:
                ready, rest = ray.wait(refs, num_returns=1, timeout=limit)
                if ready and many:
                    more, _ = ray.wait(rest, num_returns=len(rest), timeout=_linger(deadline))
                    ready += more
            flowing = bool(ready)
            ended = []
            for ref, result in zip(ready, _fetch(ready), strict=True):
                job = owners.pop(ref)
                attempt, index = divmod(places.pop(ref), SPAN)
                job.replica_done(attempt, index, result)
                left[job] -= 1
                if job.done.flag:
                    if job in open_jobs:
                        open_jobs.discard(job)
                        ended.append(job)
                elif left[job] == 0:  # its last ref: the rest happens elsewhere
                    settling.add(job)
            if ended and _stop(ended, until_all, fail_fast):
                return
        if deadline is not None and time.monotonic() >= deadline:
            return


def _linger(deadline: float | None) -> float:
    """How long completions may gather: ``_LINGER``, never past ``deadline``."""
    return _LINGER if deadline is None else min(_LINGER, max(deadline - time.monotonic(), 0.0))


def _stop(ended: list[Driven], until_all: bool, fail_fast: bool) -> bool:
    if not until_all:
        return True
    return fail_fast and any(job.status is JobStatus.FAILED for job in ended)


def _fetch(refs: list[Any]) -> list[Any]:
    """What the tasks of ready refs returned (see ``Driven.replica_done``): one Ray
    call for all; a Ray error becomes that replica's ``ray-error`` outcome."""
    import ray

    if not refs:
        return []
    try:
        return ray.get(refs)
    except Exception:  # a Ray error in one of them (never the user's: that is a value)
        results: list[Any] = []
        for ref in refs:
            try:
                results.append(ray.get(ref))
            except Exception as exc:
                results.append(Outcome("ray-error", exc))
        return results


_SETTLE_LOOK = 0.05
SPAN = 1 << 32
"""More replicas than a job can have: ``places`` values are ``attempt * SPAN + index``."""
_LINGER = 0.05
_LINGER_FROM = 16
BATCH_LIMIT = 512
"""``wait_all`` over more jobs than this uses completion callbacks: a batched wait costs time
in proportion to the jobs still running, each time one ends."""
