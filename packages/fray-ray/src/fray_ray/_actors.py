"""Actors on Ray: a host actor wraps the user's instance; handles pickle by name.

The host sets ``fray.current_actor()`` around ``__init__`` and every call, and binds
``fray.current_client()`` to the actor's client, so an actor can create jobs and call other
actors. Handles carry only the actor's name and namespace and look the actor up on first
use, so a handle pickled into a job or another actor works there.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fray import ActorContext, JobStatus
from fray.backend import bind_actor, bind_client, unbind_actor, unbind_client
from fray.errors import ActorDiedError, ActorError, InvalidRequestError, JobTimeoutError

if TYPE_CHECKING:
    from fray_ray._client import RayClient

__all__ = ["ActorHost", "RayActorFuture", "RayActorGroup", "RayActorHandle", "RayActorMethod"]


class ActorHost:
    """The Ray actor class behind every Fray actor (made remote by the client)."""

    def __init__(
        self,
        cls: type[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        name: str,
        namespace: str,
        index: int,
        group: str,
        registry: str,
    ) -> None:
        from fray_ray._client import RayClient

        self._client = RayClient.for_job(namespace, registry)
        self._context = ActorContext(RayActorHandle(name, namespace), index, group)
        bind_client(self._client)
        self._init_error: BaseException | None = None
        token = bind_actor(self._context)
        try:
            self._instance = cls(*args, **kwargs)
        except BaseException as exc:  # reported by fray_ready, with its own type
            self._init_error = exc
        finally:
            unbind_actor(token)

    def fray_ready(self) -> bool:
        if self._init_error is not None:
            raise self._init_error
        return True


_RESERVED = frozenset(("fray_ready",))


def _invoke(host: ActorHost, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Runs the user's ``method`` with the actor's context set."""
    if host._init_error is not None:
        raise ActorDiedError(f"actor {host._context.handle.name} failed to start")
    token = bind_actor(host._context)
    client_token = bind_client(host._client)
    try:
        return getattr(host._instance, method)(*args, **kwargs)
    except SystemExit:
        # The actor ends for good, as on every backend: an intentional exit, which Ray
        # does not restart (a plain SystemExit would be restarted when max_restarts != 0).
        from ray.actor import exit_actor

        exit_actor()
        raise
    finally:
        unbind_client(client_token)
        unbind_actor(token)


def _forward(method: str) -> Any:
    """An actor method calling the user's ``method``. The generated class is pickled by
    value, so this closure refers only to ``_invoke`` (pickled by reference) and a name."""

    def call(self: ActorHost, *args: Any, **kwargs: Any) -> Any:
        return _invoke(self, method, args, kwargs)

    call.__name__ = call.__qualname__ = method
    return call


def host_class(cls: type[Any]) -> type[ActorHost]:
    """An :class:`ActorHost` subclass with one forwarding method per public method of
    ``cls``, so a call is a plain Ray actor call (same cost as calling a Ray actor)."""
    methods = {
        name: _forward(name)
        for name in dir(cls)
        if not name.startswith("_") and name not in _RESERVED and callable(getattr(cls, name))
    }
    return type(f"Fray{cls.__name__}", (ActorHost,), methods)


def _translate_call_error(exc: BaseException, name: str) -> BaseException:
    """A Ray error from an actor call, as the exception the caller should see."""
    import ray.exceptions as rex

    if isinstance(exc, rex.RayTaskError):
        cause = exc.cause
        if isinstance(cause, BaseException):
            return cause
        return ActorError(f"actor {name}: {exc}")
    if isinstance(exc, rex.GetTimeoutError):
        return JobTimeoutError(f"actor {name} did not answer in time")
    if isinstance(exc, rex.RayActorError | rex.RaySystemError):
        return ActorDiedError(f"actor {name} died: {str(exc).splitlines()[0] if str(exc) else ''}")
    if isinstance(exc, rex.RayError):
        return ActorError(f"actor {name}: {type(exc).__name__}: {exc}")
    return exc


