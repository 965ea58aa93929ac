"""Jobs on Ray: the Fray-side retry loop and the handles.

A callable job is one Ray task per replica (``max_retries=0``: Ray's single retry counter
cannot tell a preemption from a bug). When an attempt ends, its outcome is classified: the
wrapper returns the user's exception as a value, so any *Ray* error (worker crash, node or
owner death, ...) is a preemption. Each class of outcome has its own budget. Whoever waits
for a job fetches its outcome (one blocking Ray call, batched for ``wait_all``); an attempt
nobody waits on gets completion callbacks after half a second (``Watcher``): no thread per
job, no polling.

A command job goes through Ray's Jobs API (it needs the dashboard) and is polled.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import collections
import concurrent.futures
import logging
import shlex
import threading
import time
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fray import JobInfo, JobRequest, JobStatus
from fray.backend import check_result
from fray.errors import FrayError, JobFailedError, JobTimeoutError
from fray_ray._convert import is_preemption
from fray_ray._worker import Outcome, outcome_of

if TYPE_CHECKING:
    from fray_ray._client import RayClient

__all__ = ["CallableJob", "CommandJob", "RayJobHandle", "RemoteJobHandle", "Watcher", "drive_jobs"]

logger = logging.getLogger("fray.ray")
_SUCCEEDED = JobStatus.SUCCEEDED


class _Done:
    """That a job has ended, for a thread that blocks until it has (``_Job.done_event``):
    ``flag``, read without a lock (and never written but by :meth:`set`), with an ``Event``
    made only once a thread actually blocks on it."""

    __slots__ = ("_event", "flag")
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.flag = False
        self._event: threading.Event | None = None

    def set(self) -> None:
        with self._lock:
            self.flag = True
            event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: float | None = None) -> bool:
        if self.flag:
            return True
        with self._lock:
            if self.flag:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)


class _Pending:
    """A job's ``done`` until it ends or a thread blocks on it (``_Job.done_event``): one
    shared object instead of one per job. It has only ``flag``; nothing ever sets it."""

    __slots__ = ()
    flag = False


_PENDING = _Pending()
_NO_OUTCOMES: Mapping[int, Any] = types.MappingProxyType({})  # shared, never changed
_FINISHED = _Done()  # what a job's ``done`` becomes once it has ended (see ``_Job._ended``)
_FINISHED.flag = True
# What a job's ``lock`` becomes once it has ended. Every section under a job's lock first
# looks at ``ended`` or ``done`` (both set before the swap) and then changes nothing that
# matters for a finished job (a waiter's claim count only matters while it runs), and none
# takes a second job's lock: finished jobs can share one.
_FINISHED_LOCK = threading.Lock()


class _Job:
    """Bookkeeping shared by callable and command jobs. Slotted: a client keeps thousands of
    these (its history, see ``fray.backend.JobHistory``).

    Every object a record holds that the garbage collector tracks is one more to walk, and
    one more to promote to the oldest generation (enough promotions trigger a full
    collection, which walks everything the driver holds). So a record holds no container
    it does not need: output lines and done-callbacks start as the shared empty tuple and
    are replaced, never mutated; ``done`` is a shared object unless a thread blocks on it;
    once a job ends, its refs are dropped and its ``done`` and ``lock`` become shared ones.
    A finished record is the job object alone."""

    __slots__ = (
        "attempts",
        "callbacks",
        "cause",
        "client",
        "done",
        "ended",
        "error",
        "exit_code",
        "failures",
        "finished_at",
        "job_id",
        "lines",
        "lock",
        "parent",
        "preemptions",
        "request",
        "started_at",
        "status",
        "stop_requested",
        "submitted_at",
        "value",
    )

    def __init__(
        self, client: RayClient, job_id: str, request: JobRequest, parent: str | None
    ) -> None:
        self.client = client
        self.job_id = job_id
        self.request = request
        self.parent = parent
        self.status = JobStatus.PENDING
        self.ended = False  # a final status is recorded (set under ``lock``)
        self.attempts = 0
        self.failures = 0
        self.preemptions = 0
        self.error: str | None = None
        self.cause: BaseException | None = None
        self.exit_code: int | None = None
        self.value: Any = None
        self.lines: Sequence[str] = ()  # replaced, never mutated
        self.lock = threading.Lock()
        # ``done.flag``: the job has ended and its end is recorded everywhere (read without
        # a lock). A per-job ``_Done`` only once a thread blocks (``done_event``).
        self.done: _Pending | _Done = _PENDING
        self.callbacks: Sequence[Callable[[], None]] = ()  # replaced, never mutated
        self.stop_requested = False
        self.submitted_at = time.time()
        self.started_at: float | None = None
        self.finished_at: float | None = None

    # -- bookkeeping -------------------------------------------------------------------------

    def info(self, children: tuple[str, ...] = ()) -> JobInfo:
        return JobInfo(
            job_id=self.job_id,
            name=self.request.name,
            status=self.status,
            attempts=self.attempts,
            preemptions=self.preemptions,
            failures=self.failures,
            error=self.error,
            exit_code=self.exit_code,
            parent=self.parent,
            children=children,
            replicas=self.request.replica_count,
            submitted_at=self.submitted_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
        )

    def record(self) -> dict[str, Any]:
        """The JobInfo fields, as sent to the registry."""
        info = self.info()
        return info.model_dump(exclude={"children"}, mode="json")

    def add_lines(self, lines: Sequence[str]) -> None:
        """Appends output lines (a new list: ``lines`` is never mutated, see above)."""
        self.lines = [*self.lines, *lines]

    def on_failure(self, cause: BaseException | None, error: str, code: int | None) -> bool:
        """Counts a user failure; returns whether to try again."""
        self.failures += 1
        self.cause, self.error, self.exit_code = cause, error, code
        if self.failures <= self.request.max_retries_failure:
            self.add_lines([f"[fray] attempt {self.attempts} failed ({error}); retrying"])
            return True
        return False

    def on_preemption(self, error: str) -> bool:
        """Counts a preemption; returns whether to try again."""
        self.preemptions += 1
        self.error = error
        if self.preemptions <= self.request.max_retries_preemption:
            self.add_lines([f"[fray] attempt {self.attempts} was preempted ({error}); retrying"])
            return True
        self.error = (
            f"preempted {self.preemptions} times, more than max_retries_preemption="
            f"{self.request.max_retries_preemption}; last: {error}"
        )
        return False

    def finish(self, status: JobStatus) -> None:
        with self.lock:
            callbacks = self._end(status)
        if callbacks is not None:
            self._ended(callbacks)

    def _end(self, status: JobStatus) -> Sequence[Callable[[], None]] | None:
        """The first half of :meth:`finish`, under ``self.lock``: records the final status
        (``None`` if another thread already did) and takes the callbacks."""
        if self.ended:
            return None
        self.ended = True
        self.status = status
        self.finished_at = time.time()
        callbacks, self.callbacks = self.callbacks, ()
        return callbacks

    def has_ended(self) -> bool:
        """``done.flag``, as a callable."""
        return self.done.flag

    def done_event(self) -> _Done:
        """The job's ``done`` for a thread that blocks until the job has ended."""
        with self.lock:  # against _ended's swap: a _Done made here is always set
            done = self.done
            if isinstance(done, _Pending):
                done = self.done = _Done()
            return done

    def _ended(self, callbacks: Sequence[Callable[[], None]]) -> None:
        """The second half of :meth:`finish`, outside the lock."""
        client = self.client
        client.job_finished(self)
        with self.lock:
            done, self.done = self.done, _FINISHED
        if isinstance(done, _Done):
            done.set()  # whoever blocks on it wakes
        self.lock = _FINISHED_LOCK
        client.progress()
        for callback in callbacks:
            try:
                callback()
            except Exception:
                logger.exception("a done-callback of job %s raised", self.job_id)

    # -- running (subclasses) ----------------------------------------------------------------

    def start(self) -> None:
        raise NotImplementedError

    def terminate(self) -> None:
        raise NotImplementedError

    def live_lines(self) -> list[str]:
        return list(self.lines)


