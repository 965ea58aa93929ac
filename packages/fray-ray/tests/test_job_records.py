"""A callable job's record on its own (no Ray): a stand-in for the client's book, and the
outcomes a waiting thread would fetch handed in directly."""

from __future__ import annotations

import concurrent.futures
import gc
from typing import Any

from fray import Entrypoint, JobRequest, JobStatus, ResourceConfig
from fray_ray._callable import CallableJob
from fray_ray._handles import RayJobHandle
from fray_ray._worker import Outcome


def noop() -> int:
    return 1


REQUEST = JobRequest(
    name="noop", entrypoint=Entrypoint.from_callable(noop), resources=ResourceConfig(ram="0")
)
PREPARED: tuple[Any, tuple[tuple[str, str], ...], bytes] = (None, (), b"")


class StandInProgress:
    def notify(self, *, retry: bool = False) -> None:
        pass


class StandInBook:
    """What a job asks of its client's book when it ends."""

    mirrors = False

    def __init__(self) -> None:
        self.finished: list[str] = []
        self.progress = StandInProgress()
        self.on_finished: Any = None

    def job_finished(self, job: Any) -> None:
        self.finished.append(job.job_id)
        if self.on_finished is not None:
            self.on_finished(job)


class StandInRef:
    """A Ray object ref: its future completes when the test says so."""

    def __init__(self) -> None:
        self.completion: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def future(self) -> concurrent.futures.Future[Any]:
        return self.completion


def _running_job(book: StandInBook, job_id: str, ref: Any = None) -> CallableJob:
    """A lone replica's job whose first attempt is running."""
    first = StandInRef() if ref is None else ref
    return CallableJob(book, job_id, REQUEST, None, PREPARED, first=first)  # pyright: ignore[reportArgumentType]


def _own_tracked(job: CallableJob) -> set[int]:
    """The objects a record refers to that the garbage collector tracks."""
    return {id(o) for o in gc.get_referents(job) if gc.is_tracked(o)}


def test_a_finished_record_holds_no_tracked_object_of_its_own() -> None:
    # A client keeps thousands of finished records; each tracked object one holds is more
    # work for every garbage collection of the driver. Once finished, what a record
    # refers to is shared by every record (book, request, status, done flag, lock).
    book = StandInBook()
    first, second = _running_job(book, "noop-1"), _running_job(book, "noop-2")
    assert _own_tracked(first) != _own_tracked(second)  # running: a lock, a ref list, ...
    first.replica_done(1, 0, 41)
    second.replica_done(1, 0, Outcome("ok", 42, ["a line"]))
    assert book.finished == ["noop-1", "noop-2"]
    assert (RayJobHandle(first).result(), RayJobHandle(second).result()) == (41, 42)
    assert list(RayJobHandle(second).logs()) == ["a line"]
    shared = _own_tracked(first) & _own_tracked(second)
    assert _own_tracked(first) - shared == set()
    # The second's output lines are its own: a list of strings is all it holds.
    assert _own_tracked(second) - shared == {id(second.lines)}


def test_a_callback_added_while_the_job_is_ending_still_runs() -> None:
    # A job ends in steps: its final status is recorded under its lock (the callbacks
    # registered so far taken), then, outside the lock, its book hears of it, it is marked
    # done and those callbacks run. A callback added in between runs too (at once).
    book = StandInBook()
    job = _running_job(book, "noop-1")
    handle = RayJobHandle(job)
    seen: list[Any] = []
    book.on_finished = lambda _job: handle.add_done_callback(lambda h: seen.append(("late", h)))
    handle.add_done_callback(lambda h: seen.append(("early", h)))
    job.replica_done(1, 0, 1)
    handle.add_done_callback(lambda h: seen.append(("after", h)))
    assert seen == [("late", handle), ("early", handle), ("after", handle)]


def test_callbacks_added_while_running_run_once_each_when_it_ends() -> None:
    book = StandInBook()
    ref = StandInRef()
    job = _running_job(book, "noop-1", ref)
    handle = RayJobHandle(job)
    seen: list[str] = []
    handle.add_done_callback(lambda h: seen.append("a"))  # the attempt gets watched at once
    handle.add_done_callback(lambda h: seen.append("b"))
    assert seen == []
    ref.completion.set_result(7)  # Ray's completion callback
    job.replica_done(1, 0, 8)  # a late second answer
    assert seen == ["a", "b"]
    assert handle.result() == 7 and handle.status() is JobStatus.SUCCEEDED


def test_a_thread_blocking_on_a_job_wakes_when_it_ends() -> None:
    # ``done`` is one shared object until a thread blocks: that thread gets a per-job one,
    # which the job's end must set.
    book = StandInBook()
    before = _running_job(book, "noop-1")
    assert before.done is _running_job(book, "noop-0").done  # shared while nobody blocks
    assert before.wait_done(0) is False  # a look that blocks (for no time) makes its own
    own = before.done
    assert own is not _running_job(book, "noop-0").done and not own.flag
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(before.wait_done, 30)
        before.replica_done(1, 0, 1)
        assert waiting.result(timeout=30) is True
    assert own.flag and before.done.flag
    # Blocking after the end returns at once, on the shared finished flag.
    after = _running_job(book, "noop-2")
    after.replica_done(1, 0, 1)
    assert after.wait_done(0) is True


def test_a_running_job_adds_few_objects_for_the_garbage_collector() -> None:
    # Every tracked object a job in flight holds counts towards the next collection, and a
    # collection promotes what is in flight towards the oldest generation. A lone replica's
    # job holds its record, its lock and its Ray ref (a handle adds one more): no done
    # flag, outcomes or list of refs of its own.
    book = StandInBook()
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]
        refs = [StandInRef() for _ in range(200)]
        after_refs = gc.get_count()[0]
        jobs = [_running_job(book, f"noop-{i}", ref) for i, ref in enumerate(refs)]
        per_job = (gc.get_count()[0] - after_refs) / len(jobs)
    finally:
        gc.enable()
    assert after_refs > before  # the count moves: this measure can fail
    assert per_job < 2.1, per_job  # was 4: its own done flag, outcomes and list of refs
    assert [job.refs for job in jobs[:2]] == [(refs[0],), (refs[1],)]
