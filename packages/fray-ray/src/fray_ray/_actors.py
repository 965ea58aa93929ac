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

logger = logging.getLogger("fray.ray")

CALL_METHOD = "fray_dunder_call"
"""The Ray method behind a handle's ``__call__`` (Ray does not forward dunder methods)."""
_KILLED = object()  # a handle's actor once this process has killed it
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


def placed_key(namespace: str, group: str) -> str:
    """The registry key under which a group's actors say they were placed (by index)."""
    return f"actor:{namespace}/{group}"


def _connected(name: str) -> None:
    """Raises ``ActorDiedError`` for actor ``name`` once this process is no longer
    connected to Ray: asking Ray then would start a new local Ray instead."""
    import ray

    if not ray.is_initialized():
        raise ActorDiedError(f"actor {name}: this process is no longer connected to Ray")


def _raise_call_error(exc: Exception, name: str) -> NoReturn:
    """Raises what a failed call's ``ray.get`` error means: the method's own exception, or
    Fray's for a dead, restarting or unreachable actor."""
    _connected(name)
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

        _connected(self._name)
        try:
            return ray.get(self._ref, timeout=timeout)
        except Exception as exc:
            _raise_call_error(exc, self._name)

    def done(self) -> bool:
        """Whether the call has finished (also once the process has left Ray)."""
        import ray

        if not ray.is_initialized():
            return True
        return bool(ray.wait([self._ref], timeout=0)[0])  # (ready, not ready)

    def add_done_callback(self, callback: Callable[[RayActorFuture], None]) -> None:
        """Calls ``callback(future)`` once the call has finished."""
        self._ref.future().add_done_callback(lambda _f: callback(self))


@dataclasses.dataclass(slots=True, eq=False)
class RayActorMethod:
    """``handle.method``: ``.remote(...)`` starts a call, calling it waits."""

    _handle: RayActorHandle
    _method: str

    def remote(self, *args: Any, **kwargs: Any) -> RayActorFuture:
        """Starts the call and returns at once (``submit``, a long-running call, is the
        same on Ray: Ray keeps the call across connection drops itself)."""
        handle = self._handle
        _connected(handle.name)
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

    submit = remote

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls and waits for the result."""
        return self.remote(*args, **kwargs).result()


@dataclasses.dataclass(unsafe_hash=True)
class RayActorHandle:
    """A picklable reference to one actor: its name (``{group}-{index}``) and namespace;
    equal handles name the same actor. Once this process has killed the actor (its group
    shut down), a call raises ``ActorDiedError`` without asking Ray, which may still run a
    call sent before the kill reaches the actor's worker."""

    name: str
    _namespace: str
    _actor: Any = dataclasses.field(default=None, compare=False, repr=False)

    def _resolve(self) -> Any:
        if self._actor is _KILLED:  # Ray may still run a call sent before it says so
            raise ActorDiedError(
                f"actor {self.name} is gone: this process killed it (shut down, or ended)"
            )
        if self._actor is None:
            import ray

            _connected(self.name)
            try:
                self._actor = ray.get_actor(self.name, namespace=self._namespace)
            except ValueError:
                raise ActorDiedError(
                    f"actor {self.name} does not exist (it was shut down or never created)"
                ) from None
            except Exception as exc:
                raise ActorDiedError(f"actor {self.name} cannot be reached: {exc}") from exc
        return self._actor

    def __getattr__(self, method: str) -> RayActorMethod:
        if method.startswith("_"):
            raise AttributeError(method)
        return RayActorMethod(self, method)

    @property
    def __call__(self) -> RayActorMethod:  # pyright: ignore[reportIncompatibleMethodOverride]
        """The actor's own ``__call__``: ``handle(x)`` blocks, ``handle.__call__.remote(x)``
        returns a future."""
        return RayActorMethod(self, CALL_METHOD)

    def __reduce__(self) -> tuple[Any, ...]:
        return (RayActorHandle, (self.name, self._namespace))


def kill_actors(handles: Sequence[RayActorHandle], *, wait: bool = True) -> None:
    """Kills actors for good and, with ``wait``, returns once their names are free (at most
    ten seconds: the GCS frees them on its own time)."""
    import ray

    if not ray.is_initialized():
        return
    for handle in handles:
        try:
            ray.kill(handle._resolve(), no_restart=True)
            handle._actor = _KILLED
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

    def __init__(self, index: int, handle: RayActorHandle) -> None:
        super().__init__(index, handle.name, handle)
        self.ready_ref: Any = None  # asked for by the group's first refresh
        self.lifetime_ref: Any = None

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy keeps the status; its refs stay with their process (it asks again).
        return (RayMember, (self.index, self.handle), {"status": self.status})


