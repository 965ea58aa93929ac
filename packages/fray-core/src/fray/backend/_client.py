"""The engine every client runs on: ``submit`` and the attempt loop written once, over a few
hooks each backend writes.

``submit`` (checks, parent, id, history) calls ``_launch``, by default the attempt loop: it
starts an attempt with ``_start_attempt`` and returns; the backend tells the record when it
is placed (``JobRecord.placed``) and how it ended (``JobRecord.report``, from any thread),
and ``JobRecord.settle`` decides whether another follows. Deadlines and ``terminate`` ask
the backend to stop the attempt (``_cancel_attempt``); no thread waits per job.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import secrets
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar, final

from fray import _bound
from fray._actor import HostedActor
from fray._types import ActorConfig, JobInfo, JobRequest, JobStatus, ResourceConfig
from fray.backend._capabilities import Capabilities, capabilities_of
from fray.backend._events import TIMERS, EventThread, Wakeup
from fray.backend._group import validate_actor_args
from fray.backend._outcome import Outcome
from fray.backend._record import JobRecord, Phase, job_id_part
from fray.environment_variables import FRAY_JOB_HISTORY, FRAY_JOB_ID
from fray.errors import FrayError, InvalidRequestError, JobNotFoundError

if TYPE_CHECKING:
    from fray.backend._handle import BaseJobHandle
    from fray.backend._hosted_handle import HostedActorHandle

logger = logging.getLogger("fray")
T = TypeVar("T")


DEFAULT_JOB_HISTORY = 10_000
_PREPARE: Any = object()  # _submit's default: the backend's _prepare works out the data
KEPT_GROUPS = 1_000  # the actor groups a client lists for the dashboard (the most recent)


def job_history_limit() -> int:
    """How many finished jobs a client keeps for ``list_jobs()``/``get_job()``:
    ``FRAY_JOB_HISTORY`` (a whole number >= 0), else 10,000."""
    text = os.environ.get(FRAY_JOB_HISTORY, "").strip()
    if not text:
        return DEFAULT_JOB_HISTORY
    if not text.isdigit():
        raise InvalidRequestError.for_field(
            FRAY_JOB_HISTORY,
            text,
            "a whole number >= 0: how many finished jobs a client keeps for list_jobs() and "
            f"get_job() (default {DEFAULT_JOB_HISTORY})",
        )
    return int(text)


class BaseClient:
    """What every client shares: ``submit`` and the attempt loop, ``terminate``, the job
    history, ``shutdown``, the context manager and the actor plumbing; a backend writes the
    hooks ``fray.backend`` lists (or :meth:`_launch` where its cluster runs the attempts).

    Attributes:
        scheme: The backend's spec prefix (``local``, ``ray``, ...).
        capabilities: The backend's own table of refusals (``None``: refuses nothing).
        handle_type: The class of the handles ``submit`` returns.
        target: Another backend's table that requests are checked against as well, so a
            test on this client fails where that backend would (``target=``).
    """

    scheme: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities | None] = None
    handle_type: ClassVar[type[BaseJobHandle]]
    #: ``EnvironmentConfig`` fields this backend accepts and does not use (meant for
    #: another backend): a request that sets one is warned about, once per client and field.
    ignores: ClassVar[tuple[str, ...]] = ()
    #: Whether the cluster runs a job's attempts and budgets itself (Iris): the backend
    #: then overrides :meth:`_launch` and moves records with ``JobRecord.observe``.
    cluster_runs_attempts: ClassVar[bool] = False

    def __init__(self, target: str | None = None, target_field: str = "target") -> None:
        self.target = None if target is None else capabilities_of(target, field=target_field)
        # What every request is checked against, the target's table first.
        self._checks = tuple(t for t in (self.target, type(self).capabilities) if t is not None)
        self.is_shutdown = False
        self._lock = threading.Lock()
        self._jobs: dict[str, JobRecord] = {}  # unfinished and the last finished ones
        self._finished: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._keep = job_history_limit()
        # Job ids end in a count from a random start: unique in this client, no system call.
        self._serials = itertools.count(secrets.randbits(32))
        self._hosted: list[HostedActor] = []
        self._groups: collections.deque[tuple[Any, str | None]]
        self._groups = collections.deque(maxlen=KEPT_GROUPS)
        self._warned: set[str] = set()
        self._soon = EventThread(f"fray-{self.scheme or 'client'}-events")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(jobs={len(self._jobs)})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- submitting --------------------------------------------------------------------------

    @final
    def submit(self, request: JobRequest, adopt_existing: bool = True) -> Any:
        """Starts a job; see ``fray.Client.submit``. A request that is not a ``JobRequest``,
        or that this backend (or the ``target``) refuses, is an ``InvalidRequestError``."""
        return self._submit(request, adopt_existing)

    @final
    def _submit(
        self,
        request: JobRequest,
        adopt_existing: bool = True,
        *,
        prepared: Any = _PREPARE,
        job_id: str | None = None,
    ) -> Any:
        """``submit``, for a caller that worked out the record's data itself (``prepared``:
        the backend's ``_prepare`` is not called; e.g. a TPU gang ``run_on_pod`` built) or
        chose the job's id (``job_id``)."""
        if not isinstance(request, JobRequest):
            raise InvalidRequestError.for_field(
                "submit.request", request, "must be a fray.JobRequest"
            )
        for table in self._checks:
            table.check(request)
        if self.target is not None:
            self.target.note_once(request.resources, self._warned)
        if self.ignores and request.environment is not None:
            self._warn_ignored(request.environment)
        data = self._prepare(request) if prepared is _PREPARE else prepared
        running = _bound.job.get()  # (the job whose code runs here) or its process's variable
        parent_id = running[0] if running is not None else os.environ.get(FRAY_JOB_ID)
        # Its record, last where the binding has one (a backend may bind (id, index) alone).
        parent = running[-1] if running is not None else None
        if not isinstance(parent, JobRecord) or parent.client is not self:
            parent = None
        job_id = job_id or self._job_id(request.name, parent_id)
        job = JobRecord(self, job_id, request, parent=parent_id, data=data)
        with self._lock:
            self._check_open()
            self._remember(job)
        if parent is not None:
            parent.add_child(job)
        self._launch(job, adopt_existing)
        return self.handle_type(job)

    def _warn_ignored(self, environment: Any) -> None:
        for field in self.ignores:
            if getattr(environment, field) and field not in self._warned:
                self._warned.add(field)
                logger.warning(
                    "%s ignores EnvironmentConfig.%s (it is used on Iris only); the job runs "
                    "without it",
                    type(self).__name__,
                    field,
                )

    def _prepare(self, request: JobRequest) -> Any:
        """Checks what only this backend can check in a request (an ``InvalidRequestError``
        names the field) and works out, once, what its attempts need: the record's ``data``."""
        del request

    def _job_id(self, name: str, parent_id: str | None) -> str:
        """A new job's id: its name as an id part and :meth:`_serial`, under its parent's."""
        part = f"{job_id_part(name)}-{self._serial()}"
        return f"{parent_id}/{part}" if parent_id else part

    def _serial(self) -> str:
        """What makes a new job's id unique in this client: 8 hex digits of a count."""
        return f"{next(self._serials) & 0xFFFFFFFF:08x}"

    @staticmethod
    def _call_later(delay: float, fn: Callable[..., None], *args: Any) -> None:
        """Calls ``fn(*args)`` in ``delay`` seconds from Fray's timer thread (``fn`` must
        not block: the timers run one after another)."""
        TIMERS.call_later(delay, fn, *args)

    def _call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Calls ``fn(*args)`` soon on this client's event thread (one per client, started on
        first use, ended by ``shutdown()``), one call after another: where a backend's library
        calls back on a thread of its own that must not block, the backend hands the work
        here (it may block, and may report a job's end and start its next attempt)."""
        self._soon.put(fn, *args)

    def _launch(self, job: JobRecord, adopt_existing: bool) -> None:
        """Starts a new job: by default its first attempt, through the attempt loop.
        A backend whose cluster runs the attempts (and budgets) itself overrides it and
        ends the record with :meth:`JobRecord.end`."""
        del adopt_existing
        self._run_attempts(job)

    @final
    def _run_attempts(self, job: JobRecord, outcome: Outcome | None = None) -> None:
        """The attempt loop: records ``outcome`` (if any) and starts attempts until one is
        under way or the job has ended. :meth:`JobRecord.report` calls it."""
        while outcome is None or self._settle(job, outcome):
            attempt = job.begin()
            if attempt is None:
                return
            limit = job.request.scheduling_timeout if job.request is not None else None
            if limit is not None:
                self._deadline(job, limit, attempt, Outcome.unplaced(), placing=True)
            try:
                outcome = self._start_attempt(job)
            except Exception as exc:
                logger.exception("%s could not start an attempt of %s", self.scheme, job.job_id)
                outcome = Outcome.failed(exc)
            if outcome is None:
                return

    def _settle(self, job: JobRecord, outcome: Outcome) -> bool:
        if job.deadlines:
            with job.lock:
                deadlines, job.deadlines = job.deadlines, ()
            for entry in deadlines:
                TIMERS.cancel(entry)
        if outcome.kind == "unplaced" and outcome.error is None:
            outcome = Outcome.unplaced(self._pending_reason(job))
        return job.settle(outcome)

    def _placed(self, job: JobRecord) -> None:
        """The current attempt runs: its ``timeout`` starts now."""
        timeout = job.request.timeout if job.request is not None else None
        if timeout is not None:
            self._deadline(job, timeout, job.begun, Outcome.timed_out())

    def _deadline(
        self, job: JobRecord, after: float, attempt: int, outcome: Outcome, placing: bool = False
    ) -> None:
        entry = TIMERS.call_later(after, self._expire, job, attempt, outcome, placing)
        with job.lock:
            job.deadlines = (*job.deadlines, entry)

    def _expire(self, job: JobRecord, attempt: int, outcome: Outcome, placing: bool) -> None:
        if placing and job.phase is Phase.PLACING and job.begun == attempt:
            # Why it is not placed, read now, while it still waits: once the attempt is
            # cancelled, the stop's outcome is what the job ends with.
            try:
                outcome = Outcome.unplaced(self._pending_reason(job))
            except Exception:
                logger.exception("%s could not say why %s waits", self.scheme, job.job_id)
        if job.stop(outcome, attempt=attempt, placing=placing):
            self._cancel(job)

    # -- hooks: the attempts -----------------------------------------------------------------

    def _start_attempt(self, job: JobRecord) -> Outcome | None:
        """Starts the job's current attempt and returns at once: ``None`` once it is under
        way (the backend calls :meth:`JobRecord.placed` when it runs and
        :meth:`JobRecord.report` when it ends), or its outcome if it already ended."""
        raise NotImplementedError

    def _cancel_attempt(self, job: JobRecord) -> float:
        """Begins stopping the current attempt without waiting for it; the backend then
        reports it (any outcome: the engine records why it was stopped). Returns how many
        seconds to give it before the job is recorded STOPPED anyway."""
        raise NotImplementedError

    def _pending_reason(self, job: JobRecord) -> str | None:
        """Why the job waits to be placed, where the backend can tell (read when asked)."""
        del job
        return None

    # -- hooks: reading a job ----------------------------------------------------------------

    def _await(self, jobs: Collection[JobRecord], timeout: float | None, wakeup: Wakeup) -> bool:
        """Waits, in the caller's thread, at most ``timeout`` seconds (``None``: no limit) for
        ``wakeup``, which the end of one of ``jobs`` sets (a handle's ``wait`` passes the
        job's record, ``wait_all`` its own list of finished handles); returns whether it was
        set. By default the records are kept current by events and this only waits.

        A backend that can learn ends in the caller's own thread overrides it: it waits for
        all of ``jobs`` at once (Ray: one bulk wait over their tasks; Iris: one state call
        for all of them), settles those that ended, and still returns within ``timeout``
        of the call and soon after ``wakeup`` is set for another reason (a job stopped,
        a job of another backend ended), so it waits in slices."""
        del jobs
        return wakeup.wait(timeout)

    def _refresh(self, job: JobRecord) -> float | None:
        """Brings the record up to date where state is learnt by asking; returns how long
        until it should be asked again (``None``: the record is kept current by events)."""
        del job
        return None

    def _lines(self, job: JobRecord, include_children: bool, tail: int | None) -> list[str]:
        """The job's output lines so far (the last ``tail`` of them), children's prefixed
        with ``[child-id]`` and interleaved by time."""
        return job.lines(include_children, tail)

    def _result(self, job: JobRecord) -> Any:
        """The value of a SUCCEEDED callable job."""
        return job.value

    def _info(self, job: JobRecord) -> JobInfo:
        """The job's ``JobInfo``."""
        if job.status is JobStatus.PENDING and not job.is_done:
            return job.info(pending_reason=self._pending_reason(job))
        return job.info()

    # -- terminating -------------------------------------------------------------------------

    def _cancel(self, job: JobRecord) -> None:
        """Asks the backend to stop the job's attempt; records it STOPPED anyway if it has
        not stopped within the time the backend asks for."""
        try:
            grace = self._cancel_attempt(job)
        except Exception:
            logger.exception("%s could not stop %s", self.scheme, job.job_id)
            grace = 0.0
        TIMERS.call_later(grace, self._give_up, job, grace)

    def _give_up(self, job: JobRecord, grace: float) -> None:
        if job.is_done:
            return
        # Logged before the job ends, so whoever waits for its end finds the line written.
        logger.warning("job %s did not stop within %gs; left to end on its own", job.job_id, grace)
        job.end(
            JobStatus.STOPPED,
            f"did not stop within {grace:g}s of being stopped (code that cannot be "
            "interrupted, e.g. blocked in C); left to end on its own",
        )

    def _stop(self, jobs: Iterable[JobRecord]) -> None:
        """Stops these jobs without waiting."""
        for job in jobs:
            if job.stop(Outcome.stopped()):
                self._cancel(job)

    def _terminate(self, jobs: Sequence[JobRecord]) -> None:
        """Stops these jobs and every job submitted from them, children first; returns once
        all are finished (within the time their backends ask for)."""
        every = [d for job in jobs for d in (*reversed(job.descendants()), job)]
        self._stop(every)
        for job in every:
            job.wait()

    def _job_ended(self, job: JobRecord) -> None:
        """A job has its final status (before waiters wake): it may age out of the history."""
        with self._lock:
            finished = self._finished
            if job.job_id in self._jobs and job.job_id not in finished:
                finished[job.job_id] = None
                while len(finished) > self._keep:
                    self._jobs.pop(finished.popitem(last=False)[0], None)

    def _after_end(self, job: JobRecord) -> None:
        """After waiters woke: jobs do not outlive the job they were submitted from."""
        if job.children:
            with job.lock:
                children = [child for child in job.children if not child.is_done]
            self._stop(child for c in children for child in (*reversed(c.descendants()), c))

    # -- the history -------------------------------------------------------------------------

    def _remember(self, job: JobRecord) -> None:
        """Under the client's lock: a new job (an id may come back: it runs again)."""
        self._jobs[job.job_id] = job
        self._finished.pop(job.job_id, None)

    def get_job(self, job_id: str) -> Any:
        """A handle to a job of this client, by id.

        Raises:
            JobNotFoundError: No such job here (or a finished one older than the history).
        """
        job = self._jobs.get(job_id) if isinstance(job_id, str) else None
        if job is None:
            raise JobNotFoundError(
                job_id,
                f"no job with id {job_id!r} in this {type(self).__name__} (it keeps every "
                f"unfinished job and the last {self._keep:,} finished ones; {FRAY_JOB_HISTORY} "
                "sets how many)",
            )
        return self.handle_type(job)

    def list_jobs(self) -> list[JobInfo]:
        """Every unfinished job of this client and its most recent finished ones (see
        ``FRAY_JOB_HISTORY``), in submission order."""
        with self._lock:
            jobs = list(self._jobs.values())
        return [self._info(job) for job in jobs]

    # -- checks ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        """Raises once the client has been shut down."""
        if self.is_shutdown:
            raise FrayError(f"this {type(self).__name__} has been shut down; create a new one")

    # -- actors ------------------------------------------------------------------------------

    @final
    def create_actor_group(
        self,
        actor_class: type[T],
        *args: Any,
        name: str,
        count: int,
        resources: ResourceConfig | None = None,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        """Creates ``count`` actors named ``{name}-{i}``; see ``fray.Client``."""
        return self._new_group(actor_class, args, kwargs, name, count, resources, actor_config)

    @final
    def create_actor(
        self,
        actor_class: type[T],
        *args: Any,
        name: str,
        resources: ResourceConfig | None = None,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        """Creates one actor (a group of one, named ``{name}-0``) and returns its handle
        once its ``__init__`` has run (an ``ActorError`` if it raised)."""
        group = self._new_group(
            actor_class, args, kwargs, name, 1, resources, actor_config, single=True
        )
        return group.wait_ready(timeout=None)[0]

    @final
    def create_actor_pool(self, actor_class: type[T], *args: Any, **kwargs: Any) -> Any:
        """An actor pool of ``actor_class`` members that grows with its queue and shrinks
        when idle; see ``fray.Client.create_actor_pool`` (the arguments are the pool's)."""
        from fray._pool import create_actor_pool

        return create_actor_pool(self, actor_class, *args, **kwargs)

    def _new_group(
        self,
        actor_class: type[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        name: str,
        count: int,
        resources: ResourceConfig | None,
        actor_config: ActorConfig | None,
        *,
        single: bool = False,
    ) -> Any:
        self._check_open()
        validate_actor_args(actor_class, name, count, resources, actor_config)
        for table in self._checks:
            table.check_resources(resources)
        if self.target is not None:
            self.target.note_once(resources, self._warned)
        group = self._create_actor_group(
            actor_class,
            args,
            kwargs,
            name=name,
            count=count,
            resources=resources,
            actor_config=actor_config,
            single=single,
        )
        with self._lock:  # with the job that made it, if made inside one
            self._groups.append((group, _bound.current_job_id()))
        return group

    def _actor_groups(self) -> list[tuple[Any, str | None]]:
        """The actor groups this client made (the last :data:`KEPT_GROUPS`), each with the
        id of the job that made it, if any: what ``fray dashboard`` shows of a live client."""
        with self._lock:
            return list(self._groups)

    def _create_actor_group(
        self,
        actor_class: type[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        name: str,
        count: int,
        resources: ResourceConfig | None,
        actor_config: ActorConfig | None,
        single: bool,
    ) -> Any:
        """Creates the group (the arguments are checked); ``single``: for ``create_actor``."""
        raise NotImplementedError

    # -- hosted actors -----------------------------------------------------------------------

    def _hosting_address(self) -> str:
        """The address this process is reached at by the rest of the cluster, for hosted
        actors' servers (loopback by default: a cluster on one machine)."""
        return "127.0.0.1"

    def _announce_hosted(self, handle: HostedActorHandle) -> Callable[[], None]:
        """Makes a hosted actor known where the backend looks names up, once it is built;
        returns what undoes that, run when it stops serving (by default: nothing to do)."""
        del handle
        return lambda: None

    @final
    def host_actor(
        self,
        actor_class: type[T],
        *args: Any,
        name: str,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> HostedActor:
        """Runs ``actor_class(*args, **kwargs)`` in this process, as an actor named
        ``name`` whose handle callers elsewhere can use; see ``fray.Client``."""

        self._check_open()
        validate_actor_args(actor_class, name, 1, None, actor_config)
        hosted = self._host_actor(actor_class, args, kwargs, name, actor_config)
        with self._lock:
            self._hosted.append(hosted)
        return hosted

    def _host_actor(
        self,
        actor_class: type[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        name: str,
        actor_config: ActorConfig | None,
    ) -> HostedActor:
        """Hosts the actor (the arguments are checked): by default served on
        :meth:`_hosting_address` to callers holding its handle."""
        from fray.backend._hosting import host_in_process

        return host_in_process(
            self,
            actor_class,
            args,
            kwargs,
            name=name,
            actor_config=actor_config,
            host=self._hosting_address(),
            announce=self._announce_hosted,
        )

    # -- shutting down -----------------------------------------------------------------------

    @final
    def shutdown(self, wait: bool = True) -> None:
        """Stops every unfinished job (all at once, each within the time its backend asks
        for, then recorded STOPPED anyway) and every actor, and releases what the client
        holds. Later calls do nothing."""
        from fray._client import forget_default

        with self._lock:
            if self.is_shutdown:
                return
            self.is_shutdown = True
            jobs = [job for job in self._jobs.values() if not job.is_done]
            hosted, self._hosted = self._hosted, []
            self._groups.clear()
        self._stop(jobs)
        for job in jobs:
            job.wait()
        for actor in hosted:
            actor.shutdown()
        self._shutdown(wait)
        self._soon.close()
        forget_default(self)

    def _shutdown(self, wait: bool) -> None:
        """Releases what the backend holds (actors, threads, connections); every job has
        ended."""
        del wait
