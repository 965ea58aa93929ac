"""A callable job's record on its own (no Ray): a stand-in client, and the outcomes a
waiting thread would fetch handed in directly."""

from __future__ import annotations

import concurrent.futures
import gc
from typing import Any

from fray import Entrypoint, JobRequest, JobStatus, ResourceConfig
from fray_ray._jobs import CallableJob, RayJobHandle
from fray_ray._worker import Outcome


def noop() -> int:
    return 1


REQUEST = JobRequest(
    name="noop", entrypoint=Entrypoint.from_callable(noop), resources=ResourceConfig(ram="0")
)
PREPARED: tuple[Any, tuple[tuple[str, str], ...], bytes] = (None, (), b"")


class StandInClient:
    """What a job asks of its client when it ends."""

    mirrors = False

    def __init__(self) -> None:
        self.finished: list[str] = []

    def job_finished(self, job: Any) -> None:
        self.finished.append(job.job_id)

    def progress(self, *, retry: bool = False) -> None:
        pass


class StandInRef:
    """A Ray object ref: its future completes when the test says so."""

    def __init__(self) -> None:
        self.completion: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def future(self) -> concurrent.futures.Future[Any]:
        return self.completion


def _running_job(client: StandInClient, job_id: str, ref: Any = None) -> CallableJob:
    """A lone replica's job whose first attempt is running."""
    first = StandInRef() if ref is None else ref
    return CallableJob(client, job_id, REQUEST, None, PREPARED, first=first)  # pyright: ignore[reportArgumentType]


def _own_tracked(job: CallableJob) -> set[int]:
    """The objects a record refers to that the garbage collector tracks."""
    return {id(o) for o in gc.get_referents(job) if gc.is_tracked(o)}


def test_a_finished_record_holds_no_tracked_object_of_its_own() -> None:
    # A client keeps thousands of finished records; each tracked object one holds is more
    # work for every garbage collection of the driver. Once finished, what a record
    # refers to is shared by every record (client, request, status, done flag, lock).
    client = StandInClient()
    first, second = _running_job(client, "noop-1"), _running_job(client, "noop-2")
    assert _own_tracked(first) != _own_tracked(second)  # running: a lock, a ref list, ...
    first._replica_done(1, 0, 41)  # pyright: ignore[reportPrivateUsage]
    second._replica_done(1, 0, Outcome("ok", 42, ["a line"]))  # pyright: ignore[reportPrivateUsage]
    assert client.finished == ["noop-1", "noop-2"]
    assert (RayJobHandle(first).result(), RayJobHandle(second).result()) == (41, 42)
    assert list(RayJobHandle(second).logs()) == ["a line"]
    shared = _own_tracked(first) & _own_tracked(second)
    assert _own_tracked(first) - shared == set()
    # The second's output lines are its own: a list of strings is all it holds.
    assert _own_tracked(second) - shared == {id(second.lines)}


def test_a_callback_added_while_the_job_is_ending_still_runs() -> None:
    # A job ends in two halves: its final status under its lock, then (outside the lock)
    # it is marked done and its callbacks run. A callback added in between runs too.
    client = StandInClient()
    job = _running_job(client, "noop-1")
    handle = RayJobHandle(job)
    seen: list[Any] = []
    with job.lock:
        callbacks = job._end(JobStatus.SUCCEEDED)  # pyright: ignore[reportPrivateUsage]
    assert callbacks is not None
    handle.add_done_callback(seen.append)
    job._ended(callbacks)  # pyright: ignore[reportPrivateUsage]
    handle.add_done_callback(seen.append)
    assert seen == [handle, handle]


def test_callbacks_added_while_running_run_once_each_when_it_ends() -> None:
    client = StandInClient()
    ref = StandInRef()
    job = _running_job(client, "noop-1", ref)
    handle = RayJobHandle(job)
    seen: list[str] = []
    handle.add_done_callback(lambda h: seen.append("a"))  # the attempt gets watched at once
    handle.add_done_callback(lambda h: seen.append("b"))
    assert seen == []
    ref.completion.set_result(7)  # Ray's completion callback
    job._replica_done(1, 0, 8)  # pyright: ignore[reportPrivateUsage]  # a late second answer
    assert seen == ["a", "b"]
    assert handle.result() == 7 and handle.status() is JobStatus.SUCCEEDED


def test_a_thread_blocking_on_a_job_wakes_when_it_ends() -> None:
    # ``done`` is one shared object until a thread blocks: that thread gets a per-job one,
    # which the job's end must set, whichever of the two comes first.
    client = StandInClient()
    before = _running_job(client, "noop-1")
    assert before.done is _running_job(client, "noop-0").done  # shared while nobody blocks
    event = before.done_event()
    assert before.done is event and not event.flag
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(event.wait, 30)
        before._replica_done(1, 0, 1)  # pyright: ignore[reportPrivateUsage]
        assert waiting.result(timeout=30) is True
    assert event.flag and before.done.flag
    # Blocking after the end returns at once, on the shared finished flag.
    after = _running_job(client, "noop-2")
    after._replica_done(1, 0, 1)  # pyright: ignore[reportPrivateUsage]
    assert after.done_event().wait(0) is True


def test_a_running_job_adds_few_objects_for_the_garbage_collector() -> None:
    # Every tracked object a job in flight holds counts towards the next collection, and a
    # collection promotes what is in flight towards the oldest generation. A lone replica's
    # job holds its record, its lock and its Ray ref (a handle adds one more): no done
    # flag, outcomes or list of refs of its own.
    client = StandInClient()
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]
        refs = [StandInRef() for _ in range(200)]
        after_refs = gc.get_count()[0]
        jobs = [_running_job(client, f"noop-{i}", ref) for i, ref in enumerate(refs)]
        per_job = (gc.get_count()[0] - after_refs) / len(jobs)
    finally:
        gc.enable()
    assert after_refs > before  # the count moves: this measure can fail
    assert per_job < 2.1, per_job  # was 4: its own done flag, outcomes and list of refs
    assert [job.refs for job in jobs[:2]] == [(refs[0],), (refs[1],)]