class CallableJob(_Job):
    """A callable job: one Ray task per replica per attempt.

    Who notices that an attempt ended: whoever waits for it. A thread in ``wait()`` or
    ``result()`` (or ``wait_all``) fetches the outcome itself with one blocking Ray call, which
    is far cheaper than a completion callback handed over from Ray's thread. An attempt that
    nobody waits on for ``WATCH_AFTER`` seconds gets completion callbacks (``watch``), so
    retries and final states never depend on a waiter; ``status()`` checks without blocking.
    """

    WATCH_AFTER = 0.5
    __slots__ = (
        "_lone_ref",
        "_refs",
        "claims",
        "env",
        "outcomes",
        "payload",
        "remote",
        "settled",
        "watched",
    )

    def __init__(
        self,
        client: RayClient,
        job_id: str,
        request: JobRequest,
        parent: str | None,
        prepared: tuple[Any, tuple[tuple[str, str], ...], bytes],
        first: Any = None,
    ) -> None:
        """``first``: the ref of a lone replica's first attempt, already submitted by the
        client; the job is then created running (the client watches it, see
        ``RayClient._start_bound``). Otherwise :meth:`start` starts it."""
        super().__init__(client, job_id, request, parent)
        # The wrapper as a Ray remote function with this request's options, the env vars it
        # sets itself, and the pickled entrypoint (see RayClient._prepared).
        self.remote, self.env, self.payload = prepared
        self._lone_ref: Any = first
        self._refs: Sequence[Any] = ()
        # The current attempt's outcomes by replica, once one is recorded (``_record``).
        self.outcomes: Mapping[int, Outcome] = _NO_OUTCOMES
        self.settled = 0
        self.watched = 0  # the attempt that has completion callbacks
        self.claims = 0  # threads fetching this job's outcomes themselves
        if first is not None:
            self.attempts = 1
            self.started_at = self.submitted_at
            self.status = JobStatus.RUNNING

    @property
    def refs(self) -> Sequence[Any]:
        """The Ray refs of the current attempt's replicas (none once the job has ended).
        A lone replica's ref is kept without a container: one object less per job in
        flight for the garbage collector."""
        ref = self._lone_ref
        return self._refs if ref is None else (ref,)

    @refs.setter
    def refs(self, refs: Sequence[Any]) -> None:
        if len(refs) == 1:
            self._lone_ref, self._refs = refs[0], ()
        else:
            self._lone_ref, self._refs = None, refs

    def _end(self, status: JobStatus) -> Sequence[Callable[[], None]] | None:
        callbacks = super()._end(status)
        if callbacks is not None:  # its Ray objects are no longer needed: let Ray free them
            self.refs = ()
            self.outcomes = _NO_OUTCOMES
        return callbacks

    def start(self) -> None:
        """Starts the next attempt: one Ray task per replica."""
        with self.lock:
            if self.stop_requested or self.ended:
                return
            self.attempts += 1
            attempt = self.attempts
            if self.started_at is None:
                self.started_at = time.time()
            self.status = JobStatus.RUNNING
            self.outcomes = _NO_OUTCOMES
            count = self.request.replica_count
            refs: list[Any] = []
            for index in range(count):
                ctx = (
                    self.job_id,
                    index,
                    count,
                    self.client.namespace,
                    self.client.registry_name,
                    self.client.echo_logs,
                    self.env,
                )
                refs.append(self.remote.remote((self.payload, ctx)))
            self.refs = refs
            now = bool(self.callbacks) or self.client.mirrors
        if attempt > 1:  # a waiter may be waiting for this retry's refs
            self.client.progress(retry=True)
        if now:
            self.watch(attempt)
        else:
            self.client.watch_later(self, attempt)

    def watch(self, attempt: int) -> None:
        """Registers completion callbacks for ``attempt`` (once)."""
        with self.lock:
            if attempt != self.attempts or self.watched == attempt or self.done.flag:
                return
            self.watched = attempt
            refs = list(self.refs)
        for index, ref in enumerate(refs):
            ref.future().add_done_callback(
                lambda future, i=index, a=attempt: self._future_done(a, i, future)
            )

    def due(self, attempt: int) -> bool:
        """For the deferred watch: registers the callbacks for ``attempt`` if it still needs
        them; returns whether to look again later (someone is fetching it)."""
        with self.lock:
            if attempt != self.attempts or self.watched == attempt or self.done.flag:
                return False
            if self.claims:
                return True
        self.watch(attempt)
        return False

    def pending_into(self, owners: dict[Any, CallableJob], places: dict[Any, int]) -> int:
        """Adds the refs of the current attempt's replicas without an outcome yet (none
        while the attempt is being settled) to ``owners`` (``ref: job``) and ``places``
        (``ref: attempt * _SPAN + index``: an int, not a tuple the garbage collector would
        count); returns how many."""
        with self.lock:
            if self.done.flag or self.settled == self.attempts:
                return 0
            attempt, outcomes = self.attempts, self.outcomes
            count = 0
            for index, ref in enumerate(self.refs):
                if index not in outcomes:
                    owners[ref] = self
                    places[ref] = attempt * _SPAN + index
                    count += 1
            return count

    def drive(self, timeout: float | None) -> None:
        """Waits for the job in the calling thread; returns when it is done or ``timeout``
        passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.lock:
            self.claims += 1
        try:
            if self._lone_ref is not None:
                self._drive_one(deadline)
                if self.done.flag:
                    return
            drive_jobs([self], deadline, until_all=True)
        finally:
            with self.lock:
                self.claims -= 1

    def _drive_one(self, deadline: float | None) -> None:
        """``drive`` for a single replica: one blocking ``ray.get`` per attempt. Returns
        when the job is done, at ``deadline``, or when the attempt is being settled
        elsewhere."""
        import ray

        while True:
            with self.lock:
                ref = self._lone_ref
                if self.ended or self.settled == self.attempts or ref is None:
                    return
                attempt = self.attempts
            try:
                result = ray.get(
                    ref, timeout=None if deadline is None else max(deadline - time.monotonic(), 0)
                )
            except Exception as exc:
                from ray.exceptions import GetTimeoutError

                if isinstance(exc, GetTimeoutError):
                    return
                result = Outcome("ray-error", exc)  # a Ray error: the attempt's outcome
            self._replica_done(attempt, 0, result)

    def poll(self) -> None:
        """Takes whatever outcomes are ready, without blocking."""
        if self.done.flag:
            return
        with self.lock:
            if self.watched == self.attempts:
                return  # the callbacks keep it current
        drive_jobs([self], time.monotonic(), until_all=False)

    def _future_done(
        self, attempt: int, index: int, future: concurrent.futures.Future[Any]
    ) -> None:
        try:
            result = future.result()
        except BaseException as exc:
            result = Outcome("ray-error", exc)
        self._replica_done(attempt, index, result)

    def _replica_done(self, attempt: int, index: int, result: Any) -> None:
        """Records a replica's outcome (from a completion callback or a waiting thread,
        whichever comes first) and settles the attempt once it is decided. ``result``: what
        the replica's task returned (a bare value or an :class:`Outcome`), or a ``ray-error``
        outcome."""
        with self.lock:
            if attempt != self.attempts or self.settled == attempt or self.ended:
                return
            outcome = result if type(result) is Outcome else None
            if (
                self._lone_ref is not None
                and (outcome is None or outcome.kind == "ok")
                and not self.stop_requested
                and not self.client.mirrors
            ):
                # The fast path, settled here under one lock: a lone replica succeeded.
                self.settled = attempt
                if outcome is None:
                    self.value = result
                else:
                    self.add_lines(outcome.lines)
                    self.value = outcome.value
                callbacks = self._end(JobStatus.SUCCEEDED)
                refs = None
            else:
                callbacks = None
                refs = self._record(attempt, index, outcome_of(result))
                if refs is None:
                    return
        if callbacks is not None:
            self._ended(callbacks)
        elif refs is not None:
            if refs:
                self.client.cancel_refs(refs)
            self.client.executor.submit(self._settle, attempt)

    def _record(self, attempt: int, index: int, outcome: Outcome) -> list[Any] | None:
        """Under ``lock``: stores a replica's outcome; returns ``None`` while the attempt is
        undecided, else the refs of the replicas to cancel (gang semantics: one replica
        down takes the attempt down) and marks it settled."""
        if index in self.outcomes:
            return None
        outcomes = self.outcomes
        if not isinstance(outcomes, dict):  # the shared empty one: this attempt's own
            outcomes = self.outcomes = {}
        outcomes[index] = outcome
        bad = outcome.kind != "ok"
        complete = len(self.outcomes) == len(self.refs)
        if not (complete or bad):
            return None
        self.settled = attempt  # later replicas of this attempt change nothing
        return list(self.refs) if bad and not complete else []

    def _settle(self, attempt: int) -> None:
        """Decides what an ended attempt means: success, retry, or a final status."""
        try:
            with self.lock:
                if attempt != self.attempts or self.ended:
                    return
                outcomes = dict(self.outcomes)
                stopping = self.stop_requested
            for index in sorted(outcomes):
                outcome = outcomes[index]
                if outcome.lines:
                    self.add_lines(
                        outcome.lines
                        if len(outcomes) == 1
                        else [f"[{index}] {line}" for line in outcome.lines]
                    )
            if stopping:
                self.finish(JobStatus.STOPPED)
                return
            errors = [(i, o) for i, o in sorted(outcomes.items()) if o.kind != "ok"]
            if not errors:
                values = [outcomes[i].value for i in sorted(outcomes)]
                self.value = values[0] if len(values) == 1 else values
                self.finish(JobStatus.SUCCEEDED)
                return
            user = [(i, o) for i, o in errors if o.kind == "error"]
            if user:
                index, outcome = user[0]
                exc: BaseException = outcome.value
                error = f"{type(exc).__name__}: {exc}"
                if len(outcomes) > 1:
                    error = f"replica {index}: {error}"
                code = (
                    exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else None
                )
                retry = self.on_failure(exc, error, code)
            else:
                index, outcome = errors[0]
                exc = outcome.value
                if not is_preemption(exc):
                    retry = self.on_failure(
                        exc, f"Ray could not run the job: {_ray_error_text(exc)}", None
                    )
                else:
                    retry = self.on_preemption(_ray_error_text(exc))
            if retry:
                self.start()
            else:
                self.finish(JobStatus.FAILED)
        except BaseException as exc:  # a bug here must not leave the job hanging
            logger.exception("settling job %s failed", self.job_id)
            self.cause, self.error = exc, f"internal error in RayClient: {exc!r}"
            self.finish(JobStatus.FAILED)

    def terminate(self) -> None:
        with self.lock:
            if self.ended:
                return
            self.stop_requested = True
            refs = list(self.refs)
        self.client.cancel_refs(refs, wait=True)
        self.client.stop_descendants(self.job_id)
        self.finish(JobStatus.STOPPED)

    def live_lines(self) -> list[str]:
        if self.done.flag:
            return list(self.lines)
        return list(self.lines) + self.client.registry_logs(self.job_id)


def drive_jobs(
    jobs: list[CallableJob], deadline: float | None, *, until_all: bool, fail_fast: bool = False
) -> None:
    """Fetches the outcomes of ``jobs`` in the calling thread, batched: one blocking Ray
    call until a first ref is ready, then everything else that is ready, fetched together.

    Returns at ``deadline``, or once every job is done (``until_all``) or any is, or (with
    ``fail_fast``) once any has failed.
    """
    import ray

    client = jobs[0].client
    open_jobs = {job for job in jobs if not job.done.flag}
    if not until_all and len(open_jobs) < len(jobs):
        return
    owners: dict[Any, CallableJob] = {}  # the refs to fetch, and their jobs
    places: dict[Any, int] = {}  # their attempts and replicas (see ``pending_into``)
    left: dict[CallableJob, int] = {}  # refs in ``owners`` per job
    # Jobs with no ref left to fetch but not done are being settled elsewhere (a failure,
    # a retry being started): nothing Ray can tell us about them.
    settling: set[CallableJob] = set()
    scanned = None
    flowing = False  # the last call found refs ready
    while open_jobs:
        # Read before looking at the jobs: a job that ends after the look changes it, so
        # the wait below cannot miss that end.
        generation = client.progress_generation()
        ended = [job for job in settling if job.done.flag]
        if ended:
            settling.difference_update(ended)
            open_jobs.difference_update(ended)
            if _stop(ended, until_all, fail_fast) or not open_jobs:
                return
        if scanned != client.retry_generation():  # new attempts have new refs
            scanned = client.retry_generation()
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
            client.wait_progress(generation, remaining)
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
                attempt, index = divmod(places.pop(ref), _SPAN)
                job._replica_done(attempt, index, result)  # pyright: ignore[reportPrivateUsage]
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


def _stop(ended: list[CallableJob], until_all: bool, fail_fast: bool) -> bool:
    if not until_all:
        return True
    return fail_fast and any(job.status is JobStatus.FAILED for job in ended)


def _fetch(refs: list[Any]) -> list[Any]:
    """What the tasks of ready refs returned (see ``CallableJob._replica_done``): one Ray
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
_SPAN = 1 << 32  # more replicas than a job can have
_LINGER = 0.05
_LINGER_FROM = 16
# wait_all over more jobs than this uses completion callbacks: a batched wait costs time in
# proportion to the jobs still running, each time one ends.
_BATCH_LIMIT = 512


