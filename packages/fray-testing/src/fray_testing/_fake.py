"""FakeClient: a scripted, recording Fray client for unit tests, on Fray's own engine.

A job's attempts follow its script (:mod:`fray_testing._outcomes`): by default the callable
runs inside ``submit()``, in the caller's thread, with ``fray.current_client()`` the fake.
Retries, budgets, deadlines, terminate and the history are the engine's, as on every
backend. Actors are the local backend's in-process actors, run in the caller's thread, with
every creation and call recorded.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any

from fray import ActorConfig, HostedActor, JobRequest, JobStatus, ResourceConfig
from fray.backend import (
    BaseClient,
    BaseJobHandle,
    ClientSpec,
    JobRecord,
    Outcome,
    Phase,
    PrefixedSink,
    binding,
    capture_into,
)
from fray.errors import ActorDiedError, InvalidRequestError
from fray.local import InProcessActors, LocalActorGroup, LocalActorHandle, LocalActorMethod
from fray_testing._outcomes import Outcome as Script
from fray_testing._outcomes import Run, SimulatedPreemption, Step, Succeed
from fray_testing._records import ActorCall, ActorCreation, JobSubmission, Record

__all__ = [
    "FakeActorFuture",
    "FakeActorGroup",
    "FakeActorHandle",
    "FakeActorMethod",
    "FakeClient",
    "FakeJobHandle",
]
Handler = Callable[[JobRequest], Script | None]
Target = str | Callable[..., Any]

FakeActorHandle = LocalActorHandle
FakeActorMethod = LocalActorMethod
FakeActorGroup = LocalActorGroup
# The default scripts, one of each: every job they script shares their steps.
_RUN, _SUCCEED = Run(), Succeed()


class FakeActorFuture(Future[Any]):
    """The result of a ``.remote()`` call on a fake actor: already done when returned, so
    ``result()`` gives the value or re-raises the method's own exception at once."""


class FakeJobHandle(BaseJobHandle):
    """Handle to a :class:`FakeClient` job; satisfies ``fray.JobHandle``."""

    __slots__ = ()


