"""Local actors: instances in the driver process, each call run in arrival order (at most
``max_concurrency`` at a time), their handles pickling by key."""

from __future__ import annotations

import collections
import logging
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from fray._types import ActorConfig, JobStatus
from fray.backend import (
    ActorMember,
    BaseActorGroup,
    CallFuture,
    InProcessMember,
    KeyedHandle,
    bind_actor_call,
    unbind_actor,
)
from fray.errors import ActorDiedError, ActorError

if TYPE_CHECKING:
    from fray.local._client import LocalClient

__all__ = ["LocalActor", "LocalActorGroup", "LocalActorHandle", "LocalActorMethod"]

logger = logging.getLogger(__name__)

_RUNNING = JobStatus.RUNNING


class _Mailbox:
    """Runs an actor's calls in arrival order, at most ``limit`` at a time.

    A blocking call on an idle actor runs directly in the caller's thread (no hand-off);
    otherwise calls queue for the actor's worker threads.
    """

    def __init__(self, actor: LocalActor, limit: int) -> None:
        self._actor = actor
        self._limit = limit
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queue: collections.deque[tuple[Future[Any], str, tuple[Any, ...], dict[str, Any]]]
        self._queue = collections.deque()
        self._active = 0
        self._workers: list[threading.Thread] = []
        self._idle_workers = 0
        self._closed = False

    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # Every blocking call on an idle actor takes this path; it is kept to one frame: the
        # claim, one context-variable set binding the actor, the method (``invoke``'s lines,
        # written out: a frame more costs as much as the binding). The claim takes the
        # condition's own lock, not the condition (whose ``with`` is two Python calls), with
        # acquire and release around a ``try``: as safe as ``with`` and a tenth of the call
        # cheaper here.
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
        actor = self._actor
        token = bind_actor_call((actor.client, actor.context))
        try:
            return getattr(actor.instance, method)(*args, **kwargs)
        except SystemExit as exc:
            raise actor.exited(exc) from None
        finally:
            unbind_actor(token)
            if self._limit == 1:
                # The one call running: every other claim is made under the lock and sees 1,
                # so nothing else writes ``_active`` until this store, which needs no lock.
                self._active = 0
                if self._queue:
                    with lock:
                        self._cond.notify()
            else:
                with lock:
                    self._active -= 1
                    if self._queue:
                        self._cond.notify()

    def submit(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Future[Any]:
        future: Future[Any] = CallFuture()
        with self._cond:
            if self._closed:
                raise self._actor.died_error()
            self._queue.append((future, method, args, kwargs))
            if self._idle_workers == 0 and len(self._workers) < self._limit:
                worker = threading.Thread(
                    target=self._work, name=f"fray-actor-{self._actor.name}", daemon=True
                )
                self._workers.append(worker)
                worker.start()
            else:
                self._cond.notify()
        return future

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (not self._queue or self._active >= self._limit):
                    self._idle_workers += 1
                    self._cond.wait()
                    self._idle_workers -= 1
                if self._closed:
                    return
                future, method, args, kwargs = self._queue.popleft()
                self._active += 1
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(self._actor.invoke(method, args, kwargs))
                except BaseException as exc:
                    future.set_exception(exc)
            with self._cond:
                self._active -= 1
                if self._queue:
                    self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            pending = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        for future, *_ in pending:
            if future.set_running_or_notify_cancel():
                future.set_exception(self._actor.died_error())
        current = threading.current_thread()
        for worker in self._workers:
            if worker is not current:
                worker.join(timeout=5)


class LocalActor(InProcessMember):
    """One local actor: its instance, its mailbox and its context (its own ending is the
    seam's ``InProcessMember``'s)."""

    def __init__(
        self,
        client: LocalClient,
        key: str,
        name: str,
        index: int,
        group: str,
        config: ActorConfig,
        *,
        hosted: bool = False,
    ) -> None:
        self.ready = threading.Event()
        super().__init__(index, name, LocalActorHandle(key), group, config, hosted=hosted)
        self.client = client
        self.key = key
        self.mailbox = _Mailbox(self, config.max_concurrency)

    def died_error(self) -> ActorDiedError:
        return ActorDiedError(f"actor {self.name} is {self.status.value}; it takes no more calls")

    def invoke(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Runs one call with the actor bound (a worker's; ``_Mailbox.call`` inlines it)."""
        token = bind_actor_call((self.client, self.context))
        try:
            return getattr(self.instance, method)(*args, **kwargs)
        except SystemExit as exc:
            raise self.exited(exc) from None
        finally:
            unbind_actor(token)

    def exited(self, exc: SystemExit) -> ActorDiedError:
        """A call raised ``SystemExit``: as on Ray and Iris, where it ends the actor's
        process, the actor is gone. Returns the error the caller gets."""
        self.set_status(JobStatus.FAILED, exc)
        self.mailbox.close()
        return ActorDiedError(f"actor {self.name} exited (SystemExit({exc.code!r}))")

    def construct(self, cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Runs the class's ``__init__`` and reports the outcome."""
        self.init = (cls, args, kwargs)
        token = bind_actor_call((self.client, self.context))
        try:
            instance = cls(*args, **kwargs)
        except BaseException as exc:
            self.set_status(JobStatus.FAILED, exc)
            self.mailbox.close()
        else:
            self.instance = instance
            self.set_status(JobStatus.RUNNING)
        finally:
            unbind_actor(token)
            self.ready.set()

    def restart(self, cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.ready.clear()
        self.set_status(JobStatus.PENDING)
        self.instance = None
        self.construct(cls, args, kwargs)

    def finish(self, status: JobStatus, error: BaseException | None) -> None:
        self.set_status(status, error)
        if self.hosted:
            self.client._stop_actors([self])  # pyright: ignore[reportPrivateUsage]
        else:
            self.mailbox.close()


_ACTORS: dict[str, LocalActor] = {}
_ACTORS_LOCK = threading.Lock()
_STOPPED_ACTORS: set[str] = set()  # keys of actors that were shut down in this process


def register(actor: LocalActor) -> None:
    """Makes ``actor`` reachable by its key in this process."""
    with _ACTORS_LOCK:
        _ACTORS[actor.key] = actor


def unregister(actor: LocalActor) -> None:
    """Makes ``actor``'s key answer that it was shut down."""
    with _ACTORS_LOCK:
        _ACTORS.pop(actor.key, None)
        _STOPPED_ACTORS.add(actor.key)


def _lookup_actor(key: str) -> LocalActor:
    actor = _ACTORS.get(key)
    if actor is None:
        if key in _STOPPED_ACTORS:
            raise ActorDiedError(f"actor {key.rsplit('/', 1)[-1]} was shut down")
        raise ActorError(
            f"local actor {key!r} is not in this process. Local actors live in the driver "
            "process: call them from the driver or from thread jobs of the same LocalClient "
            "(a job with env vars or isolation='process' runs in another process)"
        )
    return actor


class LocalActorMethod:
    """``handle.method``: call it, or ``.remote()`` it for a future."""

    __slots__ = ("_handle", "_method")

    def __init__(self, handle: LocalActorHandle, method: str) -> None:
        self._handle = handle
        self._method = method

    def remote(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """Starts the call; returns a future."""
        return self._handle._actor().mailbox.submit(self._method, args, kwargs)

    def submit(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """A long-running call; on the local backend the same as :meth:`remote` (there is
        no connection to drop)."""
        return self._handle._actor().mailbox.submit(self._method, args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls and waits."""
        actor = self._handle._resolved
        if actor is None or actor.status is not _RUNNING:  # else _actor() would return it
            actor = self._handle._actor()
        return actor.mailbox.call(self._method, args, kwargs)


class LocalActorHandle(KeyedHandle):
    """Handle to a local actor. Pickles by name; resolves in the same process."""

    # ``__dict__`` caches the method objects: ``handle.f`` then finds ``f`` there instead of
    # failing the normal lookup (an AttributeError raised and caught) on every call.
    __slots__ = ("__dict__",)
    _resolved: LocalActor | None

    def _actor(self) -> LocalActor:
        actor = self._resolved
        if actor is None:
            actor = _lookup_actor(self._key)
            self._resolved = actor
        if actor.status is not JobStatus.RUNNING:
            if actor.status is JobStatus.PENDING:
                actor.ready.wait()
            if actor.status is not JobStatus.RUNNING:
                raise actor.died_error()
        return actor

    def __getattr__(self, method: str) -> LocalActorMethod:
        if method.startswith("_"):
            raise AttributeError(method)
        bound = self.__dict__[method] = LocalActorMethod(self, method)
        return bound

    @property
    def __call__(self) -> LocalActorMethod:  # pyright: ignore[reportIncompatibleMethodOverride]
        """The actor's own ``__call__``: ``handle(x)`` blocks, ``handle.__call__.remote(x)``
        returns a future (actor pools call their actors this way)."""
        return LocalActorMethod(self, "__call__")


class LocalActorGroup(BaseActorGroup):
    """``count`` in-process actors; see ``fray.ActorGroup``."""

    def __init__(self, client: LocalClient, name: str, actors: list[LocalActor]) -> None:
        super().__init__(name, actors)
        self._client = client
        self.actors = actors

    def _stop(self, members: list[ActorMember]) -> None:
        self._client._stop_actors(self.actors)  # pyright: ignore[reportPrivateUsage]
