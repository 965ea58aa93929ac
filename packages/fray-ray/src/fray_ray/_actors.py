"""Actors on Ray, as callers see them: handles that pickle by name, futures, and groups.

Handles carry only the actor's name and namespace and look the actor up on first use, so a
handle pickled into a job or another actor works there. A call whose actor is restarting
raises :class:`~fray.errors.ActorUnavailableError` (Ray's ``ActorUnavailableError``; with
``max_task_retries`` Ray retries it first), one whose actor is gone for good
:class:`~fray.errors.ActorDiedError`. Once this process is no longer connected to Ray (its
client shut down), every call and future raises ``ActorDiedError`` instead of starting a
new Ray. The actor side (the host around the user's instance) is ``fray_ray._host``.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from fray import JobStatus
from fray.backend import ActorMember, BaseActorGroup
from fray.errors import ActorDiedError, ActorError, ActorUnavailableError, JobTimeoutError
from fray_ray._convert import Ask
from fray_ray._placement import cluster_says
from fray_ray._registry import RegistryLink
from fray_ray.errors import first_line, user_cause

__all__ = ["RayActorFuture", "RayActorGroup", "RayActorHandle", "placed_key", "start_members"]

logger = logging.getLogger("fray.ray")

_CALL_METHOD = "fray_dunder_call"  # fray_ray._host.CALL_METHOD (that module imports this one)
_KILL_WAIT_S = 10.0  # how long kill_actors waits for the killed actors' names to be free


def actor_error(exc: BaseException, what: str) -> BaseException:
    """The exception a caller of an actor method should see for ``exc``: the user's own
    exception raised by the method, ``JobTimeoutError`` for a wait that ran out,
    ``ActorUnavailableError`` for an actor that is restarting or cannot be reached now (Ray's
    ``ActorUnavailableError``), ``ActorDiedError`` for one that is gone for good,
    ``ActorError`` for any other Ray error; anything else unchanged.

    Args:
        exc: What the Ray call raised.
        what: The actor, in words (e.g. ``"actor trainer-0"``).
    """
    from ray import exceptions as rx

    cause = user_cause(exc)
    if cause is not None:
        return cause
    if isinstance(exc, rx.RayTaskError):
        return ActorError(f"{what}: {exc}")
    if isinstance(exc, rx.GetTimeoutError):
        return JobTimeoutError(f"{what} did not answer in time")
    if isinstance(exc, rx.ActorUnavailableError):
        return ActorUnavailableError(
            f"{what} is unavailable (restarting, or cannot be reached now): {first_line(exc)}"
        )
    if isinstance(exc, rx.RayActorError | rx.RaySystemError):
        message = f"{what} died: {first_line(exc)}"
        cause = cause_line(exc)
        if cause is not None and cause not in message:
            message += f" ({cause})"
            if cause.startswith(("ModuleNotFoundError", "ImportError")):
                message += (
                    "; the worker cannot import the actor's code: install it on the workers, "
                    "or ship it with EnvironmentConfig(workspace=...) or pip_packages"
                )
        return ActorDiedError(message)
    if isinstance(exc, rx.RayError):
        return ActorError(f"{what}: {type(exc).__name__}: {exc}")
    return exc


_CAUSE_LINE = re.compile(r"^\s*((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit)): (.*)$")


def cause_line(exc: BaseException) -> str | None:
    """The last ``SomeError: text`` line in a Ray error's message: the worker-side cause
    Ray embeds in the text of, for example, an actor whose creation task failed."""
    found = None
    for line in str(exc).splitlines():
        match = _CAUSE_LINE.match(line)
        if match is not None:
            found = f"{match.group(1).rsplit('.', 1)[-1]}: {match.group(2).strip()}"
    return found[:500] if found is not None else None


def placed_key(namespace: str, name: str) -> str:
    """The registry key under which an actor says it was placed."""
    return f"actor:{namespace}/{name}"


def _connected(what: str) -> None:
    """Raises ``ActorDiedError`` once this process is no longer connected to Ray: asking
    Ray then would start a new local Ray instead."""
    import ray

    if not ray.is_initialized():
        raise ActorDiedError(f"{what}: this process is no longer connected to Ray (shut down)")


def _raise_call_error(exc: Exception, name: str) -> NoReturn:
    """Raises what a failed call's ``ray.get`` error means: the method's own exception, or
    Fray's for a dead, restarting or unreachable actor."""
    _connected(f"actor {name}")
    translated = actor_error(exc, f"actor {name}")
    if translated is exc:
        raise exc
    raise translated from (None if translated is getattr(exc, "cause", None) else exc)


