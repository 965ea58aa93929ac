"""In-process actors (the local and fake backends): instances in this process, each call run
in arrival order (at most ``max_concurrency`` at a time), their handles pickling by key.

:class:`InProcessActors` is one client's actors. The local client constructs them in the
background and queues ``.remote()`` calls for the actor's threads; the fake client
(``synchronous``) runs everything in the caller's thread and watches every call
(``on_call``).

A group actor that sets its ``shutdown_event`` is SUCCEEDED. On a cluster its process is
then gone; here the instance lives on until its group is shut down, so with
``serve_after_end`` (the local client) it still answers calls, as the teardown of a
pipeline that stops its workers one by one expects (Zephyr's ``stop_workers``).
"""

from __future__ import annotations

import collections
import logging
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, cast

from fray._actor import ActorContext, HostedActor, ShutdownEvent, restart_allowed
from fray._bound import bound
from fray._types import ActorConfig, JobStatus
from fray.backend import ActorMember, BaseActorGroup
from fray.backend._wire import CallFuture
from fray.errors import ActorDiedError, ActorError

logger = logging.getLogger("fray.actors")

_RUNNING = JobStatus.RUNNING
_ENDED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED)

# Every in-process actor of this process by key, so a handle copied by pickling reaches it.
_ACTORS: dict[str, LocalActor] = {}
_STOPPED: set[str] = set()  # keys of actors that were shut down
_ACTORS_LOCK = threading.Lock()

OnCall = Callable[["LocalActor", str, tuple[Any, ...], dict[str, Any]], None]


class _Mailbox:
    """Runs an actor's calls in arrival order, at most ``limit`` at a time: a blocking call
    on an idle actor runs in the caller's thread, other calls queue for the actor's threads
    (started on demand). Closing fails every queued and running call's future."""

    def __init__(self, actor: LocalActor, limit: int) -> None:
        self._actor = actor
        self._limit = limit
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queue: collections.deque[tuple[Future[Any], str, tuple[Any, ...], dict[str, Any]]]
        self._queue = collections.deque()
        self._running: set[Future[Any]] = set()
        self._active = 0
        self._workers = 0
        self._idle = 0
        self._closed = False

    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # Written for the benchmark row "vs predecessor: actor blocking call": the claim
        # takes the condition's lock (a ``with`` on the condition is two Python calls).
        lock = self._lock
        lock.acquire()
        try:
            if self._closed:
                raise self._actor.died_error()
            inline = self._active < self._limit and not self._queue
            if inline:
                self._active += 1
        finally:
            lock.release()
        if not inline:
            return self.submit(method, args, kwargs).result()
        try:
            return self._actor.invoke(method, args, kwargs)
        finally:
            lock.acquire()
            self._active -= 1
            if self._queue:
                self._cond.notify()
            lock.release()

    def submit(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Future[Any]:
        future: Future[Any] = CallFuture()
        with self._cond:
            if self._closed:
                raise self._actor.died_error()
            self._queue.append((future, method, args, kwargs))
            if self._idle:
                self._cond.notify()
            elif self._workers < self._limit:
                self._workers += 1
                threading.Thread(
                    target=self._work, name=f"fray-actor-{self._actor.name}", daemon=True
                ).start()
        return future

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (not self._queue or self._active >= self._limit):
                    self._idle += 1
                    self._cond.wait()
                    self._idle -= 1
                if self._closed:
                    return
                future, method, args, kwargs = self._queue.popleft()
                self._active += 1
                self._running.add(future)
            if future.set_running_or_notify_cancel():
                try:
                    value = self._actor.invoke(method, args, kwargs)
                except BaseException as exc:
                    _settle(future, None, exc)
                else:
                    _settle(future, value, None)
            with self._cond:
                self._running.discard(future)
                self._active -= 1
                if self._queue:
                    self._cond.notify()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """No more calls; every call not yet answered fails with ``ActorDiedError`` now (a
        running one keeps running to its end, its value dropped)."""
        with self._cond:
            self._closed = True
            waiting = [entry[0] for entry in self._queue] + list(self._running)
            self._queue.clear()
            self._cond.notify_all()
        for future in waiting:
            _settle(future, None, self._actor.died_error())


def _settle(future: Future[Any], value: Any, error: BaseException | None) -> None:
    """Completes ``future`` unless it already is (a closed mailbox failed it first)."""
    try:
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)
    except Exception:  # InvalidStateError: answered already
        pass


