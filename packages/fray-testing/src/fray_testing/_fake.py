"""FakeClient: a scripted, recording Fray client for unit tests.

Nothing runs in the background. A job's callable runs in-process, inside ``submit()``, in
the caller's thread (with ``fray.current_client()`` set to the fake, so jobs it submits
become its children); scripted outcomes replace or wrap that run. Jobs that must stay
unfinished are scripted with ``Hang()`` (until terminated) or ``Delay()`` (until a deadline
that is checked whenever the job is looked at).
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar

from fray import (
    ActorConfig,
    ClientSpec,
    JobInfo,
    JobRequest,
    JobStatus,
    ResourceConfig,
    set_current_client,
)
from fray._handles import check_result
from fray._history import JobHistory
from fray.errors import (
    FrayError,
    InvalidRequestError,
    JobFailedError,
    JobNotFoundError,
    JobTimeoutError,
)
from fray_testing._actors import FakeActorGroup, FakeActorHandle, _ActorSystem
from fray_testing._capture import capture_output
from fray_testing._outcomes import Outcome, Run, SimulatedPreemption, Step, Succeed
from fray_testing._records import ActorCall, ActorCreation, JobSubmission, Record

__all__ = ["FakeClient", "FakeJobHandle"]

logger = logging.getLogger("fray.fake")
T = TypeVar("T")

Handler = Callable[[JobRequest], Outcome | None]
Target = str | Callable[..., Any]

_running: contextvars.ContextVar[_FakeJob | None] = contextvars.ContextVar(
    "fray_testing_running_job", default=None
)
# One counter for every log line of every fake job, so lines of parents and children
# interleave exactly in the order they were written.
_line_seq = itertools.count()


class _FakeJob:
    """A job and its life. Every field is guarded by ``cond``, shared by the client's jobs.

    Nothing moves a job on in the background: :meth:`advance` runs it as far as it can go
    without waiting, in the caller's thread, and is called by submit() and by every look at
    the job.
    """

    def __init__(
        self,
        client: FakeClient,
        cond: threading.Condition,
        job_id: str,
        request: JobRequest,
        parent: _FakeJob | None,
        steps: Iterator[Step],
    ) -> None:
        self.client = client
        self.cond = cond
        self.job_id = job_id
        self.request = request
        self.parent = parent
        self.children: list[_FakeJob] = []
        self.steps = steps
        self.status = JobStatus.PENDING
        self.attempts = 0
        self.failures = 0
        self.preemptions = 0
        self.error: str | None = None
        self.cause: BaseException | None = None
        self.value: Any = None
        self.lines: list[tuple[int, str]] = []
        self.partial = ""
        self.callbacks: list[Callable[[], None]] = []
        self.hanging = False
        self.driving = False
        self.attempt_open = False
        self.delay_until: float | None = None
        self.timer: threading.Timer | None = None
        self.submitted_at = time.time()
        self.started_at: float | None = None
        self.finished_at: float | None = None

    @property
    def done(self) -> bool:
        return self.status.is_finished

    # -- output ------------------------------------------------------------------------------

    def write(self, text: str) -> None:
        """Appends output; complete lines become log lines."""
        with self.cond:
            *complete, self.partial = (self.partial + text).split("\n")
            self._add(complete)

    def add_lines(self, lines: tuple[str, ...] | list[str]) -> None:
        with self.cond:
            self.flush()
            self._add(list(lines))

    def flush(self) -> None:
        with self.cond:
            if self.partial:
                partial, self.partial = self.partial, ""
                self._add([partial])

    def _add(self, lines: list[str]) -> None:
        if lines:
            self.lines.extend((next(_line_seq), line) for line in lines)
            self.cond.notify_all()

    def log_lines(self, include_children: bool) -> list[str]:
        """The lines so far, children's interleaved in write order and prefixed by id."""
        with self.cond:
            entries = list(self.lines)
            if include_children:
                for child in self.descendants():
                    entries.extend((seq, f"[{child.job_id}] {line}") for seq, line in child.lines)
        entries.sort(key=lambda entry: entry[0])
        return [line for _seq, line in entries]

    def descendants(self) -> list[_FakeJob]:
        found: list[_FakeJob] = []
        stack = list(self.children)
        while stack:
            child = stack.pop(0)
            found.append(child)
            stack.extend(child.children)
        return found

    def info(self) -> JobInfo:
        with self.cond:
            return JobInfo(
                job_id=self.job_id,
                name=self.request.name,
                status=self.status,
                attempts=self.attempts,
                preemptions=self.preemptions,
                failures=self.failures,
                error=self.error,
                parent=self.parent.job_id if self.parent is not None else None,
                children=tuple(child.job_id for child in self.children),
                replicas=self.request.replica_count,
                submitted_at=self.submitted_at,
                started_at=self.started_at,
                finished_at=self.finished_at,
            )

    # -- life --------------------------------------------------------------------------------

    def advance(self) -> None:
        """Moves the job on as far as it goes without waiting, in this thread."""
        while True:
            with self.cond:
                if self.done or self.driving or self.hanging:
                    return
                if self.delay_until is not None:
                    if time.monotonic() < self.delay_until:
                        return
                    self.delay_until = None
                step = next(self.steps)
                never_starts = step.kind == "hang" and step.value
                if self.started_at is None and not never_starts:
                    self.started_at = time.time()
                    self.status = JobStatus.RUNNING
                if not self.attempt_open and not never_starts:
                    self.attempts += 1
                self.attempt_open = False
                self.add_lines(step.logs)
                if step.kind == "delay":
                    # The delay is the start of an attempt, not an attempt of its own.
                    self.attempt_open = True
                    self.delay_until = time.monotonic() + step.value
                    self.arm_timer()
                    self.cond.notify_all()
                    continue
                if step.kind == "hang":
                    self.hanging = True
                    self.cond.notify_all()
                    return
                self.driving = True
            try:
                outcome = self._attempt(step)
            finally:
                with self.cond:
                    self.driving = False
            if not self._settle(outcome):
                return

    def _attempt(self, step: Step) -> tuple[Any, ...]:
        if step.kind == "succeed":
            return ("ok", step.value)
        if step.kind == "fail":
            return ("failed", step.value)
        if step.kind == "preempt":
            return ("preempted", step.value)
        if self.request.entrypoint.callable is None:
            return ("ok", None)
        values: list[Any] = []
        for _replica in range(self.request.replica_count):
            try:
                values.append(contextvars.copy_context().run(self._run_in_process))
            except SimulatedPreemption as exc:
                return ("preempted", str(exc) or "simulated preemption")
            except (KeyboardInterrupt, GeneratorExit):
                # Ctrl-C in the test run must not turn into a job failure, nor leave it hanging.
                with self.cond:
                    self.error = "interrupted"
                self.finish(JobStatus.FAILED)
                raise
            except BaseException as exc:
                return ("failed", exc)
        return ("ok", values[0] if len(values) == 1 else values)

    def _run_in_process(self) -> Any:
        entry = self.request.entrypoint
        assert entry.callable is not None
        _running.set(self)
        with set_current_client(self.client), capture_output(self.write):
            try:
                return entry.callable(*entry.args, **entry.kwargs)
            finally:
                self.flush()

    def _settle(self, outcome: tuple[Any, ...]) -> bool:
        """Records an attempt's outcome; returns whether another attempt follows."""
        request = self.request
        kind = outcome[0]
        with self.cond:
            if self.done:  # terminated while the callable ran: its outcome no longer counts
                return False
            if kind == "ok":
                self.value = outcome[1]
                final = JobStatus.SUCCEEDED
            elif kind == "failed":
                exc: BaseException = outcome[1]
                self.failures += 1
                self.cause, self.error = exc, f"{type(exc).__name__}: {exc}"
                if self.failures <= request.max_retries_failure:
                    self.add_lines(
                        [f"[fray] attempt {self.attempts} failed ({self.error}); retrying"]
                    )
                    return True
                final = JobStatus.FAILED
            else:
                message: str = outcome[1]
                self.preemptions += 1
                self.error = message
                if self.preemptions <= request.max_retries_preemption:
                    self.add_lines(
                        [f"[fray] attempt {self.attempts} was preempted ({message}); retrying"]
                    )
                    return True
                self.cause = None
                self.error = (
                    f"preempted {self.preemptions} times, more than max_retries_preemption="
                    f"{request.max_retries_preemption}; last: {message}"
                )
                final = JobStatus.FAILED
        self.finish(final)
        return False

    def finish(self, status: JobStatus) -> None:
        with self.cond:
            if self.done:
                return
            self.status = status
            self.finished_at = time.time()
            self.hanging = False
            self.delay_until = None
            self.flush()
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            callbacks, self.callbacks = self.callbacks, []
            children = [child for child in self.children if not child.done]
            self.client._job_finished(self.job_id)
            self.cond.notify_all()
        for child in children:  # children do not outlive their parent
            child.terminate()
        for callback in callbacks:
            try:
                callback()
            except Exception:
                logger.exception("a done-callback of job %s raised", self.job_id)

    def terminate(self) -> None:
        for child in list(self.children):
            child.terminate()
        # A callable running in another thread cannot be interrupted; the job is STOPPED
        # anyway and whatever the callable returns is dropped.
        self.finish(JobStatus.STOPPED)

    def add_callback(self, callback: Callable[[], None]) -> bool:
        """Registers ``callback`` for the job's end; ``False`` if it has already ended."""
        self.advance()
        with self.cond:
            if self.done:
                return False
            self.callbacks.append(callback)
            self.arm_timer()
            return True

    def arm_timer(self) -> None:
        """Starts a timer for a delayed job that someone waits on by callback."""
        with self.cond:
            if self.timer is not None or self.delay_until is None or not self.callbacks:
                return
            timer = threading.Timer(max(self.delay_until - time.monotonic(), 0.0), self._on_timer)
            timer.daemon = True
            self.timer = timer
            timer.start()

    def _on_timer(self) -> None:
        with self.cond:
            self.timer = None
        self.advance()
        self.arm_timer()


