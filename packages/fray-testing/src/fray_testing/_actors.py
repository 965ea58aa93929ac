"""FakeClient actors: real in-process instances, every creation and call recorded.

Calls run synchronously in the caller's thread, one at a time per actor; ``.remote()``
returns a future that is already done. Handles pickle by key and resolve through a
process-wide registry, so they keep working after a pickle round trip in the same process.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from fray import ActorConfig, JobStatus, ResourceConfig
from fray.backend import (
    ActorMember,
    BaseActorGroup,
    InProcessMember,
    KeyedHandle,
    binding,
    validate_actor_args,
)
from fray.errors import ActorDiedError, ActorError, InvalidRequestError
from fray_testing._records import ActorCall, ActorCreation, Record

if TYPE_CHECKING:
    from fray_testing._fake import FakeClient

__all__ = ["FakeActorFuture", "FakeActorGroup", "FakeActorHandle", "FakeActorMethod"]

_REGISTRY: weakref.WeakValueDictionary[str, _FakeActor] = weakref.WeakValueDictionary()


class _FakeActor(InProcessMember):
    inline_end = True  # calls are synchronous: an actor ends within the call that ends it

    def __init__(
        self,
        system: _ActorSystem,
        key: str,
        name: str,
        index: int,
        group: str,
        config: ActorConfig,
        *,
        hosted: bool = False,
    ) -> None:
        super().__init__(index, name, FakeActorHandle(key), group, config, hosted=hosted)
        self.system = system
        self.key = key
        self.lock = threading.RLock()

    @property
    def group(self) -> str:
        return self.group_name

    def restart(self, cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.set_status(JobStatus.PENDING)
        self.system.construct(self, cls, args, kwargs)

    def finish(self, status: JobStatus, error: BaseException | None) -> None:
        self.system.die(self, status, error)

    def died_error(self) -> ActorDiedError:
        return ActorDiedError(f"actor {self.name} is {self.status.value}; it takes no more calls")


class FakeActorFuture(Future[Any]):
    """The result of a ``.remote()`` call on a fake actor: already done when returned, so
    ``result()`` gives the value or re-raises the method's own exception at once."""