class LocalActor(ActorMember):
    """One in-process actor: its instance, mailbox and context. Setting its context's
    ``shutdown_event`` ends it: SUCCEEDED, or after ``fail(exc)`` a restart (a fresh
    ``__init__``) while ``max_restarts`` allows, else FAILED; a hosted actor never restarts.
    """

    def __init__(
        self, system: InProcessActors, name: str, index: int, group: str, config: ActorConfig
    ) -> None:
        self.key = f"{system.prefix}/{name}"
        super().__init__(index, name, LocalActorHandle(self.key))
        self.system = system
        self.group_name = group
        self.config = config
        self.hosted = False
        self.restarts = 0
        self.instance: Any = None
        self.init: tuple[type[Any], tuple[Any, ...], dict[str, Any]] | None = None
        self.ready = threading.Event()
        self.mailbox = _Mailbox(self, config.max_concurrency)
        self.context = self._new_context()

    def _new_context(self) -> ActorContext:
        event = ShutdownEvent(self._ended, self.name, inline=self.system.synchronous)
        return ActorContext(self.handle, self.index, self.group_name, event)

    @property
    def answers(self) -> bool:
        """Whether a call reaches the instance: it runs, or it ended cleanly and its
        system serves after the end (its mailbox is open until the group shuts down)."""
        if self.status is _RUNNING:
            return True
        return self.status is JobStatus.SUCCEEDED and not self.mailbox.closed

    def died_error(self) -> ActorDiedError:
        return ActorDiedError(f"actor {self.name} is {self.status.value}; it takes no more calls")

    def invoke(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Runs one call with the actor bound (``current_actor()``, ``current_client()``)."""
        token = bound.set((self.system.client, self.context))
        try:
            return getattr(self.instance, method)(*args, **kwargs)
        except SystemExit as exc:
            raise self.exited(exc) from None
        finally:
            bound.reset(token)

    def exited(self, exc: SystemExit) -> ActorDiedError:
        """A call raised ``SystemExit``: as on Ray and Iris, where it ends the actor's
        process, the actor is gone. Returns what the caller gets."""
        self.end(JobStatus.FAILED, exc)
        return ActorDiedError(f"actor {self.name} exited (SystemExit({exc.code!r}))")

    def construct(self, cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.init = (cls, args, kwargs)
        token = bound.set((self.system.client, self.context))
        try:
            instance = cls(*args, **kwargs)
        except BaseException as exc:
            self.end(JobStatus.FAILED, exc)
        else:
            self.instance = instance
            self.set_status(_RUNNING)
        finally:
            bound.reset(token)
            self.ready.set()

    def _ended(self) -> None:  # the actor set its shutdown_event (itself, or through fail)
        failure = self.context.failure
        if failure is None:
            self.end(JobStatus.SUCCEEDED)
        elif (
            not self.hosted
            and self.init
            and restart_allowed(self.restarts, self.config.max_restarts)
        ):
            self.restarts += 1
            logger.warning(
                "actor %s failed (%r); restarting it (restart %d)",
                self.name,
                failure,
                self.restarts,
            )
            self.ready.clear()
            self.set_status(JobStatus.PENDING)
            self.instance = None
            self.context = self._new_context()
            self.construct(*self.init)
        else:
            error = ActorDiedError(f"actor {self.name} failed: {type(failure).__name__}: {failure}")
            error.__cause__ = failure
            self.end(JobStatus.FAILED, error)

    def end(self, status: JobStatus, error: BaseException | None = None) -> None:
        if self.hosted:
            self.system.stop([self], status, error)
        else:
            self.set_status(status, error)
            if status is not JobStatus.SUCCEEDED or not self.system.serve_after_end:
                self.mailbox.close()


class LocalActorMethod:
    """``handle.method``: call it, or ``.remote()`` it for a future."""

    __slots__ = ("_handle", "_method")

    def __init__(self, handle: LocalActorHandle, method: str) -> None:
        self._handle = handle
        self._method = method

    def remote(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """Starts the call; returns a future of its value."""
        actor = self._handle._actor()
        if actor.system.synchronous:
            future: Future[Any] = actor.system.future_type()
            try:
                future.set_result(self(*args, **kwargs))
            except (KeyboardInterrupt, GeneratorExit):
                raise
            except BaseException as exc:
                future.set_exception(exc)
            return future

        if actor.system.on_call is not None:
            actor.system.on_call(actor, self._method, args, kwargs)
        return actor.mailbox.submit(self._method, args, kwargs)

    def submit(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """A long-running call; in-process the same as :meth:`remote` (there is no
        connection to drop)."""
        return self.remote(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls and waits."""
        actor = self._handle._resolved
        if actor is None or actor.status is not _RUNNING:  # else _actor() would return it
            actor = self._handle._actor()
        if actor.system.on_call is not None:
            actor.system.on_call(actor, self._method, args, kwargs)
            if actor.status is not _RUNNING:
                raise actor.died_error()
        return actor.mailbox.call(self._method, args, kwargs)


class LocalActorHandle:
    """Handle to an in-process actor: it pickles as its key (``<client>/<actor name>``),
    equals every handle with the same key, and finds the actor on first use."""

    __slots__ = ("__dict__", "_key", "_resolved")

    def __init__(self, key: str) -> None:
        self._key = key
        self._resolved: LocalActor | None = None

    @property
    def name(self) -> str:
        """The actor's name."""
        return self._key.rsplit("/", 1)[-1]

    def _actor(self) -> LocalActor:
        actor = self._resolved
        if actor is None:
            actor = self._resolved = _ACTORS.get(self._key)
            if actor is None:
                if self._key in _STOPPED:
                    raise ActorDiedError(f"actor {self.name} was shut down")
                raise ActorError(
                    f"in-process actor {self._key!r} is not in this process. Local actors live "
                    "in the driver process: call them from the driver or from thread jobs of the "
                    "same LocalClient (a job with env vars or isolation='process' runs in "
                    "another process)"
                )
        if actor.status is not _RUNNING:
            if actor.status is JobStatus.PENDING:
                actor.ready.wait()
            if not actor.answers:
                raise actor.died_error()
        return actor

    def __getattr__(self, method: str) -> LocalActorMethod:
        if method.startswith("_"):
            raise AttributeError(method)
        # Kept in ``__dict__``: the next ``handle.method`` finds it without this call.
        bound_method = self.__dict__[method] = LocalActorMethod(self, method)
        return bound_method

    @property
    def __call__(self) -> LocalActorMethod:  # pyright: ignore[reportIncompatibleMethodOverride]
        """The actor's own ``__call__``: ``handle(x)`` blocks, ``handle.__call__.remote(x)``
        returns a future (actor pools call their actors this way)."""
        return LocalActorMethod(self, "__call__")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._key,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalActorHandle) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class LocalActorGroup(BaseActorGroup):
    """In-process actors of one class; see ``fray.ActorGroup``."""

    def _stop(self, members: list[ActorMember]) -> None:
        actors = cast("list[LocalActor]", members)
        actors[0].system.stop(actors)