def start_members(
    host: Any, name: str, namespace: str, count: int, options: dict[str, Any], args: tuple[Any, ...]
) -> list[RayMember]:
    """Creates actors ``{name}-0`` ... ``{name}-{count-1}`` of the Ray actor class ``host``
    (``fray_ray._host``'s host around the user's class) with ``options``; each gets its
    name, namespace and index, then ``args``. If one cannot be created, those created are
    killed.

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
            members.append(RayMember(index, RayActorHandle(actor_name, namespace, actor)))
    except BaseException:
        kill_actors([m.handle for m in members])
        raise
    return members


def _answered(calls: dict[Any, RayMember], timeout: float) -> list[RayMember]:
    """The members whose call (a ref, keyed to its member) has answered, after waiting up
    to ``timeout`` for all of them."""
    import ray

    if not calls:
        return []
    ready, _ = ray.wait(list(calls), num_returns=len(calls), timeout=timeout)
    return [calls[ref] for ref in ready]


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
        on_shutdown: Callable[[RayActorGroup], None] | None,
        ask: Ask,
        registry: str,
    ) -> None:
        super().__init__(name, members)
        self.namespace = namespace
        self._ray_members = members
        self._on_shutdown = on_shutdown
        self._ask = ask  # what each actor asks of a node (its pending reason)
        self._registry = registry  # where its actors say they were placed
        self._reasons_at = float("-inf")  # when _reasons was read
        self._reasons: dict[int, str] = {}

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            RayActorGroup,
            (self.name, self.namespace, self._ray_members, None, self._ask, self._registry),
        )

    def _pending_reasons(self, members: list[ActorMember]) -> dict[int, str]:
        """Why PENDING members wait for a node, read at most once a second for the whole
        group (see :meth:`_read_reasons`)."""
        now = time.monotonic()
        if now - self._reasons_at >= 1.0:
            self._reasons_at, self._reasons = now, self._read_reasons()
        return {m.index: self._reasons[m.index] for m in members if m.index in self._reasons}

    def _read_reasons(self) -> dict[int, str]:
        """A reason for each PENDING member not yet placed (its host says when it is),
        while every node that could take it is busy: what it asks for and what the cluster
        has. A failed read says nothing (the reason is a courtesy: never fail a caller)."""
        try:
            key = placed_key(self.namespace, self.name)
            link = RegistryLink(self._registry, quiet=True)
            placed = set(link.call("wait_placed", key, 0, 0.0) or ())
            waiting = [
                m.index
                for m in self._ray_members
                if m.status is JobStatus.PENDING and m.index not in placed
            ]
            cluster = cluster_says(self._ask) if waiting else None
        except Exception as exc:
            logger.debug("reading why actors of %s wait failed: %s", self.name, exc)
            return {}
        reason = f"waiting for a node: asks for {self._ask.describe()}; {cluster}"
        return {} if cluster is None else dict.fromkeys(waiting, reason)

    def _refresh(self, timeout: float) -> None:
        """Moves members whose constructor has finished to RUNNING or FAILED (waiting up to
        ``timeout`` for them), and running members that ended to SUCCEEDED or FAILED."""
        import ray
        from ray import exceptions as rx

        if not ray.is_initialized():  # the client is shut down: its members are gone
            return
        pending = [m for m in self._ray_members if m.status is JobStatus.PENDING]
        for member in pending:
            if member.ready_ref is None:
                member.ready_ref = member.handle._resolve().fray_ready.remote()
        for member in _answered({m.ready_ref: m for m in pending}, timeout):
            try:
                ray.get(member.ready_ref)
            except Exception as exc:
                if member.set_status(JobStatus.FAILED, actor_error(exc, f"actor {member.name}")):
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
        watched = {m.lifetime_ref: m for m in running if m.lifetime_ref is not None}
        for member in _answered(watched, 0):
            ref, member.lifetime_ref = member.lifetime_ref, None
            try:
                failure = ray.get(ref)
            except rx.ActorDiedError as exc:  # gone for good (not restarting)
                member.set_status(JobStatus.FAILED, actor_error(exc, f"actor {member.name}"))
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
