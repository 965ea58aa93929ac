"""The contracts user code types against. Backends need not inherit from these; the
conformance suite in ``fray_testing.conformance`` is what checks their behaviour."""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, overload, runtime_checkable

from fray._actor import HostedActor
from fray._types import ActorConfig, JobInfo, JobRequest, JobStatus, ResourceConfig

if TYPE_CHECKING:
    from fray._pool import ActorPool
    from fray._pool_parts import MemberResult

T_co = TypeVar("T_co", covariant=True)


@runtime_checkable
class JobHandle(Protocol):
    """A submitted job."""

    @property
    def job_id(self) -> str:
        """The job's id; hierarchical (``parent/child``) for jobs submitted from a job."""
        ...

    def status(self) -> JobStatus:
        """The job's current status."""
        ...

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished and returns its final status.

        Raises:
            JobFailedError: The job FAILED and ``raise_on_failure`` is set (the user's
                exception chained as ``__cause__`` where known).
            JobTimeoutError: ``timeout`` seconds passed first; the job keeps running.
        """
        ...

    def terminate(self) -> None:
        """Stops the job and its children; returns once they are STOPPED."""
        ...

    @overload
    def logs(
        self,
        max_lines: int | None = 0,
        *,
        follow: Literal[False] = False,
        include_children: bool = False,
    ) -> tuple[str, ...]: ...

    @overload
    def logs(
        self, max_lines: int | None = 0, *, follow: Literal[True], include_children: bool = False
    ) -> Iterator[str]: ...

    def logs(
        self, max_lines: int | None = 0, *, follow: bool = False, include_children: bool = False
    ) -> tuple[str, ...] | Iterator[str]:
        """The job's output lines (stdout and stderr, without newlines) so far, the last
        ``max_lines`` of them (0 or ``None``: all); with ``follow``, an iterator that goes on
        with new ones until the job (and its children, if included) has finished.
        ``include_children`` interleaves child jobs' lines, each prefixed with ``[child-id]``.
        """
        ...

    def info(self) -> JobInfo:
        """Attempts, preemptions, failures, error text, parent and children."""
        ...

    def result(self, timeout: float | None = None) -> Any:
        """The callable's return value (a list, one per replica, when ``replicas > 1``).

        Raises:
            JobFailedError: The job did not succeed, or it runs a command (no value).
            JobTimeoutError: ``timeout`` seconds passed first.
        """
        ...


@runtime_checkable
class ActorFuture(Protocol[T_co]):
    """The pending result of an actor call."""

    def result(self, timeout: float | None = None) -> T_co:
        """The call's return value; re-raises the method's own exception, or
        ``JobTimeoutError`` (``timeout`` passed first) or ``ActorDiedError``."""

        ...

    def done(self) -> bool:
        """Whether the call has finished."""
        ...


class ActorMethod(Protocol[T_co]):
    """A method of a remote actor."""

    def remote(self, *args: Any, **kwargs: Any) -> ActorFuture[T_co]:
        """Starts the call and returns at once."""
        ...

    def __call__(self, *args: Any, **kwargs: Any) -> T_co:
        """Calls and waits for the result."""
        ...

    def submit(self, *args: Any, **kwargs: Any) -> ActorFuture[T_co]:
        """Starts a long-running call: over a connection (hosted actors), the caller polls
        for the outcome, survives a dropped connection, and ``result(timeout)`` cancels the
        call on the server (``ActorUnavailableError``: the server no longer knows it);
        elsewhere the same as :meth:`remote`."""
        ...


@runtime_checkable
class ActorHandle(Protocol):
    """A reference to one actor; picklable, so it can be passed to jobs and other actors.

    Attribute access gives an :class:`ActorMethod`: ``handle.step.remote(x)`` or
    ``handle.step(x)``.
    """

    @property
    def name(self) -> str:
        """The actor's name (``{group}-{index}``)."""
        ...

    def __getattr__(self, method: str) -> ActorMethod[Any]: ...


