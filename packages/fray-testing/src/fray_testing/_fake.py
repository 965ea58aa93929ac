"""FakeClient: a scripted, recording Fray client for unit tests.

Nothing runs in the background. A job's callable runs in-process, inside ``submit()``, in
the caller's thread (with ``fray.current_client()`` set to the fake, so jobs it submits
become its children); scripted outcomes replace or wrap that run. Jobs that must stay
unfinished are scripted with ``Hang()`` (until terminated) or ``Delay()`` (until a deadline
that is checked whenever the job is looked at).
"""

from __future__ import annotations

import itertools
import logging
import secrets
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from fray import (
    ActorConfig,
    ClientSpec,
    HostedActor,
    JobInfo,
    JobRequest,
    JobStatus,
    ResourceConfig,
)
from fray.backend import BaseClient, JobHistory, hosted_init_failed, job_id_part
from fray.errors import (
    InvalidRequestError,
    JobNotFoundError,
)
from fray_testing._actors import FakeActorGroup, FakeActorHandle, _ActorSystem
from fray_testing._fake_jobs import FakeJob, FakeJobHandle, running_job
from fray_testing._outcomes import Outcome, Run, Succeed
from fray_testing._records import ActorCall, ActorCreation, JobSubmission, Record

__all__ = ["FakeClient", "FakeJobHandle"]

logger = logging.getLogger("fray.fake")
T = TypeVar("T")

Handler = Callable[[JobRequest], Outcome | None]
Target = str | Callable[..., Any]


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
        handler: Called with every request; returns the job's :class:`Outcome`, or ``None``
            to fall back to the scripts and then the default.
        outcomes: Initial scripts, as for :meth:`script` (job name or callable → outcome).
        run_callables: Run callables in-process by default. ``False``: jobs succeed with
            ``None`` without running anything unless scripted with ``Run()``.
        target: Check every request (and actor resources) against the capability table of
            this backend (``"local"``, ``"ray"``, ``"iris"``): what that backend refuses at
            submit time is refused here, with its message, so a unit test fails where the
            cluster would.
    """

    scheme = "fake"

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        outcomes: Mapping[Target, Outcome] | None = None,
        run_callables: bool = True,
        target: str | None = None,
    ) -> None:
        self._set_target(target, "FakeClient.target")
        self._handler = handler
        self.run_callables = run_callables
        self._cond = threading.Condition(threading.RLock())
        self._scripts: dict[Any, list[Outcome]] = {}
        for scripted, outcome in (outcomes or {}).items():
            self.script(scripted, outcome)
        self._history: JobHistory[FakeJob] = JobHistory()
        self._events: list[Record] = []
        self._ids = itertools.count(1)
        self._actors = _ActorSystem(self, f"fake-{secrets.token_hex(4)}", self._record)
        self.is_shutdown = False

    @classmethod
    def from_spec(cls, spec: ClientSpec) -> FakeClient:
        """Builds a client from the spec ``fake`` or ``fake?target=ray``."""
        spec.reject_unknown({"target"}, address=False)
        return cls(target=spec.params.get("target"))

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
        self._check_request(request)
        self._check_open()
        parent = running_job.get()
        if parent is not None and parent.client is not self:
            parent = None
        outcome = self._outcome_for(request)
        default = self._default_outcome(request)
        with self._cond:
            self._check_open()
            job_id = f"{job_id_part(request.name)}-{next(self._ids)}"
            if parent is not None:
                job_id = f"{parent.job_id}/{job_id}"
            steps = (outcome or default).steps(default)
            job = FakeJob(self, self._cond, job_id, request, parent, steps)
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
            return [FakeJobHandle(job).info() for job in self._history.values()]

    def _job_finished(self, job_id: str) -> None:
        """Under the client's condition: a job ended (it may age out of the history)."""
        self._history.finished(job_id)

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
        self._check_resources(resources)
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
        self._check_resources(resources)
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

    def host_actor(
        self,
        actor_class: type[T],
        *args: Any,
        name: str,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> HostedActor:
        """Runs ``actor_class(*args, **kwargs)`` now, in this process, as an actor named
        ``name`` (recorded like every actor); ``shutdown()`` stops it."""
        self._check_open()
        group = self._actors.create(
            actor_class,
            args,
            kwargs,
            name=name,
            count=1,
            resources=None,
            actor_config=actor_config,
            group=False,
            hosted=True,
        )
        member = group.members[0]
        if member.status is JobStatus.FAILED:
            error = member.error
            group.shutdown()
            raise hosted_init_failed(name, actor_class, error) from error
        return HostedActor(member.handle, group.shutdown)

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
            roots = [job for job in self._history.values() if job.parent_job is None]
        for job in roots:
            job.terminate()
        self._actors.shutdown_all()