class FakeJobHandle:
    """Handle to a :class:`FakeClient` job; satisfies ``fray.JobHandle``."""

    __slots__ = ("_job",)

    def __init__(self, job: _FakeJob) -> None:
        self._job = job

    @property
    def job_id(self) -> str:
        """The job's id (``parent-id/name-N`` for jobs submitted from a job)."""
        return self._job.job_id

    def status(self) -> JobStatus:
        """The job's current status (a delayed job whose time has come moves on first)."""
        self._job.advance()
        return self._job.status

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished; see ``fray.JobHandle.wait``.

        Raises:
            JobFailedError: The job FAILED and ``raise_on_failure`` is set.
            JobTimeoutError: ``timeout`` seconds passed first.
        """
        job = self._job
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job.advance()
            with job.cond:
                if job.done:
                    break
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    raise JobTimeoutError(
                        f"job {job.job_id} is still {job.status.value} after {timeout}s"
                    )
                wake = deadline
                if job.delay_until is not None:
                    wake = job.delay_until if wake is None else min(wake, job.delay_until)
                job.cond.wait(None if wake is None else max(wake - now, 0.0))
        if job.status is JobStatus.FAILED and raise_on_failure:
            raise JobFailedError(job.job_id, job.status, job.error) from job.cause
        return job.status

    def result(self, timeout: float | None = None) -> Any:
        """The job's value; see ``fray.JobHandle.result``.

        Raises:
            JobFailedError: The job did not succeed, or it is a command job.
            JobTimeoutError: ``timeout`` seconds passed first.
        """
        status = self.wait(timeout)
        job = self._job
        check_result(job.job_id, status, job.error, is_callable=job.request.entrypoint.is_callable)
        return job.value

    def terminate(self) -> None:
        """Stops the job and its children; returns once they are STOPPED."""
        self._job.terminate()

    def logs(self, *, follow: bool = False, include_children: bool = False) -> Iterator[str]:
        """The job's output lines, without newlines; see ``fray.JobHandle.logs``.

        Lines are what the callable printed while running in-process, plus the scripted
        outcome's ``logs``. Child lines are prefixed with ``[child-id]``.
        """
        job = self._job
        sent = 0
        while True:
            job.advance()
            with job.cond:
                lines = job.log_lines(include_children)
                fresh = lines[sent:]
                finished = job.done and (
                    not include_children or all(d.done for d in job.descendants())
                )
                if not fresh and follow and not finished:
                    wake = job.delay_until
                    job.cond.wait(None if wake is None else max(wake - time.monotonic(), 0.0))
                    continue
            sent += len(fresh)
            yield from fresh
            if not follow or finished:
                return

    def info(self) -> JobInfo:
        """Attempts, preemptions, failures, error, parent and children."""
        self._job.advance()
        return self._job.info()

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Calls ``callback(handle)`` once the job is finished (at once if it already is).

        ``fray.wait_all`` uses this to wait without polling. For a job in a ``Delay``, this
        starts one timer thread that moves the job on when the delay ends.
        """
        if not self._job.add_callback(lambda: callback(self)):
            callback(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FakeJobHandle) and other._job is self._job

    def __hash__(self) -> int:
        return hash(self._job.job_id)

    def __repr__(self) -> str:
        return f"FakeJobHandle({self._job.job_id!r}, {self._job.status.value})"