class InProcessActors:
    """One client's in-process actors: names, groups, creation, hosting and stopping.
    ``client`` is what ``current_client()`` answers inside them; ``synchronous`` (the fake
    client) constructs actors and runs ``.remote()`` calls (returning ``future_type``s) in
    the caller's thread; ``on_call(actor, method, args, kwargs)`` runs before each call and
    may raise (the call then raises that) or end the actor; ``serve_after_end``: an actor
    that ended cleanly answers calls until its group is shut down."""

    def __init__(
        self,
        client: Any,
        *,
        synchronous: bool = False,
        on_call: OnCall | None = None,
        future_type: type[Future[Any]] = CallFuture,
        serve_after_end: bool = False,
    ) -> None:
        self.client = client
        self.serve_after_end = serve_after_end
        self.prefix = f"{client.scheme}-{secrets.token_hex(4)}"
        self.synchronous = synchronous
        self.on_call = on_call
        self.future_type = future_type
        self.lock = threading.Lock()
        self.actors: dict[str, LocalActor] = {}  # by name; a stopped actor's name is free

    def _add(self, names: list[str], group: str, config: ActorConfig | None) -> list[LocalActor]:
        config = config or ActorConfig()
        with self.lock:
            for name in names:
                old = self.actors.get(name)
                if old is not None and old.status is not JobStatus.STOPPED:
                    raise ActorError(f"an actor named {name!r} already exists in this client")
            actors = [LocalActor(self, name, i, group, config) for i, name in enumerate(names)]
            for actor in actors:
                self.actors[actor.name] = actor
        with _ACTORS_LOCK:
            for actor in actors:
                _ACTORS[actor.key] = actor
                _STOPPED.discard(actor.key)
        return actors

    def create(
        self,
        cls: type[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        name: str,
        count: int,
        config: ActorConfig | None,
    ) -> LocalActorGroup:
        """``count`` actors named ``{name}-{i}``, constructed now (``synchronous``) or in the
        background."""
        actors = self._add([f"{name}-{i}" for i in range(count)], name, config)
        group = LocalActorGroup(name, actors)
        for actor in actors:
            if self.synchronous:
                actor.construct(cls, args, kwargs)
            else:
                threading.Thread(
                    target=actor.construct,
                    args=(cls, args, kwargs),
                    name=f"fray-actor-init-{actor.name}",
                    daemon=True,
                ).start()
        return group

    def host(
        self,
        cls: type[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        name: str,
        config: ActorConfig | None,
    ) -> HostedActor:
        """An actor named ``name`` constructed now, in this thread; its handle works from
        this process (the driver, thread jobs, actors).

        Raises:
            ActorError: ``__init__`` raised (chained as ``__cause__``).
        """
        from fray.backend._hosting import hosted_init_failed

        (actor,) = self._add([name], name, config)
        actor.hosted = True
        actor.construct(cls, args, kwargs)
        if actor.status is JobStatus.FAILED:
            error = actor.error
            self.stop([actor], JobStatus.FAILED, error)
            raise hosted_init_failed(name, cls, error) from error
        return HostedActor(actor.handle, lambda: self.stop([actor]))

    def stop(
        self,
        actors: list[LocalActor],
        status: JobStatus = JobStatus.STOPPED,
        error: BaseException | None = None,
    ) -> None:
        """Ends these actors for good (``status``, STOPPED by default); their keys then
        answer that they were shut down."""
        for actor in actors:
            actor.set_status(status, error)
            actor.mailbox.close()
            actor.instance = None
        with _ACTORS_LOCK:
            for actor in actors:
                if _ACTORS.get(actor.key) is actor:
                    del _ACTORS[actor.key]
                    _STOPPED.add(actor.key)

    def matching(self, name: str) -> list[LocalActor]:
        """The actors named ``name``, or of the group named ``name``."""
        with self.lock:
            return [a for a in self.actors.values() if name in (a.name, a.group_name)]

    def shutdown(self) -> None:
        """Stops every actor."""
        with self.lock:
            actors = list(self.actors.values())
        self.stop([a for a in actors if a.status not in _ENDED or a.key in _ACTORS])