class Watcher:
    """Registers completion callbacks for attempts nobody has waited on for ``delay``
    seconds (see ``CallableJob``): one thread per client, no polling.

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

    def __init__(self, delay: float, lookup: Callable[[str], CallableJob | None]) -> None:
        self.delay = delay
        self._lookup = lookup
        # (due, job ids, attempts), oldest first; changed only under _lock.
        self._queue: collections.deque[tuple[float, list[str], list[int]]] = collections.deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = False  # the thread is (about to be) asleep with nothing queued
        self._thread: threading.Thread | None = None
        self._stopped = False

    def add(self, job: CallableJob, attempt: int) -> None:
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


class CommandJob(_Job):
    """A command job through Ray's Jobs API, polled by a thread of its own."""

    _POLL = 0.1
    AGENT_WAIT = 60.0  # how long a submission waits for a just-started Ray's job agent
    __slots__ = ("previous_lines", "submission_id", "submit_kwargs")

    def __init__(
        self,
        client: RayClient,
        job_id: str,
        request: JobRequest,
        parent: str | None,
        submit_kwargs: dict[str, Any],
    ) -> None:
        super().__init__(client, job_id, request, parent)
        self.submit_kwargs = submit_kwargs
        self.submission_id: str | None = None
        self.previous_lines: list[str] = []

    def start(self) -> None:
        threading.Thread(target=self._run, name=f"fray-ray-cmd-{self.job_id}", daemon=True).start()

    def _submit(self) -> str | None:
        import secrets

        entry = self.request.entrypoint
        assert entry.command is not None
        with self.lock:
            if self.stop_requested:
                return None
            self.attempts += 1
            self.status = JobStatus.RUNNING
            if self.started_at is None:
                self.started_at = time.time()
            submission_id = f"fray-{secrets.token_hex(8)}"
            self.submission_id = submission_id
        api = self.client.jobs_api()
        deadline = time.monotonic() + self.AGENT_WAIT
        delay = 0.1
        while True:
            try:
                api.submit_job(
                    entrypoint=shlex.join(entry.command),
                    submission_id=submission_id,
                    metadata={"fray_job_id": self.job_id, "fray_name": self.request.name},
                    **self.submit_kwargs,
                )
                return submission_id
            except RuntimeError as exc:
                # A Ray that has just started answers this until its dashboard agent is up.
                if "No available agent" not in str(exc) or time.monotonic() >= deadline:
                    raise
            logger.debug("Ray's job agent is not up yet; submitting %s again", self.job_id)
            time.sleep(delay)  # back-off before asking the Jobs API again
            delay = min(delay * 2, 2.0)

    def _run(self) -> None:
        from ray.job_submission import JobStatus as RayJobStatus

        try:
            while True:
                submission_id = self._submit()
                if submission_id is None:
                    break
                api = self.client.jobs_api()
                while True:
                    details = api.get_job_info(submission_id)
                    if details.status.is_terminal():
                        break
                    time.sleep(self._POLL)  # the Jobs API only answers polls
                logs = api.get_job_logs(submission_id)
                attempt_lines = logs.splitlines()
                with self.lock:
                    self.lines = self.previous_lines + attempt_lines
                    stopping = self.stop_requested
                if stopping or details.status == RayJobStatus.STOPPED:
                    break
                if details.status == RayJobStatus.SUCCEEDED:
                    self.exit_code = 0
                    self.finish(JobStatus.SUCCEEDED)
                    return
                code = getattr(details, "driver_exit_code", None)
                last = next((line for line in reversed(attempt_lines) if line.strip()), "")
                if code is not None and code > 0:
                    error = f"exited with code {code}" + (f"; last output: {last}" if last else "")
                    retry = self.on_failure(None, error, code)
                else:
                    retry = self.on_preemption(details.message or f"Ray job {details.status}")
                self.previous_lines = list(self.lines)
                if not retry:
                    self.finish(JobStatus.FAILED)
                    return
        except BaseException as exc:
            logger.exception("command job %s failed inside RayClient", self.job_id)
            self.cause, self.error = exc, f"internal error in RayClient: {exc!r}"
            self.finish(JobStatus.FAILED)
            return
        self.finish(JobStatus.STOPPED)

    def terminate(self) -> None:
        with self.lock:
            if self.done.flag:
                return
            self.stop_requested = True
            submission_id = self.submission_id
        if submission_id is not None:
            api = self.client.jobs_api()
            api.stop_job(submission_id)
        if not self.done_event().wait(60):
            self.finish(JobStatus.STOPPED)

    def live_lines(self) -> list[str]:
        with self.lock:
            submission_id, done = self.submission_id, self.done.flag
        if done or submission_id is None:
            return list(self.lines)
        try:
            text = self.client.jobs_api().get_job_logs(submission_id)
        except Exception:
            return list(self.lines)
        return self.previous_lines + text.splitlines()


