"""The deferred watch (``fray_ray._watcher.Watcher``) on its own: no Ray needed, the jobs are
stand-ins that record what the watcher asks of them."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from fray_ray._watcher import Watcher

DELAY = 0.05
WAIT = 10.0  # generous: the machine may be busy; every wait below ends on an event


@dataclass
class _Done:
    flag: bool = False


@dataclass
class StandInJob:
    """Answers ``due`` like a CallableJob: ``busy`` times "someone is fetching it, look
    again", then registers its callbacks (``watched``)."""

    job_id: str
    busy: int = 0
    done: _Done = field(default_factory=_Done)
    asked: list[int] = field(default_factory=list)
    watched: list[int] = field(default_factory=list)
    event: threading.Event = field(default_factory=threading.Event)
    added_at: float = 0.0
    watched_at: float = 0.0

    def due(self, attempt: int) -> bool:
        self.asked.append(attempt)
        if self.busy:
            self.busy -= 1
            return True
        self.watch(attempt)
        return False

    def watch(self, attempt: int) -> None:
        self.watched.append(attempt)
        self.watched_at = time.monotonic()
        self.event.set()


# The unfinished jobs by id, as the client's history keeps them: the watcher's queue holds
# ids and looks each one up when it falls due.
_running: dict[str, StandInJob] = {}


def _new_watcher(delay: float) -> Watcher:
    _running.clear()
    return Watcher(delay, _running.get)  # pyright: ignore[reportArgumentType]


def _add(watcher: Watcher, job: StandInJob, attempt: int = 1) -> None:
    job.added_at = time.monotonic()
    _running[job.job_id] = job
    watcher.add(job, attempt)  # pyright: ignore[reportArgumentType]


@pytest.fixture
def watcher() -> Iterator[Watcher]:
    watcher = _new_watcher(DELAY)
    yield watcher
    watcher.stop()


def test_an_attempt_is_watched_once_its_delay_has_passed() -> None:
    delay = 0.3
    watcher = _new_watcher(delay)
    try:
        jobs = [StandInJob(f"job-{i}") for i in range(5)]
        for job in jobs:
            _add(watcher, job)
        for job in jobs:
            assert job.event.wait(WAIT), f"{job.job_id} was never watched"
            assert job.watched == [1]
            # Not before its delay (attempts due within one tick are taken together).
            assert job.watched_at - job.added_at >= delay - Watcher.TICK
    finally:
        watcher.stop()


def test_an_attempt_someone_is_fetching_is_looked_at_again_later(watcher: Watcher) -> None:
    job = StandInJob("busy", busy=2)
    _add(watcher, job)
    assert job.event.wait(WAIT)
    assert job.asked == [1, 1, 1]
    assert job.watched == [1]


def test_a_finished_job_is_skipped(watcher: Watcher) -> None:
    finished = StandInJob("finished")
    finished.done.flag = True
    marker = StandInJob("after-it")
    _add(watcher, finished)
    _add(watcher, marker)
    assert marker.event.wait(WAIT)
    assert finished.asked == [] and finished.watched == []


def test_a_job_that_left_the_running_jobs_is_skipped(watcher: Watcher) -> None:
    gone = StandInJob("gone")
    marker = StandInJob("after-it")
    _add(watcher, gone)
    _add(watcher, marker)
    del _running["gone"]  # it ended: the client no longer counts it as running
    assert marker.event.wait(WAIT)
    assert gone.asked == [] and gone.watched == []


def test_the_watcher_sleeps_when_empty_and_wakes_for_a_new_attempt(watcher: Watcher) -> None:
    first = StandInJob("first")
    _add(watcher, first)
    assert first.event.wait(WAIT)
    thread: Any = watcher._thread  # pyright: ignore[reportPrivateUsage]
    assert thread is not None and thread.is_alive()
    second = StandInJob("second")
    _add(watcher, second)  # the thread is asleep with nothing queued: add() wakes it
    assert second.event.wait(WAIT)


def test_stop_watches_what_is_queued_and_later_adds_at_once() -> None:
    watcher = _new_watcher(3600.0)  # nothing would fall due during the test
    queued = [StandInJob(f"queued-{i}") for i in range(3)]
    for job in queued:
        _add(watcher, job)
    watcher.stop()
    assert [job.watched for job in queued] == [[1], [1], [1]]
    late = StandInJob("late")
    _add(watcher, late, attempt=2)
    assert late.watched == [2]
    thread: Any = watcher._thread  # pyright: ignore[reportPrivateUsage]
    thread.join(WAIT)
    assert not thread.is_alive()