class FakeClient:
    """A Fray client for unit tests: records every request and scripts every outcome.

    By default a job runs its callable in-process, inside ``submit()``, and finishes before
    ``submit()`` returns; command jobs succeed without running. Script other outcomes per
    job name or per callable with :meth:`script`, or for any request with ``handler``::

        client = FakeClient()
        client.script("train", Preempt(2))            # two preemptions, then run
        client.script("eval", Fail(ValueError("bad")))
        client.script(serve_forever, Hang())           # every job running serve_forever

    Actors are real in-process instances, so calls return real values; every creation and
    call is recorded. :meth:`fail_actor_call` and :meth:`kill_actor` script actor deaths.

    Args:
        handler: Called with every request; returns the job's :class:`Outcome`, or ``None``
            to fall back to the scripts and then the default.
        outcomes: Initial scripts, as for :meth:`script` (job name or callable → outcome).
        run_callables: Run callables in-process by default. ``False``: jobs succeed with
            ``None`` without running anything unless scripted with ``Run()``.
    """

    scheme = "fake"

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        outcomes: Mapping[Target, Outcome] | None = None,
        run_callables: bool = True,
    ) -> None:
        self._handler = handler
        self.run_callables = run_callables
        self._cond = threading.Condition(threading.RLock())
        self._scripts: dict[Any, list[Outcome]] = {}
        for target, outcome in (outcomes or {}).items():
            self.script(target, outcome)
        self._history: JobHistory[_FakeJob] = JobHistory()
        self._events: list[Record] = []
        self._ids = itertools.count(1)
        self._actors = _ActorSystem(self, f"fake-{secrets.token_hex(4)}", self._record)
        self.is_shutdown = False

    @classmethod
    def from_spec(cls, spec: ClientSpec) -> FakeClient:
        """Builds a client from the spec ``fake`` (``FRAY_CLIENT_SPEC=fake``)."""
        spec.reject_unknown(set(), address=False)
        return cls()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"FakeClient(jobs={len(self._history)}, events={len(self._events)})"

    # -- scripting ---------------------------------------------------------------------------

    def script(self, target: Target, *outcomes: Outcome) -> None:
        """Sets what jobs named ``target`` (or whose callable is ``target``) do.

        With several outcomes, successive submissions take them in turn and the last one
        stays. A job name is matched before a callable; ``handler`` before both.
        """
        if not outcomes:
            raise InvalidRequestError.for_field("script.outcomes", (), "give at least one Outcome")
        for outcome in outcomes:
            if not isinstance(outcome, Outcome):
                raise InvalidRequestError.for_field(
                    "script.outcomes", outcome, "must be Run, Succeed, Fail, Preempt, Hang or Delay"
                )
        if not isinstance(target, str) and not callable(target):
            raise InvalidRequestError.for_field(
                "script.target", target, "must be a job name or a callable"
            )
        with self._cond:
            self._scripts[target] = list(outcomes)

    def _outcome_for(self, request: JobRequest) -> Outcome | None:
        if self._handler is not None:
            outcome = self._handler(request)
            if outcome is not None:
                if not isinstance(outcome, Outcome):
                    raise InvalidRequestError.for_field(
                        "FakeClient.handler", outcome, "must return an Outcome or None"
                    )
                return outcome
        with self._cond:
            queue = self._scripts.get(request.name)
            if queue is None and request.entrypoint.callable is not None:
                try:
                    queue = self._scripts.get(request.entrypoint.callable)
                except TypeError:  # an unhashable callable cannot have been scripted
                    queue = None
            if not queue:
                return None
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def _default_outcome(self, request: JobRequest) -> Outcome:
        if request.entrypoint.is_callable and self.run_callables:
            return Run()
        return Succeed()

    # -- records -----------------------------------------------------------------------------

    @property
    def events(self) -> list[Record]:
        """Every submission, actor creation and actor call, in the order they happened."""
        with self._cond:
            return list(self._events)

    @property
    def submissions(self) -> list[JobSubmission]:
        """Every ``submit()``, in order."""
        return [e for e in self.events if isinstance(e, JobSubmission)]

    @property
    def requests(self) -> list[JobRequest]:
        """Every submitted ``JobRequest``, in order."""
        return [s.request for s in self.submissions]

    def requests_named(self, name: str) -> list[JobRequest]:
        """The submitted requests whose name is ``name``, in order."""
        return [r for r in self.requests if r.name == name]

    @property
    def actor_creations(self) -> list[ActorCreation]:
        """Every ``create_actor()`` and ``create_actor_group()``, in order."""
        return [e for e in self.events if isinstance(e, ActorCreation)]

    @property
    def actor_calls(self) -> list[ActorCall]:
        """Every actor method call, in order."""
        return [e for e in self.events if isinstance(e, ActorCall)]

    def calls_to(self, actor: str, method: str | None = None) -> list[ActorCall]:
        """Calls to the actor (or every actor of the group) named ``actor``, in order."""
        names = self._actors.names_matching(actor)
        return [
            c
            for c in self.actor_calls
            if c.actor in names and (method is None or c.method == method)
        ]

    def _record(self, record: Record) -> None:
        with self._cond:
            self._events.append(record)

    # -- jobs --------------------------------------------------------------------------------

    def submit(self, request: JobRequest, *, adopt_existing: bool = True) -> FakeJobHandle:
        """Records the request and starts the job; see :class:`FakeClient` for what runs.

        Job names need not be unique: every submit is a new job, so ``adopt_existing`` has
        nothing to adopt.
        """
        del adopt_existing
        if not isinstance(request, JobRequest):
            raise InvalidRequestError.for_field(
                "submit.request", request, "must be a fray.JobRequest"
            )
        self._check_open()
        parent = _running.get()
        if parent is not None and parent.client is not self:
            parent = None
        outcome = self._outcome_for(request)
        default = self._default_outcome(request)
        with self._cond:
            self._check_open()
            job_id = f"{request.name}-{next(self._ids)}"
            if parent is not None:
                job_id = f"{parent.job_id}/{job_id}"
            steps = (outcome or default).steps(default)
            job = _FakeJob(self, self._cond, job_id, request, parent, steps)
            self._history.add(job_id, job)
            if parent is not None:
                parent.children.append(job)
            self._events.append(
                JobSubmission(request, job_id, parent.job_id if parent is not None else None)
            )
        job.advance()
        return FakeJobHandle(job)

    def get_job(self, job_id: str) -> FakeJobHandle:
        """A handle to a job of this client, by id.

        Raises:
            JobNotFoundError: No such job, or a finished one older than the history keeps.
        """
        job = self._history.get(job_id)
        if job is None:
            raise JobNotFoundError(job_id, self._history.not_found(job_id, "FakeClient"))
        return FakeJobHandle(job)

    def list_jobs(self) -> list[JobInfo]:
        """Every unfinished job of this client and its most recent finished ones (see
        ``FRAY_JOB_HISTORY``), in submission order."""
        with self._cond:
            return [job.info() for job in self._history.values()]

    def _job_finished(self, job_id: str) -> None:
        """Under the client's condition: a job ended (it may age out of the history)."""
        self._history.finished(job_id)

    def _check_open(self) -> None:
        if self.is_shutdown:
            raise FrayError("this FakeClient has been shut down; create a new one")

    # -- actors ------------------------------------------------------------------------------

    def create_actor(
        self,
        actor_class: type[T],
        *args: Any,
        name: str,
        resources: ResourceConfig | None = None,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> FakeActorHandle:
        """Creates one in-process actor (its ``__init__`` runs now) and returns its handle.

        Raises:
            ActorError: ``__init__`` raised (chained as ``__cause__``).
        """
        self._check_open()
        group = self._actors.create(
            actor_class,
            args,
            kwargs,
            name=name,
            count=1,
            resources=resources,
            actor_config=actor_config,
            group=False,
        )
        return group.wait_ready()[0]

    def create_actor_group(
        self,
        actor_class: type[T],
        *args: Any,
        name: str,
        count: int,
        resources: ResourceConfig | None = None,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> FakeActorGroup:
        """Creates ``count`` in-process actors named ``{name}-{i}``; each ``__init__`` runs
        now, so the group is ready (or failed) when this returns."""
        self._check_open()
        return self._actors.create(
            actor_class,
            args,
            kwargs,
            name=name,
            count=count,
            resources=resources,
            actor_config=actor_config,
            group=True,
        )

    def fail_actor_call(
        self,
        actor: str,
        method: str | None = None,
        *,
        error: BaseException | type[BaseException] | None = None,
        times: int | None = 1,
    ) -> None:
        """Makes the next ``times`` matching calls raise ``error`` instead of running.

        Args:
            actor: An actor's name (``{group}-{index}``) or a group's name (any of its actors).
            method: Only calls of this method; ``None``: any method.
            error: What the call raises; default ``ActorDiedError``. An ``ActorDiedError``
                also kills the actor: its later calls raise ``ActorDiedError`` and its
                status becomes FAILED, as when a real actor's process dies mid-call.
            times: How many calls fail; ``None``: every matching call.
        """
        self._actors.script_failure(actor, method, error, times)

    def kill_actor(self, actor: str) -> None:
        """Kills the actor (or every actor of the group) named ``actor``: status FAILED,
        every later call raises ``ActorDiedError``.

        Raises:
            InvalidRequestError: No actor or group has that name.
        """
        self._actors.kill(actor)

    # -- shutdown ----------------------------------------------------------------------------

    def shutdown(self, wait: bool = True) -> None:
        """Stops every unfinished job and every actor. Later submits raise ``FrayError``."""
        del wait
        with self._cond:
            if self.is_shutdown:
                return
            self.is_shutdown = True
            roots = [job for job in self._history.values() if job.parent is None]
        for job in roots:
            job.terminate()
        self._actors.shutdown_all()
