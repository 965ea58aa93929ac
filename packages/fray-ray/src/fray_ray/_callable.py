"""A callable job on Ray: one Ray task per replica per attempt, and the Fray-side retry loop.

Each task runs with ``max_retries=0``: Ray's single retry counter cannot tell a preemption
from a bug. When an attempt ends, its outcome is classified: the wrapper returns the user's
exception as a value, so any *Ray* error (worker crash, node or owner death, ...) is a
preemption (``fray_ray._convert.is_preemption``), and each class of outcome is charged to its
own budget by the record (``fray.backend.JobRecord.on_failure``/``on_preemption``).
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fray import JobRequest, JobStatus
from fray_ray._book import JobBook
from fray_ray._convert import is_preemption, task_options
from fray_ray._drive import SPAN, drive_jobs
from fray_ray._placement import Ask, pending_reason
from fray_ray._record import RayJob
from fray_ray._worker import Outcome, outcome_of

__all__ = ["CallableJob", "cancel_refs"]

logger = logging.getLogger("fray.ray")
_NO_OUTCOMES: Mapping[int, Any] = types.MappingProxyType({})  # shared, never changed


def cancel_refs(refs: list[Any], *, wait: bool = False) -> None:
    """Cancels Ray tasks (force: the worker and everything it started dies); with ``wait``,
    returns once they have ended (at most a minute)."""
    import ray

    for ref in refs:
        try:
            ray.cancel(ref, force=True, recursive=True)
        except Exception as exc:  # already finished, or its owner is gone
            logger.debug("cancel of %s: %s", ref, exc)
    if wait and refs:
        ray.wait(refs, num_returns=len(refs), timeout=60)


class CallableJob(RayJob):
    """A callable job: one Ray task per replica per attempt.

    Who notices that an attempt ended: whoever waits for it. A thread in ``wait()`` or
    ``result()`` (or ``wait_all``) fetches the outcome itself with one blocking Ray call, which
    is far cheaper than a completion callback handed over from Ray's thread. An attempt that
    nobody waits on for ``fray_ray._watcher.WATCH_AFTER`` seconds gets completion callbacks
    (``watch``), so retries and final states never depend on a waiter; ``status()`` checks
    without blocking.
    """

    __slots__ = (
        "_lone_ref",
        "_refs",
        "claims",
        "env",
        "outcomes",
        "payload",
        "placing",
        "remote",
        "settled",
        "timer",
        "watched",
    )

    def __init__(
        self,
        book: JobBook,
        job_id: str,
        request: JobRequest,
        parent: str | None,
        prepared: tuple[Any, tuple[tuple[str, str], ...], bytes],
        first: Any = None,
    ) -> None:
        """``first``: the ref of a lone replica's first attempt, already submitted by the
        client; the job is then created running (the client watches it, see
        ``fray_ray._submit.Launcher``). Otherwise :meth:`start` starts it."""
        super().__init__(book, job_id, request, parent)
        # The wrapper as a Ray remote function with this request's options, the env vars it
        # sets itself, and the pickled entrypoint (see ``fray_ray._submit.Prepared``).
        self.remote, self.env, self.payload = prepared
        self._lone_ref: Any = first
        self._refs: Sequence[Any] = ()
        # The current attempt's outcomes by replica, once one is recorded (``_record``).
        self.outcomes: Mapping[int, Outcome] = _NO_OUTCOMES
        self.settled = 0
        self.watched = 0  # the attempt that has completion callbacks
        self.claims = 0  # threads fetching this job's outcomes themselves
        self.timer: threading.Timer | None = None  # ends the attempt at JobRequest.timeout
        # Fails an attempt not placed within JobRequest.scheduling_timeout.
        self.placing: threading.Timer | None = None
        if first is not None:
            self.attempts = 1
            self.started_at = self.submitted_at
            self.status = JobStatus.RUNNING
            self._arm_timeout(1)

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

    def _on_end(self) -> None:
        # Its Ray objects are no longer needed: let Ray free them. (Whoever reads them does
        # so under the lock and has looked at ``ended`` first.)
        self._lone_ref, self._refs = None, ()
        self.outcomes = _NO_OUTCOMES
        for timer in (self.timer, self.placing):
            if timer is not None:
                timer.cancel()
        self.timer = self.placing = None
        super()._on_end()

    def start(self) -> None:
        """Starts the next attempt: one Ray task per replica."""
        if not self.mark_running():
            return
        book = self.book
        with self.lock:
            if self.stop_requested or self.ended:
                return
            attempt = self.begin_attempt()
            self.outcomes = _NO_OUTCOMES
            count = self.request.replica_count
            # A job with a scheduling timeout has its replicas say when they start.
            placing = () if self.request.scheduling_timeout is None else (self._key(attempt),)
            refs: list[Any] = []
            for index in range(count):
                ctx = (
                    self.job_id,
                    index,
                    count,
                    book.namespace,
                    book.registry_name,
                    book.echo_logs,
                    self.env,
                    *placing,
                )
                refs.append(self.remote.remote((self.payload, ctx)))
            self.refs = refs
            self._arm_timeout(attempt)
            self._arm_placing(attempt)
            now = bool(self.callbacks) or book.mirrors
        if attempt > 1:  # a waiter may be waiting for this retry's refs
            book.progress.notify(retry=True)
        if now:
            self.watch(attempt)
        else:
            book.watcher.add(self, attempt)

    def _arm_timeout(self, attempt: int) -> None:
        """Under ``lock`` (or before the job is shared): fails the job once ``attempt`` has
        run ``JobRequest.timeout`` seconds, counted from its submission (Ray does not tell when a
        task starts, so time spent waiting for a node counts too)."""
        timeout = self.request.timeout
        if timeout is None:
            return
        if self.timer is not None:
            self.timer.cancel()
        self.timer = threading.Timer(timeout, self._time_out, (attempt,))
        self.timer.daemon = True
        self.timer.start()

    def _time_out(self, attempt: int) -> None:
        """The timer of ``attempt``: the job fails with the record's timeout error (no retry,
        see ``JobRecord.on_timeout``) and the attempt's tasks are cancelled."""
        with self.lock:
            if attempt != self.attempts or self.settled == attempt or self.ended:
                return
            self.settled = attempt  # answers arriving from the cancelled tasks change nothing
            refs = list(self.refs)
            self.on_timeout(len(refs) - len(self.outcomes))
        cancel_refs(refs)
        self.finish(JobStatus.FAILED)

    # -- placement: JobRequest.scheduling_timeout and JobInfo.pending_reason -----------------

    def _key(self, attempt: int) -> str:
        """The registry key under which the replicas of ``attempt`` report their start."""
        return f"{self.job_id}#{attempt}"

    def _arm_placing(self, attempt: int, delay: float | None = None) -> None:
        """Under ``lock``: checks, ``JobRequest.scheduling_timeout`` seconds after
        ``attempt`` was submitted (or after ``delay``), that its replicas were placed."""
        waited = self.request.scheduling_timeout
        if waited is None:
            return
        if self.placing is not None:
            self.placing.cancel()
        self.placing = threading.Timer(
            waited if delay is None else delay, self._check_placed, (attempt,)
        )
        self.placing.daemon = True
        self.placing.start()

    def _unplaced(self) -> tuple[int, int] | None:
        """``(unplaced replicas, attempt)`` of the current attempt, for a job with a
        scheduling timeout (its replicas report their start); ``None`` once it is settled."""
        with self.lock:
            if self.ended or self.settled == self.attempts:
                return None
            attempt, ended = self.attempts, set(self.outcomes)
        started = self.book.registry.call("placed_replicas", self._key(attempt)) or ()
        return self.request.replica_count - len(ended.union(started)), attempt

    def _cluster_says(self, waiting_only: bool) -> str | None:
        """What the cluster has for one replica of this job (see ``fray_ray._placement``);
        ``None`` where it cannot be read (the reason is a courtesy: never fail a job for it)."""
        try:
            return pending_reason(Ask.of(task_options(self.request)[0]), waiting_only=waiting_only)
        except Exception as exc:
            logger.debug("reading why job %s waits failed: %s", self.job_id, exc)
            return None

    def _check_placed(self, attempt: int) -> None:
        """The scheduling timer of ``attempt``. A replica counts as placed once it runs,
        or while no request of its shape waits in the cluster (Ray has given it a node and
        its worker is starting: looked at again a second later). A replica still waiting
        fails the job (no retry: it would wait as long again) with what it asked for and
        what the cluster has; the attempt's tasks are cancelled."""
        found = self._unplaced()
        if found is None or found[1] != attempt or found[0] <= 0:
            return
        unplaced, count = found[0], self.request.replica_count
        cluster = self._cluster_says(waiting_only=True)
        with self.lock:
            if attempt != self.attempts or self.settled == attempt or self.ended:
                return
            if cluster is None:  # nothing of its shape waits: its replicas are starting
                self._arm_placing(attempt, delay=1.0)
                return
            self.settled = attempt  # answers arriving from the cancelled tasks change nothing
            refs = list(self.refs)
            self.cause = None
            self.error = self.unplaced_error(
                f"{unplaced} of {count} replica(s) not placed; {cluster}"
            )
        cancel_refs(refs)
        self.finish(JobStatus.FAILED)

    def _read_pending_reason(self) -> str | None:
        """Why the current attempt waits for a node; ``None`` once its replicas have
        started (a job with a scheduling timeout knows; for others, ``None`` unless a
        request of its shape waits in the cluster)."""
        if self.request.scheduling_timeout is None:
            cluster = self._cluster_says(waiting_only=True)
            prefix = "a replica may be waiting for a node"
        else:
            found = self._unplaced()
            cluster = None if found is None or found[0] <= 0 else self._cluster_says(False)
            prefix = f"{found[0] if found else 0} replica(s) waiting for a node"
        if cluster is None:
            return None
        ask = Ask.of(task_options(self.request)[0]).describe()
        return f"{prefix}: each asks for {ask}; {cluster}"

    def add_done_callback(self, callback: Callable[[], None]) -> bool:
        if not super().add_done_callback(callback):
            return False
        self.watch(self.attempts)  # a callback must not wait for the deferred watch
        return True

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

    def pending_into(self, owners: dict[Any, Any], places: dict[Any, int]) -> int:
        """Adds the refs of the current attempt's replicas without an outcome yet (none
        while the attempt is being settled) to ``owners`` (``ref: job``) and ``places``
        (``ref: attempt * SPAN + index``: an int, not a tuple the garbage collector would
        count); returns how many."""
        with self.lock:
            if self.done.flag or self.settled == self.attempts:
                return 0
            attempt, outcomes = self.attempts, self.outcomes
            count = 0
            for index, ref in enumerate(self.refs):
                if index not in outcomes:
                    owners[ref] = self
                    places[ref] = attempt * SPAN + index
                    count += 1
            return count

    def block(self, timeout: float | None) -> None:
        """Waits for the job in the calling thread, fetching its outcomes (see
        ``fray_ray._drive``); returns when it is done or ``timeout`` passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.lock:
            self.claims += 1
        try:
            if self._lone_ref is not None:
                self._drive_one(deadline)
                if self.done.flag:
                    return
            drive_jobs([self], self.book.progress, deadline, until_all=True)
        finally:
            with self.lock:
                self.claims -= 1

    def _drive_one(self, deadline: float | None) -> None:
        """``block`` for a single replica: one blocking ``ray.get`` per attempt. Returns
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
            self.replica_done(attempt, 0, result)

    def poll(self) -> None:
        """Takes whatever outcomes are ready, without blocking."""
        if self.done.flag:
            return
        with self.lock:
            if self.watched == self.attempts:
                return  # the callbacks keep it current
        drive_jobs([self], self.book.progress, time.monotonic(), until_all=False)

    def _future_done(
        self, attempt: int, index: int, future: concurrent.futures.Future[Any]
    ) -> None:
        try:
            result = future.result()
        except BaseException as exc:
            result = Outcome("ray-error", exc)
        self.replica_done(attempt, index, result)

    def replica_done(self, attempt: int, index: int, result: Any) -> None:
        """Records a replica's outcome (from a completion callback or a waiting thread,
        whichever comes first) and settles the attempt once it is decided. ``result``: what
        the replica's task returned (a bare value or an :class:`Outcome`), or a ``ray-error``
        outcome."""
        refs: list[Any] | None = None
        with self.lock:
            if attempt != self.attempts or self.settled == attempt or self.ended:
                return
            outcome = result if type(result) is Outcome else None
            succeeded = (
                self._lone_ref is not None
                and (outcome is None or outcome.kind == "ok")
                and not self.stop_requested
                and not self.book.mirrors
            )
            if succeeded:  # the fast path, settled here: a lone replica succeeded
                self.settled = attempt  # later answers for this attempt change nothing
                if outcome is None:
                    self.value = result
                else:
                    self.add_lines(outcome.lines)
                    self.value = outcome.value
            else:
                refs = self._record(attempt, index, outcome_of(result))
                if refs is None:
                    return
        if succeeded:
            self.finish(JobStatus.SUCCEEDED)
            return
        if refs:
            cancel_refs(refs)
        self.book.executor.submit(self._settle, attempt)

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
                retry = self.on_failure(exc, error, code, failed_tasks=len(user))
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
        cancel_refs(refs, wait=True)
        self.book.stop_descendants(self.job_id)
        self.finish(JobStatus.STOPPED)

    def live_lines(self) -> list[str]:
        if self.done.flag:
            return list(self.lines)
        return list(self.lines) + self.book.registry.logs(self.job_id)


def _ray_error_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:500]