class RayActorFuture:
    """The pending result of an actor call (an ``ObjectRef`` underneath)."""

    __slots__ = ("_name", "_ref")

    def __init__(self, ref: Any, name: str) -> None:
        self._ref = ref
        self._name = name

    def result(self, timeout: float | None = None) -> Any:
        """The call's return value; re-raises the method's own exception."""
        import ray

        try:
            return ray.get(self._ref, timeout=timeout)
        except Exception as exc:
            translated = _translate_call_error(exc, self._name)
            if translated is exc:
                raise
            raise translated from (None if translated is getattr(exc, "cause", None) else exc)

    def done(self) -> bool:
        """Whether the call has finished."""
        import ray

        ready, _ = ray.wait([self._ref], timeout=0)
        return bool(ready)

    def add_done_callback(self, callback: Callable[[RayActorFuture], None]) -> None:
        """Calls ``callback(future)`` once the call has finished."""
        self._ref.future().add_done_callback(lambda _f: callback(self))


class RayActorMethod:
    """``handle.method``: ``.remote(...)`` starts a call, calling it waits."""

    __slots__ = ("_handle", "_method")

    def __init__(self, handle: RayActorHandle, method: str) -> None:
        self._handle = handle
        self._method = method

    def remote(self, *args: Any, **kwargs: Any) -> RayActorFuture:
        """Starts the call and returns at once."""
        actor = self._handle._resolve()
        try:
            ref = getattr(actor, self._method).remote(*args, **kwargs)
        except AttributeError:
            raise AttributeError(
                f"actor {self._handle.name} has no public method {self._method!r}"
            ) from None
        except Exception as exc:
            raise _translate_call_error(exc, self._handle.name) from exc
        return RayActorFuture(ref, self._handle.name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls and waits for the result."""
        return self.remote(*args, **kwargs).result()


class RayActorHandle:
    """A picklable reference to one actor: its name and namespace."""

    __slots__ = ("_actor", "_name", "_namespace")

    def __init__(self, name: str, namespace: str, actor: Any = None) -> None:
        self._name = name
        self._namespace = namespace
        self._actor = actor

    @property
    def name(self) -> str:
        """The actor's name (``{group}-{index}``)."""
        return self._name

    def _resolve(self) -> Any:
        actor = self._actor
        if actor is None:
            import ray

            try:
                actor = ray.get_actor(self._name, namespace=self._namespace)
            except ValueError:
                raise ActorDiedError(
                    f"actor {self._name} does not exist (it was shut down or never created)"
                ) from None
            except Exception as exc:
                raise ActorDiedError(f"actor {self._name} cannot be reached: {exc}") from exc
            self._actor = actor
        return actor

    def __getattr__(self, method: str) -> RayActorMethod:
        if method.startswith("_"):
            raise AttributeError(method)
        return RayActorMethod(self, method)

    def __reduce__(self) -> tuple[Any, ...]:
        return (RayActorHandle, (self._name, self._namespace))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RayActorHandle) and (other._name, other._namespace) == (
            self._name,
            self._namespace,
        )

    def __hash__(self) -> int:
        return hash((self._name, self._namespace))

    def __repr__(self) -> str:
        return f"RayActorHandle({self._name!r}, namespace={self._namespace!r})"


class _Member:
    def __init__(self, handle: RayActorHandle, ready_ref: Any) -> None:
        self.handle = handle
        self.ready_ref = ready_ref
        self.status = JobStatus.PENDING
        self.error: BaseException | None = None


