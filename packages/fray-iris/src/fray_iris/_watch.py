# pyright: standard
"""Done-callbacks of Iris jobs, with one thread per connection rather than one per job.

Iris does not notify: someone must ask. While any job of a session has callbacks, one
thread asks the controller for the states of all of them in one call, with the same
backoff as a waiter, and brings each job that has ended up to date, which runs its
callbacks (``fray.wait_all`` over a thousand jobs is one call per round, not a thousand
threads).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from iris.cluster.types import is_job_finished

from fray.errors import FrayError
from fray_iris._convert import translate_errors
from fray_iris._session import backoff

if TYPE_CHECKING:
    from fray_iris._jobs import IrisJob

__all__ = ["DoneWatcher"]

logger = logging.getLogger("fray.iris")


class DoneWatcher:
    """Watches a session's jobs that have done-callbacks; its thread runs while there are
    any."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._cond = threading.Condition()
        self._jobs: dict[int, IrisJob] = {}
        self._running = False
        self._fresh = False

    def watch(self, job: IrisJob) -> None:
        """Watches ``job`` until it has ended (its record then runs the callbacks)."""
        with self._cond:
            self._jobs[id(job)] = job
            self._fresh = True  # a new job: look soon
            if not self._running:
                self._running = True
                threading.Thread(target=self._run, name="fray-iris-watch", daemon=True).start()

    def _run(self) -> None:
        delays = backoff()
        while True:
            with self._cond:
                self._jobs = {key: job for key, job in self._jobs.items() if not job.ended}
                if not self._jobs:
                    self._running = False
                    return
                if self._fresh:
                    self._fresh = False
                    delays = backoff()
                jobs = list(self._jobs.values())
                self._cond.wait(next(delays))
            self._look(jobs)

    def _look(self, jobs: list[IrisJob]) -> None:
        try:
            with translate_errors("status of jobs with done-callbacks"):
                states = self._session.states([job.wire for job in jobs])
        except FrayError as exc:
            logger.debug("watching jobs failed: %s", exc)
            for job in jobs:  # their waiters look for themselves, and see the error
                self._release(job)
            return
        for job in jobs:
            state = states.get(job.wire_id)
            try:
                if state is None:
                    job.refresh()  # raises JobNotFoundError for a job the controller forgot
                elif is_job_finished(state):
                    job.settle(state)
            except FrayError as exc:
                logger.debug("watching job %s failed: %s", job.job_id, exc)
                self._release(job)

    def _release(self, job: IrisJob) -> None:
        """Stops watching a job that cannot be watched (the controller is gone, or forgot
        it) and runs its callbacks now, though it has not ended: whoever waits for it must
        look, and sees why."""
        with self._cond:
            self._jobs.pop(id(job), None)
        with job.lock:
            callbacks, job.callbacks = job.callbacks, ()
        for callback in callbacks:
            try:
                callback()
            except Exception:
                logger.exception("a done-callback of job %s raised", job.job_id)