def _ray_error_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:500]


# ---------------------------------------------------------------------------------------------
# Handles


def _follow(read: Callable[[], list[str]], finished: Callable[[], bool]) -> Iterator[str]:
    seen = 0
    delay = 0.02
    while True:
        done = finished()
        lines = read()
        yield from lines[seen:]
        seen = max(seen, len(lines))
        if done:
            return
        time.sleep(delay)  # polling cadence of a live log stream
        delay = min(delay * 2, 0.25)


def _raise_for(job_id: str, status: JobStatus, error: str | None, cause: BaseException | None):
    raise JobFailedError(job_id, status, error) from cause


class RayJobHandle:
    """Handle to a job this client started."""

    __slots__ = ("_job",)

    def __init__(self, job: _Job) -> None:
        self._job = job

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self._job.job_id

    def status(self) -> JobStatus:
        """The job's current status."""
        job = self._job
        if isinstance(job, CallableJob) and not job.done.flag:
            job.poll()
        return job.status

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished; see ``fray.JobHandle.wait``."""
        job = self._job
        if isinstance(job, CallableJob) and not job.done.flag:
            job.drive(timeout)
        return self._finished(timeout, raise_on_failure)

    def _finished(self, timeout: float | None, raise_on_failure: bool) -> JobStatus:
        """The end of :meth:`wait`, once a callable job has been driven."""
        job = self._job
        ended = job.done.flag
        if not ended and not isinstance(job, CallableJob):  # a command job: blocks here
            ended = job.done_event().wait(timeout)
        if not ended:  # a callable job has been driven: the time is up
            raise JobTimeoutError(f"job {job.job_id} is still {job.status.value} after {timeout}s")
        if job.status is JobStatus.FAILED and raise_on_failure:
            _raise_for(job.job_id, job.status, job.error, job.cause)
        return job.status

    def result(self, timeout: float | None = None) -> Any:
        """The callable's return value; see ``fray.JobHandle.result``."""
        job = self._job
        if isinstance(job, CallableJob):
            if not job.done.flag:
                job.drive(timeout)
            if job.status is _SUCCEEDED:  # its value is recorded before its status
                return job.value
        status = self._finished(timeout, True)
        check_result(job.job_id, status, job.error, is_callable=job.request.entrypoint.is_callable)
        return job.value

    def terminate(self) -> None:
        """Stops the job and its children; returns once they are STOPPED."""
        self._job.terminate()

    def logs(self, *, follow: bool = False, include_children: bool = False) -> Iterator[str]:
        """The job's output lines; see ``fray.JobHandle.logs``."""
        job = self._job
        client = job.client
        if not include_children:
            if follow:
                yield from _follow(job.live_lines, job.has_ended)
            else:
                yield from job.live_lines()
            return

        def read() -> list[str]:
            lines = job.live_lines()
            for child in client.registry_descendants(job.job_id):
                lines.extend(f"[{child}] {line}" for line in client.registry_logs(child))
            return lines

        if follow:
            yield from _follow(read, job.has_ended)
        else:
            yield from read()

    def info(self) -> JobInfo:
        """Attempts, preemptions, failures, error, parent and children."""
        job = self._job
        if isinstance(job, CallableJob) and not job.done.flag:
            job.poll()
        return job.info(tuple(job.client.children_of(job.job_id)))

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Calls ``callback(handle)`` once the job is finished (at once if it already is)."""
        job = self._job
        with job.lock:
            # ``ended`` is set under this lock, with the callbacks taken: checked instead of
            # ``done``, which is set after the lock is let go, so a callback added in between
            # is never left in a list nobody runs.
            if not job.ended:
                job.callbacks = [*job.callbacks, lambda: callback(self)]
                attempt = job.attempts
            else:
                attempt = None
        if attempt is None:
            callback(self)
        elif isinstance(job, CallableJob):
            job.watch(attempt)  # a callback must not wait for the deferred watch

    @staticmethod
    def wait_many(handles: list[Any], timeout: float | None) -> list[int] | None:
        """For ``fray.wait_all``: fetches outcomes in the calling thread, batched, until all
        of ``handles`` are finished, one has failed or ``timeout`` passed; returns the
        positions of the finished ones. ``None`` (nothing done) when these handles are not
        all callable jobs of one client, or too many to batch."""
        if not handles:
            return []
        if len(handles) > _BATCH_LIMIT or {type(h) for h in handles} != {RayJobHandle}:
            return None
        jobs: list[Any] = [h._job for h in handles]  # pyright: ignore[reportPrivateUsage]
        if {type(j) for j in jobs} != {CallableJob} or len({j.client for j in jobs}) != 1:
            return None
        deadline = None if timeout is None else time.monotonic() + timeout
        drive_jobs(jobs, deadline, until_all=True, fail_fast=True)
        return [i for i, job in enumerate(jobs) if job.done.flag]

    def __repr__(self) -> str:
        return f"RayJobHandle({self._job.job_id!r}, {self._job.status.value})"


class RemoteJobHandle:
    """Handle to a job another client started (a job submitted from inside a job), read
    through the registry."""

    def __init__(self, client: RayClient, job_id: str) -> None:
        self._client = client
        self._job_id = job_id

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self._job_id

    def _record(self) -> dict[str, Any]:
        record = self._client.registry_get(self._job_id)
        if record is None:
            raise FrayError(f"job {self._job_id} is no longer known to the cluster")
        return record

    def status(self) -> JobStatus:
        """The job's current status."""
        return JobStatus(self._record()["status"])

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished (polling the registry)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.01
        while True:
            record = self._record()
            status = JobStatus(record["status"])
            if status.is_finished:
                if status is JobStatus.FAILED and raise_on_failure:
                    raise JobFailedError(self._job_id, status, record.get("error"))
                return status
            if deadline is not None and time.monotonic() >= deadline:
                raise JobTimeoutError(
                    f"job {self._job_id} is still {status.value} after {timeout}s"
                )
            time.sleep(delay)  # polling the registry: another process owns this job
            delay = min(delay * 2, 0.2)

    def result(self, timeout: float | None = None) -> Any:
        """The callable's return value."""
        status = self.wait(timeout)
        if status is not JobStatus.SUCCEEDED:
            raise JobFailedError(self._job_id, status, self._record().get("error") or "stopped")
        known, value = self._client.registry_result(self._job_id)
        if not known:
            raise JobFailedError(self._job_id, status, "the job's return value was not recorded")
        return value

    def terminate(self) -> None:
        """Stops the job and its children (their owners see the stop request)."""
        self._client.stop_descendants(self._job_id, include_self=True)

    def logs(self, *, follow: bool = False, include_children: bool = False) -> Iterator[str]:
        """The job's output lines, as recorded in the registry."""

        def read() -> list[str]:
            lines = self._client.registry_logs(self._job_id)
            if include_children:
                for child in self._client.registry_descendants(self._job_id):
                    lines.extend(f"[{child}] {line}" for line in self._client.registry_logs(child))
            return lines

        if follow:
            yield from _follow(read, lambda: self.status().is_finished)
        else:
            yield from read()

    def info(self) -> JobInfo:
        """The job's record."""
        record = self._record()
        return JobInfo(**{k: v for k, v in record.items() if k in JobInfo.model_fields})

    def __repr__(self) -> str:
        return f"RemoteJobHandle({self._job_id!r})"