@runtime_checkable
class ActorGroup(Protocol):
    """``count`` actors of one class, created together."""

    @property
    def ready_count(self) -> int:
        """Actors ready to take calls now."""
        ...

    def wait_ready(self, count: int | None = None, timeout: float | None = 300.0) -> list[Any]:
        """Blocks until ``count`` actors are ready; returns their handles. By default, every
        actor that has not ended cleanly (set its ``shutdown_event``, or was stopped).

        Raises:
            InvalidRequestError: ``count`` is not an integer from 0 to the group size.
            ActorError: Too many actors failed for ``count`` (the first failure chained).
            JobTimeoutError: ``timeout`` passed first (saying why the pending ones wait).
        """
        ...

    def discover_new(self) -> list[Any]:
        """Handles of ready actors not returned by an earlier ``wait_ready``/``discover_new``."""
        ...

    def statuses(self) -> list[JobStatus]:
        """One status per actor: PENDING, RUNNING, SUCCEEDED (it ended itself through
        its ``shutdown_event``), FAILED or STOPPED."""
        ...

    def is_done(self) -> bool:
        """Whether every actor of the group has permanently stopped."""
        ...

    def shutdown(self) -> None:
        """Stops every actor of the group, none left behind; later calls fail with
        ``ActorDiedError``."""
        ...

    def pool(self, **options: Any) -> ActorPool:
        """An :class:`~fray.ActorPool` over this group's members: items go to whichever is
        free; it neither grows nor shrinks the group, and its ``shutdown`` leaves the group
        running. The options are ``create_actor_pool``'s but the sizes, ``resources``,
        ``actor_config`` and ``idle_timeout``.

        Raises:
            InvalidRequestError: A bad option, naming it and what is allowed.
        """
        ...

    def broadcast(
        self, method: str, /, *args: Any, timeout: float | None = None, **kwargs: Any
    ) -> list[MemberResult]:
        """Calls ``method(*args, **kwargs)`` once on every running member, in parallel (at
        most 64 threads however large the group), and returns one
        :class:`~fray.MemberResult` per member in index order: its value, or its error (a
        member that is not running is not called: ``ActorDiedError`` or
        ``ActorUnavailableError``; one that did not answer within ``timeout`` seconds:
        ``JobTimeoutError``). It never raises a member's error itself.

        Raises:
            InvalidRequestError: A bad ``method`` or ``timeout``.
        """
        ...


@runtime_checkable
class Client(Protocol):
    """Submits jobs and creates actors on one backend. Clients are context managers."""

    scheme: str

    def submit(self, request: JobRequest, adopt_existing: bool = True) -> JobHandle:
        """Starts a job.

        Args:
            request: What to run.
            adopt_existing: On backends where job names are unique, return the running job
                of that name instead of raising :class:`JobAlreadyExistsError`.
        """
        ...

    def create_actor(
        self,
        actor_class: type[Any],
        *args: Any,
        name: str,
        resources: ResourceConfig | None = None,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        """Creates one actor and returns its handle once it is ready."""
        ...

    def create_actor_group(
        self,
        actor_class: type[Any],
        *args: Any,
        name: str,
        count: int,
        resources: ResourceConfig | None = None,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> ActorGroup:
        """Creates ``count`` actors named ``{name}-{i}``; returns without waiting."""
        ...

    def create_actor_pool(
        self, actor_class: type[Any], *args: Any, name: str, **options: Any
    ) -> ActorPool:
        """Starts an :class:`~fray.ActorPool` of ``actor_class(*args, **kwargs)`` actors and
        returns at once (items wait for the first member).

        Args:
            actor_class: The members' class; each member builds one instance.
            *args: The constructor's arguments.
            name: The pool's name; its members are ``{name}-{k}-0``.
            **options: The pool's options, the rest are the constructor's keyword arguments:
                ``min_workers`` (1: members kept at all times; 0: none until items come),
                ``max_workers`` (the most members, reached while items wait; default
                ``min_workers``, at least 1), ``resources`` and ``actor_config`` (each
                member's), ``idle_timeout`` (60 s: an idle member is stopped, never below
                ``min_workers``), ``max_item_retries`` (3: times an item is sent again after
                its member died or could not be reached), ``no_members_timeout`` (60 s with
                no member ready, starting or restarting, and none that can be added: every
                pending item fails), ``max_in_flight_per_member`` (1), ``idempotent``
                (False: whether an item that timed out may run again) and ``call_timeout``
                (None: seconds an item may run on a member).

        Raises:
            InvalidRequestError: A bad argument, naming it and what is allowed.
        """
        ...

    def host_actor(
        self,
        actor_class: type[Any],
        *args: Any,
        name: str,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> HostedActor:
        """Runs ``actor_class(*args, **kwargs)`` in this process and serves its methods (an
        ``ActorError`` if ``__init__`` raised, or the backend cannot host here); its
        picklable ``handle`` works from jobs and actors anywhere on the backend, until
        ``shutdown()`` or its own ``shutdown_event`` (it is index 0 of a group ``name``)."""
        ...

    def list_jobs(self) -> list[JobInfo]:
        """Every job this client knows of, oldest first (unfinished ones and the last
        ``FRAY_JOB_HISTORY`` finished ones, where the client keeps its own records)."""

        ...

    def get_job(self, job_id: str) -> JobHandle:
        """A handle to an existing job (``JobNotFoundError``: no such job, or a finished one
        older than the history kept, see :meth:`list_jobs`)."""

        ...

    def shutdown(self, wait: bool = True) -> None:
        """Stops everything this client started and releases its resources."""
        ...

    def __enter__(self) -> Any: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