@dataclasses.dataclass(slots=True, eq=False)
class RayActorFuture:
    """The pending result of an actor call (an ``ObjectRef`` underneath)."""

    _ref: Any
    _name: str

    def result(self, timeout: float | None = None) -> Any:
        """The call's return value; re-raises the method's own exception.

        Raises:
            ActorUnavailableError: The actor is restarting (the call was lost with it).
            ActorDiedError: The actor is gone, or this process's client was shut down.
            JobTimeoutError: ``timeout`` passed first.
        """
        import ray

        _connected(f"actor {self._name}")
        try:
            return ray.get(self._ref, timeout=timeout)
        except Exception as exc:
            _raise_call_error(exc, self._name)

    def done(self) -> bool:
        """Whether the call has finished (also once the process has left Ray)."""
        import ray

        if not ray.is_initialized():
            return True
        ready, _ = ray.wait([self._ref], timeout=0)
        return bool(ready)

    def add_done_callback(self, callback: Callable[[RayActorFuture], None]) -> None:
        """Calls ``callback(future)`` once the call has finished."""
        self._ref.future().add_done_callback(lambda _f: callback(self))


@dataclasses.dataclass(slots=True, eq=False)
class RayActorMethod:
    """``handle.method``: ``.remote(...)`` starts a call, calling it waits."""

    _handle: RayActorHandle
    _method: str

    def remote(self, *args: Any, **kwargs: Any) -> RayActorFuture:
        """Starts the call and returns at once."""
        handle = self._handle
        _connected(f"actor {handle.name}")
        actor = handle._resolve()
        try:
            ref = getattr(actor, self._method).remote(*args, **kwargs)
        except AttributeError:
            raise AttributeError(
                f"actor {handle.name} has no public method {self._method!r}"
            ) from None
        except Exception as exc:
            _raise_call_error(exc, handle.name)
        return RayActorFuture(ref, handle.name)

    def submit(self, *args: Any, **kwargs: Any) -> RayActorFuture:
        """A long-running call: on Ray the same as :meth:`remote` (Ray keeps the call
        across connection drops itself)."""
        return self.remote(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls and waits for the result."""
        return self.remote(*args, **kwargs).result()


@dataclasses.dataclass(unsafe_hash=True)
class RayActorHandle:
    """A picklable reference to one actor: its name (``{group}-{index}``) and namespace;
    equal handles name the same actor."""

    name: str
    _namespace: str
    _actor: Any = dataclasses.field(default=None, compare=False)

    def _resolve(self) -> Any:
        actor = self._actor
        if actor is None:
            import ray

            _connected(f"actor {self.name}")
            try:
                actor = ray.get_actor(self.name, namespace=self._namespace)
            except ValueError:
                raise ActorDiedError(
                    f"actor {self.name} does not exist (it was shut down or never created)"
                ) from None
            except Exception as exc:
                raise ActorDiedError(f"actor {self.name} cannot be reached: {exc}") from exc
            self._actor = actor
        return actor

    def __getattr__(self, method: str) -> RayActorMethod:
        if method.startswith("_"):
            raise AttributeError(method)
        return RayActorMethod(self, method)

    @property
    def __call__(self) -> RayActorMethod:  # pyright: ignore[reportIncompatibleMethodOverride]
        """The actor's own ``__call__``: ``handle(x)`` blocks, ``handle.__call__.remote(x)``
        returns a future."""
        return RayActorMethod(self, _CALL_METHOD)

    def __reduce__(self) -> tuple[Any, ...]:
        return (RayActorHandle, (self.name, self._namespace))

    def __repr__(self) -> str:
        return f"RayActorHandle({self.name!r}, namespace={self._namespace!r})"


def kill_actors(handles: Sequence[RayActorHandle], *, wait: bool = True) -> None:
    """Kills actors for good and, with ``wait``, returns once their names are free (at most
    ten seconds: the GCS frees them on its own time)."""
    import ray

    if not ray.is_initialized():
        return
    for handle in handles:
        try:
            if handle._actor is not None:
                ray.kill(handle._actor, no_restart=True)
        except Exception as exc:
            logger.debug("kill of actor %s: %s", handle.name, exc)
    deadline = time.monotonic() + _KILL_WAIT_S
    for handle in handles if wait else ():
        delay = 0.01
        while time.monotonic() < deadline:
            try:
                ray.get_actor(handle.name, namespace=handle._namespace)
            except ValueError:
                break
            except Exception:  # the cluster is going away: nothing to wait for
                return
            time.sleep(delay)  # the GCS frees the name asynchronously after the kill
            delay = min(delay * 2, 0.2)


class RayMember(ActorMember):
    """One actor of a group: its handle, the ref of its ready call (answered once its
    ``__init__`` has run) and of its lifetime call (answered once it has ended itself)."""

    def __init__(
        self, index: int, handle: RayActorHandle, ready_ref: Any, status: JobStatus
    ) -> None:
        super().__init__(index, handle.name, handle)
        self.status = status
        self.ready_ref = ready_ref
        self.lifetime_ref: Any = None


def start_members(
    host: Any, name: str, namespace: str, count: int, options: dict[str, Any], args: tuple[Any, ...]
) -> list[RayMember]:
    """Creates actors ``{name}-0`` ... ``{name}-{count-1}`` of the Ray actor class ``host``
    (``fray_ray._host``'s host around the user's class) with ``options``; each gets its
    name, namespace and index, then ``args``, and is asked whether it is ready. If one
    cannot be created, those created are killed.

    Raises:
        ActorError: An actor of one of the names already exists in ``namespace``.
    """
    members: list[RayMember] = []
    try:
        for index in range(count):
            actor_name = f"{name}-{index}"
            try:
                actor = host.options(name=actor_name, **options).remote(
                    actor_name, namespace, index, *args
                )
            except ValueError as exc:
                raise ActorError(
                    f"an actor named {actor_name!r} already exists in namespace {namespace!r}"
                ) from exc
            handle = RayActorHandle(actor_name, namespace, actor)
            ready = actor.fray_ready.remote()
            members.append(RayMember(index, handle, ready, JobStatus.PENDING))
    except BaseException:
        kill_actors([m.handle for m in members])
        raise
    return members


def _rebuilt_group(
    name: str,
    namespace: str,
    members: list[tuple[int, RayActorHandle, JobStatus]],
    ask: Ask,
    registry: str,
) -> RayActorGroup:
    rebuilt = [RayMember(index, handle, None, status) for index, handle, status in members]
    return RayActorGroup(name, namespace, rebuilt, ask=ask, registry=registry)


def _answered(members: list[RayMember], refs: list[Any], timeout: float) -> list[RayMember]:
    """The members whose call (``refs``, one per member) has answered, after waiting up to
    ``timeout`` for all of them."""
    import ray

    if not refs:
        return []
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    answered = set(ready)
    return [member for member, ref in zip(members, refs, strict=True) if ref in answered]


class RayActorGroup(BaseActorGroup):
    """``count`` actors of one class on Ray. A member is ready once its ready call has
    answered, and ended once its lifetime call has, which the group learns by asking Ray.

    The group pickles (into a job, or as an argument of an actor call): the copy watches
    the same actors; only the original's ``shutdown`` forgets the group in its client.
    """

    polls = True

    def __init__(
        self,
        name: str,
        namespace: str,
        members: list[RayMember],
        on_shutdown: Callable[[RayActorGroup], None] | None = None,
        *,
        ask: Ask,
        registry: str,
    ) -> None:
        super().__init__(name, members)
        self.namespace = namespace
        self._ray_members = members
        self._on_shutdown = on_shutdown
        self._ask = ask  # what each actor asks of a node (its pending reason)
        self._registry = registry  # where its actors say they were placed
        self._reasons_read: tuple[float, dict[int, str]] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        members = [(m.index, m.handle, m.status) for m in self._ray_members]
        return (_rebuilt_group, (self.name, self.namespace, members, self._ask, self._registry))

    def _pending_reasons(self, members: list[ActorMember]) -> dict[int, str]:
        """Why PENDING members wait for a node, read at most once a second for the whole
        group (see :meth:`_read_reasons`); a failed read says nothing."""
        now = time.monotonic()
        last = self._reasons_read
        if last is None or now - last[0] >= 1.0:
            try:
                reasons = self._read_reasons()
            except Exception as exc:  # the reason is a courtesy: never fail a caller for it
                logger.debug("reading why actors of %s wait failed: %s", self.name, exc)
                reasons = {}
            last = self._reasons_read = (now, reasons)
        return {m.index: last[1][m.index] for m in members if m.index in last[1]}

    def _read_reasons(self) -> dict[int, str]:
        """A reason for each PENDING member not yet placed (its host says when it is),
        while every node that could take it is busy: what it asks for and what the cluster
        has."""
        keys = {
            placed_key(self.namespace, m.name): m
            for m in self._ray_members
            if m.status is JobStatus.PENDING
        }
        placed = RegistryLink(self._registry, quiet=True).call("placed_keys", list(keys))
        waiting = [m for key, m in keys.items() if key not in (placed or ())]
        cluster = cluster_says(self._ask) if waiting else None
        if cluster is None:
            return {}
        reason = f"waiting for a node: asks for {self._ask.describe()}; {cluster}"
        return {m.index: reason for m in waiting}

    def _refresh(self, timeout: float) -> None:
        """Moves members whose constructor has finished to RUNNING or FAILED (waiting up to
        ``timeout`` for them), and running members that ended to SUCCEEDED or FAILED."""
        import ray
        from ray import exceptions as rx

        if not ray.is_initialized():  # the client is shut down: its members are gone
            return
        pending = [m for m in self._ray_members if m.status is JobStatus.PENDING]
        for member in pending:
            if member.ready_ref is None:  # a copy made by unpickling asks again
                member.ready_ref = member.handle._resolve().fray_ready.remote()
        for member in _answered(pending, [m.ready_ref for m in pending], timeout):
            try:
                ray.get(member.ready_ref)
            except Exception as exc:
                error = actor_error(exc, f"actor {member.name}")
                if member.set_status(JobStatus.FAILED, error):
                    kill_actors([member.handle], wait=False)  # no restarts, no leftovers
            else:
                member.set_status(JobStatus.RUNNING)
        running = [m for m in self._ray_members if m.status is JobStatus.RUNNING]
        for member in running:
            if member.lifetime_ref is None:
                try:
                    member.lifetime_ref = member.handle._resolve().fray_lifetime.remote()
                except ActorDiedError as exc:
                    member.set_status(JobStatus.FAILED, exc)
        watched = [m for m in running if m.lifetime_ref is not None]
        for member in _answered(watched, [m.lifetime_ref for m in watched], 0):
            ref, member.lifetime_ref = member.lifetime_ref, None
            try:
                failure = ray.get(ref)
            except rx.ActorDiedError as exc:  # gone for good (not restarting)
                error = ActorDiedError(
                    f"actor {member.name}: {first_line(exc) or type(exc).__name__}"
                )
                member.set_status(JobStatus.FAILED, error)
                continue
            except Exception:  # restarting (or unreachable): ask the next incarnation
                continue
            if failure is None:
                if member.set_status(JobStatus.SUCCEEDED):
                    kill_actors([member.handle], wait=False)  # ended: free its resources
            else:  # it failed: Ray restarts it while max_restarts allows (it says, next time)
                logger.info("actor %s failed: %s", member.name, failure)

    def _stop(self, members: list[ActorMember]) -> None:
        """Kills the actors and waits until their names are free."""
        kill_actors([m.handle for m in members])
        if self._on_shutdown is not None:
            self._on_shutdown(self)