class FakeActorMethod:
    """``handle.method``: call it, or ``.remote()`` it for a future."""

    __slots__ = ("_invoke",)

    def __init__(self, invoke: Callable[[tuple[Any, ...], dict[str, Any]], Any]) -> None:
        self._invoke = invoke

    def remote(self, *args: Any, **kwargs: Any) -> FakeActorFuture:
        """Runs the call now; returns a done future holding its value or exception."""
        future = FakeActorFuture()
        try:
            value = self._invoke(args, kwargs)
        except (KeyboardInterrupt, GeneratorExit):
            raise
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(value)
        return future

    def submit(self, *args: Any, **kwargs: Any) -> FakeActorFuture:
        """A long-running call: on the fake backend the same as :meth:`remote`."""
        return self.remote(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Runs the call and returns its value."""
        return self._invoke(args, kwargs)


class FakeActorHandle(KeyedHandle):
    """Handle to a fake actor; satisfies ``fray.ActorHandle``. Pickles by key."""

    __slots__ = ()
    _resolved: _FakeActor | None

    def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        actor = self._resolved
        if actor is None:
            actor = _REGISTRY.get(self._key)
            if actor is None:
                raise ActorDiedError(
                    f"actor {self.name} is gone: its FakeClient was shut down or garbage "
                    "collected (fake actors live in the process that created them)"
                )
            self._resolved = actor
        return actor.system.call(actor, method, args, kwargs)

    def __getattr__(self, method: str) -> FakeActorMethod:
        if method.startswith("_"):
            raise AttributeError(method)
        return FakeActorMethod(functools.partial(self._call, method))

    @property
    def __call__(self) -> FakeActorMethod:  # pyright: ignore[reportIncompatibleMethodOverride]
        """The actor's own ``__call__``: ``handle(x)``, ``handle.__call__.remote(x)``."""
        return FakeActorMethod(functools.partial(self._call, "__call__"))


class FakeActorGroup(BaseActorGroup):
    """``count`` fake actors; satisfies ``fray.ActorGroup``. Every ``__init__`` has run by
    the time the group exists, so nothing here waits."""

    def __init__(self, system: _ActorSystem, name: str, actors: list[_FakeActor]) -> None:
        super().__init__(name, actors)
        self._system = system
        self.actors = actors

    def _stop(self, members: list[ActorMember]) -> None:
        self._system.stop(self.actors)


@dataclasses.dataclass
class _ScriptedFailure:
    names: frozenset[str]
    method: str | None
    error: BaseException | type[BaseException] | None
    remaining: int | None


class _ActorSystem:
    """The actors of one FakeClient."""

    def __init__(self, client: FakeClient, uid: str, record: Callable[[Record], None]) -> None:
        self.client = client
        self.uid = uid
        self.record = record
        self.lock = threading.RLock()
        self.groups: list[FakeActorGroup] = []
        self.actors: dict[str, _FakeActor] = {}  # by name; a stopped actor's name is reusable
        self.failures: list[_ScriptedFailure] = []

    def create(
        self,
        actor_class: type[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        name: str,
        count: int,
        resources: ResourceConfig | None,
        actor_config: ActorConfig | None,
        group: bool,
        hosted: bool = False,
    ) -> FakeActorGroup:
        validate_actor_args(actor_class, name, count, resources, actor_config)
        config = actor_config or ActorConfig()
        with self.lock:
            names = [name] if hosted else [f"{name}-{i}" for i in range(count)]
            taken = [
                n
                for n in names
                if (old := self.actors.get(n)) and old.status is not JobStatus.STOPPED
            ]
            if taken:
                raise ActorError(f"an actor named {taken[0]!r} already exists in this client")
            actors: list[_FakeActor] = []
            for i, actor_name in enumerate(names):
                actor = _FakeActor(
                    self, f"{self.uid}/{actor_name}", actor_name, i, name, config, hosted=hosted
                )
                self.actors[actor_name] = actor
                _REGISTRY[actor.key] = actor
                actors.append(actor)
            created = FakeActorGroup(self, name, actors)
            self.groups.append(created)
        self.record(
            ActorCreation(
                name, actor_class, args, dict(kwargs), count, resources, actor_config, group
            )
        )
        for actor in actors:
            self.construct(actor, actor_class, args, kwargs)
        return created

    def construct(
        self, actor: _FakeActor, cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        actor.init = (cls, args, kwargs)
        try:
            with binding(client=self.client, actor=actor.context):
                instance = cls(*args, **kwargs)
        except (KeyboardInterrupt, GeneratorExit):
            raise
        except BaseException as exc:
            actor.set_status(JobStatus.FAILED, exc)
        else:
            actor.instance = instance
            actor.set_status(JobStatus.RUNNING)

    def names_matching(self, name: str) -> set[str]:
        with self.lock:
            return {a.name for a in self.actors.values() if name in (a.name, a.group)}

    def script_failure(
        self,
        actor: str,
        method: str | None,
        error: BaseException | type[BaseException] | None,
        times: int | None,
    ) -> None:
        if times is not None and (
            isinstance(times, bool) or not isinstance(times, int) or times < 1
        ):
            raise InvalidRequestError.for_field(
                "fail_actor_call.times", times, "must be an integer >= 1, or None for every call"
            )
        with self.lock:
            # Scripted before the actor exists is fine: match by name when called.
            names = frozenset(self.names_matching(actor) | {actor})
            self.failures.append(_ScriptedFailure(names, method, error, times))

    def _take_failure(self, actor: _FakeActor, method: str) -> BaseException | None:
        with self.lock:
            for scripted in self.failures:
                if (actor.name in scripted.names or actor.group in scripted.names) and (
                    scripted.method in (None, method)
                ):
                    if scripted.remaining is not None:
                        scripted.remaining -= 1
                        if scripted.remaining == 0:
                            self.failures.remove(scripted)
                    error = scripted.error
                    if error is None:
                        return ActorDiedError(
                            f"actor {actor.name} died during {method}() (scripted by FakeClient)"
                        )
                    return error if isinstance(error, BaseException) else error()
        return None

    def kill(self, name: str) -> None:
        with self.lock:
            victims = [a for a in self.actors.values() if name in (a.name, a.group)]
        if not victims:
            raise InvalidRequestError.for_field(
                "kill_actor.actor", name, "no actor or actor group of that name in this FakeClient"
            )
        for actor in victims:
            self.die(
                actor,
                JobStatus.FAILED,
                ActorDiedError(f"actor {actor.name} was killed (by FakeClient)"),
            )

    def die(self, actor: _FakeActor, status: JobStatus, error: BaseException | None = None) -> None:
        with self.lock:
            if actor.set_status(status, error):
                actor.instance = None

    def call(
        self, actor: _FakeActor, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        self.record(ActorCall(actor.name, method, args, dict(kwargs)))
        scripted = self._take_failure(actor, method)
        if scripted is not None:
            if isinstance(scripted, ActorDiedError):
                self.die(actor, JobStatus.FAILED, scripted)
            raise scripted
        if actor.status is not JobStatus.RUNNING:
            raise actor.died_error()
        with actor.lock:
            instance = actor.instance
            if instance is None:  # stopped while this call waited for the previous one
                raise actor.died_error()
            try:
                with binding(client=self.client, actor=actor.context):
                    return getattr(instance, method)(*args, **kwargs)
            except SystemExit as exc:  # ends the actor, as it ends a real actor's process
                died = ActorDiedError(f"actor {actor.name} exited (SystemExit({exc.code!r}))")
                self.die(actor, JobStatus.FAILED, died)
                raise died from None

    def stop(self, actors: list[_FakeActor]) -> None:
        with self.lock:
            for actor in actors:
                actor.set_status(JobStatus.STOPPED)
                actor.instance = None

    def shutdown_all(self) -> None:
        with self.lock:
            groups = list(self.groups)
        for group in groups:
            group.shutdown()
