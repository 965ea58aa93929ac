"""What every client shares: the context manager, ``create_actor`` as a group of one, and
the checks a request goes through before a backend sees it."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

from fray._actor import HostedActor
from fray._types import ActorConfig, JobRequest, ResourceConfig
from fray.backend._capabilities import Capabilities, capabilities_of
from fray.backend._group import validate_actor_args
from fray.backend._hosted_handle import HostedActorHandle
from fray.backend._hosting import host_in_process
from fray.errors import FrayError, InvalidRequestError

__all__ = ["BaseClient", "check_request"]

T = TypeVar("T")


def check_request(request: Any) -> JobRequest:
    """``request`` if it is a :class:`fray.JobRequest`.

    Raises:
        InvalidRequestError: It is not.
    """
    if not isinstance(request, JobRequest):
        raise InvalidRequestError.for_field("submit.request", request, "must be a fray.JobRequest")
    return request


class BaseClient:
    """The plumbing of a client. A backend writes ``submit``, ``get_job``, ``list_jobs``,
    ``create_actor_group`` and ``shutdown`` (which sets :attr:`is_shutdown`).

    Attributes:
        scheme: The backend's spec prefix (``local``, ``ray``, ...).
        capabilities: The backend's own table of refusals (``None``: it refuses nothing a
            valid request can say).
        target: Another backend's table that requests are checked against as well, so a
            test on this client fails where that backend would (``target=`` of the local and
            fake clients).
        is_shutdown: Whether ``shutdown()`` has run.
    """

    scheme: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities | None] = None
    target: Capabilities | None = None
    is_shutdown: bool = False
    _hosted: list[HostedActor] | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    def shutdown(self, wait: bool = True) -> None:
        """Stops the client's jobs and actors and releases what it holds."""
        raise NotImplementedError

    def _set_target(self, target: str | None, field: str) -> None:
        """Checks requests against the table of the backend named ``target`` too."""
        self.target = None if target is None else capabilities_of(target, field=field)

    def _tables(self) -> tuple[Capabilities, ...]:
        return tuple(t for t in (self.target, type(self).capabilities) if t is not None)

    def _check_request(self, request: Any) -> JobRequest:
        """``request`` if it is a :class:`fray.JobRequest` this backend (and the target, if
        any) takes.

        Raises:
            InvalidRequestError: Naming the field refused and what is allowed.
        """
        request = check_request(request)
        for table in self._tables():
            table.check(request)
        return request

    def _check_resources(self, resources: ResourceConfig | None) -> None:
        """Checks an actor's ``resources`` against the same tables."""
        for table in self._tables():
            table.check_resources(resources)

    def _check_open(self) -> None:
        """Raises once the client has been shut down."""
        if self.is_shutdown:
            raise FrayError(f"this {type(self).__name__} has been shut down; create a new one")

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
        raise NotImplementedError

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
        once its ``__init__`` has run.

        Raises:
            ActorError: ``__init__`` raised (chained as ``__cause__``).
        """
        group = self.create_actor_group(
            actor_class,
            *args,
            name=name,
            count=1,
            resources=resources,
            actor_config=actor_config,
            **kwargs,
        )
        return group.wait_ready(timeout=None)[0]

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

    def host_actor(
        self,
        actor_class: type[T],
        *args: Any,
        name: str,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> HostedActor:
        """Runs ``actor_class(*args, **kwargs)`` in this process and serves it on
        :meth:`_hosting_address` to callers holding its handle; see ``fray.Client``.
        :meth:`_stop_hosted` (from ``shutdown``) stops what is still served."""
        self._check_open()
        validate_actor_args(actor_class, name, 1, None, actor_config)
        hosted = host_in_process(
            self,
            actor_class,
            args,
            kwargs,
            name=name,
            actor_config=actor_config,
            host=self._hosting_address(),
            announce=self._announce_hosted,
        )
        if self._hosted is None:
            self._hosted = []
        self._hosted.append(hosted)
        return hosted

    def _stop_hosted(self) -> None:
        """Stops serving every actor this client hosted."""
        hosted, self._hosted = self._hosted or [], None
        for actor in hosted:
            actor.shutdown()