_API_STATUS = {
    "PENDING": JobStatus.PENDING,
    "RUNNING": JobStatus.RUNNING,
    "SUCCEEDED": JobStatus.SUCCEEDED,
    "FAILED": JobStatus.FAILED,
    "STOPPED": JobStatus.STOPPED,
}


def api_job_info(details: Any) -> JobInfo:
    """A Ray Jobs API record of a Fray command job (submitted by any process) as JobInfo."""
    metadata = details.metadata or {}
    job_id = metadata.get("fray_job_id", details.submission_id)
    return JobInfo(
        job_id=job_id,
        name=metadata.get("fray_name", job_id),
        status=_API_STATUS.get(str(details.status.value), JobStatus.PENDING),
        attempts=1,
        error=details.message if str(details.status.value) == "FAILED" else None,
        exit_code=getattr(details, "driver_exit_code", None),
        submitted_at=(details.start_time or 0) / 1000 or None,
        finished_at=(details.end_time or 0) / 1000 or None,
    )


class SubmittedJobHandle:
    """Handle to a Fray command job found in Ray's Jobs API (e.g. started by another
    process: ``fray jobs status`` on Ray). Read-through: every call asks the cluster."""

    def __init__(self, client: RayClient, submission_id: str, job_id: str) -> None:
        self._client = client
        self._submission_id = submission_id
        self._job_id = job_id

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self._job_id

    def info(self) -> JobInfo:
        """The job's record in the Jobs API."""
        return api_job_info(self._client.jobs_api().get_job_info(self._submission_id))

    def status(self) -> JobStatus:
        """The job's current status."""
        return self.info().status

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished (polling the Jobs API)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            info = self.info()
            if info.status.is_finished:
                if info.status is JobStatus.FAILED and raise_on_failure:
                    raise JobFailedError(self._job_id, info.status, info.error)
                return info.status
            if deadline is not None and time.monotonic() >= deadline:
                raise JobTimeoutError(f"job {self._job_id} is still {info.status.value}")
            time.sleep(0.2)  # the Jobs API only answers polls

    def result(self, timeout: float | None = None) -> Any:
        """Command jobs have no return value."""
        status = self.wait(timeout)
        raise JobFailedError(self._job_id, status, "a command job has no return value")

    def terminate(self) -> None:
        """Stops the Ray job."""
        self._client.jobs_api().stop_job(self._submission_id)
        self.wait(timeout=60, raise_on_failure=False)

    def logs(self, *, follow: bool = False, include_children: bool = False) -> Iterator[str]:
        """The job's output, from the Jobs API."""
        api = self._client.jobs_api()

        def read() -> list[str]:
            return api.get_job_logs(self._submission_id).splitlines()

        if follow:
            yield from _follow(read, lambda: self.status().is_finished)
        else:
            yield from read()