class RayActorGroup:
    """``count`` actors of one class on Ray."""

    def __init__(self, client: RayClient, name: str, members: list[_Member]) -> None:
        self._client = client
        self._name = name
        self._members = members
        self._lock = threading.Lock()
        self._discovered: set[int] = set()
        self._stopped = False

    def __len__(self) -> int:
        return len(self._members)

    def _refresh(self, timeout: float = 0) -> None:
        """Moves members whose constructor has finished to RUNNING or FAILED."""
        import ray

        with self._lock:
            pending = [m for m in self._members if m.status is JobStatus.PENDING]
        if not pending:
            return
        refs = [m.ready_ref for m in pending]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        ready_set = set(ready)
        for member in pending:
            if member.ready_ref not in ready_set:
                continue
            try:
                ray.get(member.ready_ref)
            except Exception as exc:
                error = _translate_call_error(exc, member.handle.name)
                with self._lock:
                    if member.status is JobStatus.PENDING:
                        member.status, member.error = JobStatus.FAILED, error
                self._client.kill_actors([member.handle], wait=False)  # no restarts, no leftovers
            else:
                with self._lock:
                    if member.status is JobStatus.PENDING:
                        member.status = JobStatus.RUNNING

    @property
    def ready_count(self) -> int:
        """Actors ready to take calls now."""
        self._refresh()
        return sum(m.status is JobStatus.RUNNING for m in self._members)

    def wait_ready(self, count: int | None = None, timeout: float | None = 300.0) -> list[Any]:
        """Blocks until ``count`` actors (all when ``None``) are ready; returns their handles."""
        want = len(self._members) if count is None else count
        if (
            isinstance(want, bool)
            or not isinstance(want, int)
            or not 0 <= want <= len(self._members)
        ):
            raise InvalidRequestError.for_field(
                "count", count, f"an integer from 0 to the group size ({len(self._members)})"
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            self._refresh(timeout=0 if left == 0 else min(left if left is not None else 0.25, 0.25))
            running = [i for i, m in enumerate(self._members) if m.status is JobStatus.RUNNING][
                :want
            ]
            if len(running) >= want:
                with self._lock:
                    self._discovered.update(running)
                return [self._members[i].handle for i in running]
            failed = [m for m in self._members if m.status in (JobStatus.FAILED, JobStatus.STOPPED)]
            if len(self._members) - len(failed) < want:
                first = next((m for m in failed if m.error is not None), None)
                message = (
                    f"actor group {self._name}: only {len(self._members) - len(failed)} of "
                    f"{len(self._members)} actors can start, {want} were asked for"
                )
                if first is not None:
                    message += f"; {first.handle.name}: {type(first.error).__name__}: {first.error}"
                cause = first.error if first is not None else None
                if isinstance(cause, ActorError) and cause.__cause__ is not None:
                    cause = cause.__cause__
                raise ActorError(message) from cause
            if deadline is not None and time.monotonic() >= deadline:
                raise JobTimeoutError(
                    f"actor group {self._name}: {len(running)} of {want} actors ready after "
                    f"{timeout}s"
                )

    def discover_new(self) -> list[Any]:
        """Handles of ready actors not returned by an earlier call."""
        self._refresh()
        with self._lock:
            fresh = [
                i
                for i, m in enumerate(self._members)
                if m.status is JobStatus.RUNNING and i not in self._discovered
            ]
            self._discovered.update(fresh)
        return [self._members[i].handle for i in fresh]

    def statuses(self) -> list[JobStatus]:
        """One status per actor: PENDING, RUNNING, FAILED or STOPPED."""
        self._refresh()
        return [m.status for m in self._members]

    def is_done(self) -> bool:
        """Whether every actor of the group has permanently stopped."""
        return all(s in (JobStatus.FAILED, JobStatus.STOPPED) for s in self.statuses())

    def shutdown(self) -> None:
        """Kills every actor of the group and waits until their names are free."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            members = list(self._members)
        self._client.kill_actors([m.handle for m in members])
        with self._lock:
            for member in members:
                if member.status is not JobStatus.FAILED:
                    member.status = JobStatus.STOPPED
        self._client.forget_group(self)

    def __repr__(self) -> str:
        return f"RayActorGroup({self._name!r}, {len(self._members)} actors)"