class FakeClient(BaseClient):
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
        handler: Called with every request; returns the job's outcome (``Run``,
            ``Succeed``, ``Fail``, ``Preempt``, ``Hang``, ``Delay``), or ``None`` to fall
            back to the scripts and then the default.
        outcomes: Initial scripts, as for :meth:`script` (job name or callable → outcome).
        run_callables: Run callables in-process by default. ``False``: jobs succeed with
            ``None`` without running anything unless scripted with ``Run()``.
        target: Check every request (and actor resources) against the capability table of
            this backend (``"local"``, ``"ray"``, ``"iris"``): what that backend refuses at
            submit time is refused here, with its message, so a unit test fails where the
            cluster would.
    """

    scheme = "fake"
    handle_type = FakeJobHandle

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        outcomes: Mapping[Target, Script] | None = None,
        run_callables: bool = True,
        target: str | None = None,
    ) -> None:
        super().__init__(target, "FakeClient.target")
        if handler is not None and not callable(handler):
            raise InvalidRequestError.for_field("FakeClient.handler", handler, "a callable or None")
        self._handler = handler
        self.run_callables = run_callables
        self._scripts: dict[Any, list[Script]] = {}
        self._events: list[Record] = []
        self._ids = itertools.count(1)
        self._failures: list[list[Any]] = []
        self._actors = InProcessActors(
            self, synchronous=True, on_call=self._on_call, future_type=FakeActorFuture
        )
        for scripted, outcome in (outcomes or {}).items():
            self.script(scripted, outcome)

    @classmethod
    def from_spec(cls, spec: ClientSpec) -> FakeClient:
        """Builds a client from the spec ``fake`` or ``fake?target=ray``."""
        spec.reject_unknown({"target"}, address=False)
        return cls(target=spec.params.get("target"))

    # -- scripting ---------------------------------------------------------------------------

    def script(self, target: Target, *outcomes: Script) -> None:
        """Sets what jobs named ``target`` (or whose callable is ``target``) do.

        With several outcomes, successive submissions take them in turn and the last one
        stays. A job name is matched before a callable; ``handler`` before both.
        """
        if not outcomes:
            raise InvalidRequestError.for_field("script.outcomes", (), "give at least one Outcome")
        for outcome in outcomes:
            if not isinstance(outcome, Script):
                raise InvalidRequestError.for_field(
                    "script.outcomes", outcome, "must be Run, Succeed, Fail, Preempt, Hang or Delay"
                )
        if not isinstance(target, str) and not callable(target):
            raise InvalidRequestError.for_field(
                "script.target", target, "must be a job name or a callable"
            )
        with self._lock:
            self._scripts[target] = list(outcomes)

    def _script_for(self, request: JobRequest) -> Script:
        if self._handler is not None:
            outcome = self._handler(request)
            if outcome is not None:
                if not isinstance(outcome, Script):
                    raise InvalidRequestError.for_field(
                        "FakeClient.handler", outcome, "must return an Outcome or None"
                    )
                return outcome
        with self._lock:
            queue = self._scripts.get(request.name)
            if queue is None and request.entrypoint.callable is not None:
                try:
                    queue = self._scripts.get(request.entrypoint.callable)
                except TypeError:  # an unhashable callable cannot have been scripted
                    queue = None
            if queue:
                return queue.pop(0) if len(queue) > 1 else queue[0]
        return self._default(request)

    def _default(self, request: JobRequest) -> Script:
        return _RUN if request.entrypoint.is_callable and self.run_callables else _SUCCEED

    # -- records -----------------------------------------------------------------------------

    @property
    def events(self) -> list[Record]:
        """Every submission, actor creation and actor call, in the order they happened."""
        with self._lock:
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
        """Every ``create_actor()``, ``create_actor_group()`` and ``host_actor()``, in order."""
        return [e for e in self.events if isinstance(e, ActorCreation)]

    @property
    def actor_calls(self) -> list[ActorCall]:
        """Every actor method call, in order."""
        return [e for e in self.events if isinstance(e, ActorCall)]

    def calls_to(self, actor: str, method: str | None = None) -> list[ActorCall]:
        """Calls to the actor (or every actor of the group) named ``actor``, in order."""
        names = {a.name for a in self._actors.matching(actor)}
        return [
            c
            for c in self.actor_calls
            if c.actor in names and (method is None or c.method == method)
        ]

    def _record(self, record: Record) -> None:
        with self._lock:
            self._events.append(record)

    # -- jobs: the engine's hooks ------------------------------------------------------------

    def _prepare(self, request: JobRequest) -> Iterator[Step]:
        return self._script_for(request).steps(self._default(request))  # the record's data

    def _serial(self) -> str:
        return str(next(self._ids))

    def _launch(self, job: JobRecord, adopt_existing: bool) -> None:
        self._record(JobSubmission(job.request, job.job_id, job.parent))  # type: ignore[arg-type]
        super()._launch(job, adopt_existing)

    def _start_attempt(self, job: JobRecord) -> Outcome | None:
        step: Step = next(job.data)
        if step.kind == "hang" and step.value:  # never placed
            return None
        job.placed()
        for line in step.logs:
            job.log.write(line + "\n")
        return self._take(job, step)

    def _take(self, job: JobRecord, step: Step) -> Outcome | None:
        """The attempt's outcome from ``step`` (``None``: it goes on)."""
        if step.kind == "delay":  # the start of an attempt, not one of its own: ``then`` ends it
            self._call_later(step.value, self._after_delay, job, job.begun)
            return None
        ends = {"succeed": Outcome.succeeded, "fail": Outcome.failed, "preempt": Outcome.preempted}
        if step.kind in ends:
            return ends[step.kind](step.value)
        return None if step.kind == "hang" else self._run(job)

    def _run(self, job: JobRecord) -> Outcome:
        request = job.request
        assert request is not None
        entry = request.entrypoint
        if entry.callable is None:
            return Outcome.succeeded(None)
        values: list[Any] = []
        for index in range(job.replicas):
            sink = job if job.replicas == 1 else PrefixedSink(job, index)
            try:
                with binding(self, job=(job.job_id, index, job)), capture_into(sink, False):
                    context = contextvars.copy_context()
                    values.append(context.run(entry.callable, *entry.args, **entry.kwargs))
            except SimulatedPreemption as exc:
                return Outcome.preempted(str(exc) or "simulated preemption")
            except (KeyboardInterrupt, GeneratorExit):
                # Ctrl-C in the test run must not become a job failure, nor leave it hanging.
                job.end(JobStatus.FAILED, "interrupted")
                raise
            except BaseException as exc:
                return Outcome.failed(exc)
        return Outcome.succeeded(values[0] if len(values) == 1 else values)

    def _after_delay(self, job: JobRecord, attempt: int) -> None:
        """A delay is over (from the engine's timer thread): the attempt goes on."""
        if job.phase is Phase.RUNNING and job.begun == attempt:
            outcome = self._take(job, next(job.data))
            if outcome is not None:
                job.report(outcome)

    def _cancel_attempt(self, job: JobRecord) -> float:
        # A hanging or delayed attempt stops now; a callable running in another thread
        # cannot be interrupted: the job ends all the same and its value is dropped.
        job.report(Outcome.stopped())
        return 0.0

    def _pending_reason(self, job: JobRecord) -> str | None:
        return "FakeClient: scripted Hang(pending=True)"

    # -- actors ------------------------------------------------------------------------------

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
    ) -> LocalActorGroup:
        """Creates ``count`` in-process actors named ``{name}-{i}``; each ``__init__`` runs
        now, so the group is ready (or failed) when this returns."""
        self._record(
            ActorCreation(
                name, actor_class, args, dict(kwargs), count, resources, actor_config, not single
            )
        )
        config = actor_config or ActorConfig()
        return self._actors.create(actor_class, args, kwargs, name=name, count=count, config=config)

    def _host_actor(
        self,
        actor_class: type[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        name: str,
        actor_config: ActorConfig | None,
    ) -> HostedActor:
        """Runs the actor now, in this process, as an actor named ``name`` (recorded like
        every actor); ``shutdown()`` stops it."""
        self._record(
            ActorCreation(name, actor_class, args, dict(kwargs), 1, None, actor_config, False)
        )
        config = actor_config or ActorConfig()
        return self._actors.host(actor_class, args, kwargs, name=name, config=config)

    def _on_call(
        self, actor: Any, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        self._record(ActorCall(actor.name, method, args, dict(kwargs)))
        error = self._take_failure(actor.name, actor.group_name, method)
        if error is None:
            return
        if isinstance(error, ActorDiedError):  # as when a real actor's process dies mid-call
            actor.end(JobStatus.FAILED, error)
        raise error

    def _take_failure(self, name: str, group: str, method: str) -> BaseException | None:
        with self._lock:
            for scripted in self._failures:  # [names, method, error, calls left or None]
                names, only, error, left = scripted
                if {name, group} & names and only in (None, method):
                    if left is not None:
                        scripted[3] = left - 1
                        if left == 1:
                            self._failures.remove(scripted)
                    if error is None:
                        return ActorDiedError(
                            f"actor {name} died during {method}() (scripted by FakeClient)"
                        )
                    return error if isinstance(error, BaseException) else error()
        return None

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
        if times is not None and (
            isinstance(times, bool) or not isinstance(times, int) or times < 1
        ):
            raise InvalidRequestError.for_field(
                "fail_actor_call.times", times, "must be an integer >= 1, or None for every call"
            )
        # Scripted before the actor exists is fine: matched by name when called.
        names = {a.name for a in self._actors.matching(actor)} | {actor}
        with self._lock:
            self._failures.append([names, method, error, times])

    def kill_actor(self, actor: str) -> None:
        """Kills the actor (or every actor of the group) named ``actor``: status FAILED,
        every later call raises ``ActorDiedError``.

        Raises:
            InvalidRequestError: No actor or group has that name.
        """
        victims = self._actors.matching(actor)
        if not victims:
            raise InvalidRequestError.for_field(
                "kill_actor.actor", actor, "no actor or actor group of that name in this FakeClient"
            )
        for victim in victims:
            victim.end(
                JobStatus.FAILED, ActorDiedError(f"actor {victim.name} was killed (by FakeClient)")
            )

    def _shutdown(self, wait: bool) -> None:
        self._actors.shutdown()
