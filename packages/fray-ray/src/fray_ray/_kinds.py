"""The kinds of job on Ray and callable jobs, the kind that runs as Ray tasks.

A job record's ``data`` is its :class:`JobKind`, worked out once per request: a callable
job (:class:`CallableJob`, here), a command job or a job found by id (``fray_ray._jobs``),
or fray-tpu's TPU gang. :class:`KindClient` hands each of the engine's hooks to the kind, so
a client runs several kinds side by side and no kind is told apart by probing it;
:class:`RayJobHandle` asks the kind for what only some kinds have (a gang's placement, its
own failure error).

A callable job runs one Ray task per replica per attempt, each with ``max_retries=0``:
Ray's single retry counter cannot tell a preemption from a bug, so the engine retries,
charging each end to its budget as :func:`fray_ray.errors.read_ray_error` reads it. The task
is shaped like the user's own (see :mod:`fray_ray._worker`): its payload is pickled per
attempt, its value comes back as it is, and a user's exception comes back as Ray's
``RayTaskError`` with the user's as ``cause``.

Two observers learn that a replica ended, and both call :meth:`CallableJob.ended`, which
takes the job's lock and counts the first report per (attempt, replica) only, so each
attempt is decided once:

- whoever waits (``wait()``, ``result()``, ``wait_all``, ``status()``, ``info()``) runs
  :func:`await_ends` in its own thread: one bulk ``ray.wait`` over every unreported ref of
  the jobs it waits for, in slices, then ``ray.get`` of those that ended;
- an attempt that is still running one or two :data:`WATCH_AFTER_S` after it started,
  whether or not anyone waits, is waited for the same way by the client's
  :class:`Watcher` thread, one bulk wait for all such attempts; so a job nobody waits on
  is still retried, and its done-callbacks still run.

The engine's follow-ups (the next attempt, done-callbacks) run in the thread that noticed
the end. No Python runs on Ray's own threads (a future's callback would, holding the GIL).
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import logging
import pickle
import threading
import time
from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from fray import JobStatus
from fray.backend import BaseClient, BaseJobHandle, JobRecord, Outcome, Phase
from fray.errors import JobFailedError
from fray_ray._convert import Ask
from fray_ray._placement import cluster_says
from fray_ray._worker import JobExit, Printed, printed_lines
from fray_ray.errors import read_ray_error

if TYPE_CHECKING:
    from fray_ray._client import RayClient

__all__ = [
    "SLICE_S",
    "WATCH_AFTER_S",
    "CallableJob",
    "JobKind",
    "KindClient",
    "RayJobHandle",
    "TaskShape",
    "Watcher",
    "await_ends",
    "cancel_refs",
]

logger = logging.getLogger("fray.ray")
T = TypeVar("T")

_REASON_EVERY_S = 1.0  # a pending reason is read from the cluster at most this often


class JobKind:
    """What one kind of job does for the engine's hooks, with no-ops where a kind has
    nothing to do. ``start`` runs in the thread that submitted the job or reported the
    attempt before (the engine's attempt loop); ``cancel`` on the engine's timer thread
    (it must not block: a kind hands slow work to the client's event thread); the readers
    (``refresh``, ``pending_reason``, ``value``, ``lines``) in the thread of the caller
    asking; ``close`` in the thread that recorded the job's end."""

    children: tuple[str, ...] = ()  # a found job's children, as its own record lists them

    def __init__(self, client: BaseClient) -> None:
        self.client = client
        self._reason: tuple[float, str | None] | None = None  # when read, and what

    def start(self, job: JobRecord) -> None:
        """Starts the job's current attempt (``_start_attempt``)."""
        raise NotImplementedError

    def cancel(self, job: JobRecord) -> float:
        """Begins stopping the current attempt; returns its grace (``_cancel_attempt``)."""
        raise NotImplementedError

    def refresh(self, job: JobRecord) -> float | None:
        """Brings the record up to date (``_refresh``); by default it is kept so."""
        return None

    def collect(self, job: JobRecord, into: dict[Any, Any]) -> bool:
        """Adds the Ray refs whose end would end the current attempt to ``into`` (for
        whoever waits: see :func:`await_ends`); ``True`` where this kind's ends are learnt
        through such refs (even when it has none at the moment)."""
        del job, into
        return False

    def pending_reason(self, job: JobRecord) -> str | None:
        """Why the job waits for a place, where the cluster can say."""
        return None

    def value(self, job: JobRecord) -> Any:
        """The value of the SUCCEEDED job (``_result``)."""
        return job.value

    def lines(self, job: JobRecord) -> list[str]:
        """The job's output lines so far."""
        return [line for _ts, line in job.log.snapshot()]

    def failure(self, job: JobRecord) -> JobFailedError:
        """The error a FAILED job raises from ``wait()`` and ``result()``."""
        error = JobFailedError(job.job_id, job.status, job.error)
        error.__cause__ = job.cause
        return error

    def placement(self) -> list[dict[str, Any]]:
        """Where the current (or last) attempt runs, host by host, where the kind knows."""
        return []

    def wait_for_attempt(self, job: JobRecord, attempt: int, timeout: float) -> bool:
        """Whether attempt ``attempt`` has started (a kind that can tell waits for it)."""
        del timeout
        return job.attempts >= attempt

    def close(self, job: JobRecord) -> None:
        """The job has ended."""

    def cached_reason(self, read: Callable[[], str | None]) -> str | None:
        """``read()``, at most once a second per job (the reason is read from the
        cluster); a reading that fails is no reason (a courtesy: never fail a caller)."""
        now = time.monotonic()
        last = self._reason
        if last is None or now - last[0] >= _REASON_EVERY_S:
            try:
                reason = read()
            except Exception as exc:
                logger.debug("reading a pending reason failed: %s", exc)
                reason = None
            last = self._reason = (now, reason)
        return last[1]


class RayJobHandle(BaseJobHandle):
    """A handle to a job on Ray (``fray.JobHandle``). A TPU gang job that fails raises
    :class:`fray_tpu.TpuJobFailedError` (a ``JobFailedError``) with its counts and reason,
    and its :meth:`placement` and :meth:`host_results` say where it ran and what each host
    returned."""

    __slots__ = ()

    def wait(
        self,
        timeout: float | None = None,
        *,
        raise_on_failure: bool = True,
        stream_logs: bool = False,
    ) -> JobStatus:
        """Blocks until the job is finished; see ``fray.JobHandle.wait``.

        Raises:
            TpuJobFailedError: A TPU gang job FAILED (``TpuSchedulingError`` if its slices
                could not be gathered in time) and ``raise_on_failure`` is set.
            JobFailedError: Any other job FAILED and ``raise_on_failure`` is set.
            JobTimeoutError: ``timeout`` passed first.
        """
        status = super().wait(timeout, raise_on_failure=False, stream_logs=stream_logs)
        if status is JobStatus.FAILED and raise_on_failure:
            job = self._job
            raise job.data.failure(job)
        return status

    def host_results(self, timeout: float | None = None) -> list[Any]:
        """Every host's (replica's) return value as a list, slice by slice for a TPU gang
        (also for one host).

        Raises:
            JobFailedError: The job did not succeed.
        """
        value = self.result(timeout)
        return list(self._job.value or []) if self._job.replicas > 1 else [value]

    def placement(self) -> list[dict[str, Any]]:
        """Where the current (or last) attempt runs: for a TPU gang, slice, worker, node id
        and IP per host; empty for jobs Ray places task by task."""
        return self._job.data.placement()

    def wait_for_attempt(self, attempt: int, timeout: float) -> bool:
        """Blocks until attempt ``attempt`` has started (a gang's: its hosts are placed, as
        :meth:`placement` then says); ``False`` on timeout or job end."""
        job = self._job
        return job.data.wait_for_attempt(job, attempt, timeout)


class KindClient(BaseClient):
    """A client of the engine whose jobs' kinds (:class:`JobKind`, each record's
    ``data``) do the work of its hooks: ``RayClient`` and fray-tpu's client of
    ``run_on_pod``."""

    handle_type = RayJobHandle

    def __init__(self) -> None:
        super().__init__()
        self._kind_states: dict[type[Any], Any] = {}

    def kind_state(self, cls: type[T]) -> T:
        """The one ``cls()`` of this client, made on first use: what the jobs of one kind
        share for the client's lifetime (a TPU gang's lost nodes)."""
        with self._lock:
            state = self._kind_states.get(cls)
            if state is None:
                state = self._kind_states[cls] = cls()
            return state

    def _start_attempt(self, job: JobRecord) -> Outcome | None:
        return job.data.start(job)

    def _cancel_attempt(self, job: JobRecord) -> float:
        return job.data.cancel(job)

    def _refresh(self, job: JobRecord) -> float | None:
        return job.data.refresh(job)

    def _pending_reason(self, job: JobRecord) -> str | None:
        return job.data.pending_reason(job)

    def _result(self, job: JobRecord) -> Any:
        return job.data.value(job)

    def _after_end(self, job: JobRecord) -> None:
        super()._after_end(job)
        job.data.close(job)


WATCH_AFTER_S = 1.0  # an attempt still running about this long (at most twice) gets callbacks
CANCEL_GRACE_S = 10.0  # a cancelled attempt that has not ended by then is recorded STOPPED
_BETWEEN_S = 0.01  # how long a waiter waits for a job whose next attempt is being started
SLICE_S = 0.1  # a waiter's longest single ray.wait


class TaskShape(NamedTuple):
    """What the tasks of requests of one shape run, worked out once per shape and shared by
    their jobs: the request's ``(resources, environment, several replicas)`` it was made
    for, the job wrapper's remote function with the Ray options they ask for (for several
    replicas: the one that takes a replica index), the env vars the wrapper sets, and what
    each replica asks of a node."""

    key: tuple[Any, ...]
    remote: Any
    env: tuple[tuple[str, str], ...]
    ask: Ask


class CallableJob(JobKind):
    """A callable job: its request's :class:`TaskShape`, its pickled ``(fn, args, kwargs)``
    and the current attempt's tasks, with what each replica has reported (its outcome and
    printed lines). Each attempt's tasks take one bytes argument, the payload: the job's
    identity and the pickled call (see :mod:`fray_ray._worker`)."""

    def __init__(self, client: RayClient, shape: TaskShape, call: bytes) -> None:
        super().__init__(client)
        self.ray_client = client
        self.shape = shape
        self.call = call
        self.attempt = 0
        self.refs: tuple[Any, ...] = ()
        # By replica: (outcome, printed lines); None once the attempt is decided.
        self.reported: dict[int, tuple[Outcome, list[str]]] | None = None
        self.printed = False  # a replica printed: the registry holds a streamed copy

    def start(self, job: JobRecord) -> None:
        """Submits one task per replica of the current attempt."""
        client = self.ray_client
        request = job.request
        assert request is not None
        count, attempt = job.replicas, job.begun
        key = None if request.scheduling_timeout is None else f"{job.job_id}#{attempt}"
        where = (client.namespace, client.registry.name, client.echo_logs, self.shape.env)
        payload = pickle.dumps((job.job_id, count, *where, key, self.call))
        remote = self.shape.remote.remote
        refs = (remote(payload),) if count == 1 else tuple(remote(payload, i) for i in range(count))
        with job.lock:
            self.attempt, self.refs, self.reported = attempt, refs, {}
            stopping = job.phase is Phase.STOPPING
        if stopping:  # stopped while its tasks were being submitted
            cancel_refs(refs)
        if key is None:
            job.placed()  # Ray does not say when a task starts: it runs from its submission
        else:
            self._await_placed(job, attempt, key, float(request.scheduling_timeout or 0))
        client.watcher.add(job)

    def _await_placed(self, job: JobRecord, attempt: int, key: str, limit: float) -> None:
        """The attempt is placed once every replica has said it started (the registry
        answers then, or at the scheduling timeout); one that cannot tell counts as placed."""
        client = self.ray_client
        ref = client.registry.ref("wait_placed", key, job.replicas, limit + 5.0)
        if ref is None:
            job.placed()
            return

        def answered(future: Any) -> None:
            try:
                started = len(future.result())
            except Exception:
                started = job.replicas  # the registry is gone: it cannot tell, so go on
            if started >= job.replicas and job.begun == attempt:
                job.placed()

        ref.future().add_done_callback(partial(client._call_soon, answered))

    def collect(self, job: JobRecord, into: dict[Any, Any]) -> bool:
        """Adds the current attempt's unreported refs to ``into`` (ref -> who reports it)."""
        with job.lock:
            reported = self.reported
            if reported is not None:
                for index, ref in enumerate(self.refs):
                    if index not in reported:
                        into[ref] = (job, self.attempt, index)
        return True

    def refresh(self, job: JobRecord) -> float | None:
        """Settles the replicas that have ended, without waiting (``status()``, ``info()``)."""
        if not job.is_done:
            await_ends([job], 0.0, job)
        return None

    def ended(
        self, job: JobRecord, attempt: int, index: int, value: Any, error: BaseException | None
    ) -> None:
        """Replica ``index`` of ``attempt`` ended with ``value`` (or ``error``, what Ray
        raised). The first report per (attempt, replica) counts; the attempt is decided
        once every replica succeeded or one did not (gang semantics: the others are
        cancelled, and the one that did not is the attempt's outcome). Runs in whichever
        thread noticed the end."""
        outcome, lines = _outcome_of(value, error)
        with job.lock:
            reported = self.reported
            if attempt != self.attempt or reported is None or index in reported:
                return
            reported[index] = (outcome, lines)
            if outcome.kind == "succeeded" and len(reported) < job.replicas:
                return
            self.reported = None
            others = [ref for i, ref in enumerate(self.refs) if i not in reported]
            self.refs = ()
        if others:
            cancel_refs(others)
        several = job.replicas > 1
        for i, (_outcome, printed) in sorted(reported.items()):
            if printed:
                self.printed = True
                prefix = f"[{i}] " if several else ""
                job.write("\n".join(printed) + "\n", prefix)
        if several and outcome.kind == "succeeded":
            outcome = Outcome.succeeded([reported[i][0].value for i in range(job.replicas)])
        elif several and outcome.exit_code is not None:  # the user's code failed
            text = f"replica {index}: {outcome.error}"
            outcome = Outcome.failed(outcome.cause, text, outcome.exit_code)
        job.report(outcome)

    def cancel(self, job: JobRecord) -> float:
        """Cancels the attempt's tasks (and the jobs submitted from them), from the event
        thread (not the engine's timer)."""

        def cancel() -> None:
            cancel_refs(self.refs)  # one read of the attempt's tuple of tasks
            self.ray_client.stop_descendants(job.job_id)

        self.ray_client._call_soon(cancel)
        return CANCEL_GRACE_S

    def close(self, job: JobRecord) -> None:
        """The job has ended: the registry's streamed copy of its output is not read again."""
        client = self.ray_client
        if self.printed and not client.mirrors:
            client.registry.ref("ended", job.job_id)

    def lines(self, job: JobRecord) -> list[str]:
        """The finished attempts' lines, and what the running one streamed so far."""
        lines = super().lines(job)
        if not job.is_done:
            lines += self.ray_client.registry.call("logs", job.job_id, default=[])
        return lines

    def pending_reason(self, job: JobRecord) -> str | None:
        """Why the attempt's replicas wait: with a ``scheduling_timeout`` how many have not
        started; without one, whether a replica of its shape may be waiting."""
        request, ask = job.request, self.shape.ask
        if request is None or job.is_done:
            return None
        if request.scheduling_timeout is None:
            who = "a replica may be"
        else:
            key = f"{job.job_id}#{job.begun}"
            started = self.ray_client.registry.call("wait_placed", key, 0, 0.0, default=[])
            waiting = job.replicas - len(started or [])
            if waiting <= 0:
                return None
            who = f"{waiting} of {job.replicas} replica(s)"
        says = self.cached_reason(lambda: cluster_says(ask))
        if says is None and request.scheduling_timeout is None:
            return None
        says = says or "a node has room: it is starting"
        return f"{who} waiting for a node: each asks for {ask.describe()}; {says}"


def _outcome_of(value: Any, error: BaseException | None) -> tuple[Outcome, list[str]]:
    """A replica's outcome and output lines from what its task returned or Ray raised."""
    if error is None:
        if isinstance(value, Printed):
            return Outcome.succeeded(value.value), value.lines
        return Outcome.succeeded(value), []
    reading = read_ray_error(error)
    cause = reading.cause
    lines = printed_lines(cause) if cause is not None else []
    if isinstance(cause, JobExit):
        return Outcome.failed(SystemExit(cause.code), str(cause), cause.code), lines
    if reading.kind == "preemption":
        return Outcome.preempted(reading.error), lines
    if cause is not None and cause is not error:  # the user's code raised it
        return Outcome.failed(cause, reading.error, 1), lines
    return Outcome.failed(cause, f"Ray could not run the job: {reading.error}"), lines


def await_ends(jobs: Collection[JobRecord], timeout: float | None, wakeup: Any) -> bool | None:
    """Waits in this thread, up to ``timeout`` seconds (``None``: no limit), for the
    unreported replicas of ``jobs``' current attempts, collected once, and settles each that
    ends: in slices of :data:`SLICE_S` per 1,000 refs, at most 1 s (``terminate``,
    timeouts and Ctrl-C are noticed, and a failure ends ``wait_all``, within a slice), each
    one bulk ``ray.wait`` over those still running (for a single ref, ``ray.get`` alone: a
    ``ray.wait`` before it costs a job waited on alone about 20 us), then ``ray.get`` of
    those that ended and whose attempt no other thread has decided. Returns whether
    ``wakeup`` is set once every one has ended (here or elsewhere), or one has ended here
    otherwise than succeeded (``wait_all`` fails fast) or begun another attempt (a later
    call collects it), or the time is up; ``None`` where no job is learnt through refs (the
    caller waits as the engine does). Collecting once keeps the Python of a wait for N jobs
    O(N), not O(N) per slice; the growing slice keeps Ray's part about 1 % of a core."""
    pending: dict[Any, Any] = {}
    waited = [job for job in jobs if job.data.collect(job, pending)]
    if not waited:
        return None
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        # A bulk ray.wait costs about a microsecond per ref: the slice grows with the refs
        # (SLICE_S per 1,000, at most 1 s), so waiting costs about 1 % of a core.
        longest = min(1.0, SLICE_S * max(1.0, len(pending) / 1000))
        left = longest if deadline is None else min(longest, deadline - time.monotonic())
        if not pending:  # between two attempts: another thread is starting the next
            waited[0].wait(min(max(left, 0.0), _BETWEEN_S))
            return wakeup.wait(0)
        going_on = _settle(pending, max(left, 0.0))
        if wakeup.wait(0):  # some job ended: those settled elsewhere are not waited for
            for ref in [ref for ref, (job, _a, _i) in pending.items() if job.is_done]:
                del pending[ref]
        if not going_on or not pending or (deadline is not None and time.monotonic() >= deadline):
            return wakeup.wait(0)


def _settle(pending: dict[Any, Any], timeout: float) -> bool:
    """Waits up to ``timeout`` for the ``pending`` refs, reads those that ended (each apart
    where one failed: ``ray.get`` of a list raises only the first error), settles their
    replicas and takes them out; ``False`` if a job of theirs has ended otherwise than
    succeeded or begun another attempt."""
    import ray
    from ray.exceptions import GetTimeoutError

    ready: list[Any] = list(pending)
    wait: float | None = timeout
    if len(ready) > 1:
        ready, _ = ray.wait(ready, num_returns=len(ready), timeout=timeout, fetch_local=False)
        wait = None  # they have ended
        # Those of attempts another thread (the watcher, another waiter) has decided are not
        # read again.
        for ref in [ref for ref in ready if pending[ref][0].data.reported is None]:
            del pending[ref]
        ready = [ref for ref in ready if ref in pending]
    if not ready:
        return True
    try:
        ends = [(value, None) for value in ray.get(ready, timeout=wait)]
    except GetTimeoutError:
        return True
    except Exception:
        ends = [_read(ref) for ref in ready]
    going_on = True
    for ref, (value, error) in zip(ready, ends, strict=True):
        job, attempt, index = pending.pop(ref)
        job.data.ended(job, attempt, index, value, error)
        if job.is_done:
            going_on = going_on and job.status is JobStatus.SUCCEEDED
        elif job.begun != attempt:  # it was retried
            going_on = False
    return going_on


def _read(ref: Any) -> tuple[Any, BaseException | None]:
    """What the ended task ``ref`` returned, or the error Ray raises for it."""
    import ray

    try:
        return ray.get(ref), None
    except Exception as exc:
        return None, exc


def cancel_refs(refs: Sequence[Any]) -> None:
    """Cancels Ray tasks (force: the worker and everything it started dies)."""
    import ray

    for ref in refs:
        try:
            ray.cancel(ref, force=True, recursive=True)
        except Exception as exc:  # already finished, or its owner is gone
            logger.debug("cancel of %s: %s", ref, exc)


class Watcher:
    """One thread per client that waits, as a waiter does (:func:`await_ends`), for every
    attempt still running a second or two after it started (see the module docstring).
    The attempts started are kept in two lists, one per :data:`WATCH_AFTER_S` tick: at
    each tick the older list joins the watched jobs and the newer one becomes the older;
    a tick is one bulk wait for the watched jobs, or a plain wait while there are none.
    Adding an attempt takes no lock and wakes no thread unless the thread is idle."""

    def __init__(self) -> None:
        self._new: list[JobRecord] = []
        self._old: list[JobRecord] = []
        self._cond = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._idle = True  # read without the lock: the thread looks again after setting it
        self._closed = threading.Event()

    def add(self, job: JobRecord) -> None:
        """Queues ``job``'s current attempt (the thread that starts it runs this)."""
        self._new.append(job)
        if self._idle:
            with self._cond:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="fray-ray-watch", daemon=True
                    )
                    self._thread.start()
                self._cond.notify()

    def close(self) -> None:
        """Stops the thread (the client is shut down) within a tick."""
        self._closed.set()
        with self._cond:
            self._cond.notify()

    def _run(self) -> None:
        cond, closed = self._cond, self._closed
        watched: list[JobRecord] = []
        while not closed.is_set():
            with cond:
                if not watched:
                    self._idle = True
                    cond.wait_for(lambda: closed.is_set() or self._new or self._old)
                    self._idle = False
                    cond.wait(WATCH_AFTER_S)  # a tick, not synchronisation
                due, self._old, self._new = self._old, self._new, []
            watched = [job for job in dict.fromkeys([*watched, *due]) if not job.is_done]
            del due  # this frame keeps no job while it waits
            try:
                await_ends(watched, WATCH_AFTER_S, closed)
            except Exception:
                logger.exception("waiting for the tasks of %d jobs failed", len(watched))
                closed.wait(WATCH_AFTER_S)
