"""The actor side of a Fray actor on Ray: a host actor wraps the user's instance.

The host sets ``fray.current_actor()`` around ``__init__`` and every call, and binds
``fray.current_client()`` to the actor's client, so an actor can create jobs and call other
actors. Each public method of the user's class gets a forwarding method of its own, so a
call costs what a plain Ray actor call costs.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import logging
import threading
from typing import Any

from fray import ActorContext
from fray.backend import ShutdownEvent, binding
from fray.errors import ActorDiedError, ActorUnavailableError
from fray_ray._actors import CALL_METHOD, RayActorHandle, placed_key
from fray_ray._worker import ClientFor

logger = logging.getLogger("fray.ray")

#: The Ray concurrency group of Fray's own actor methods, apart from the user's calls.
LIFETIME_GROUP = "fray"


class ActorHost:
    """The Ray actor class behind every Fray actor (made remote by the client).

    ``client_for`` gives the client the actor binds as ``fray.current_client()`` (one per
    worker process, see ``fray_ray._worker.ClientFor``)."""

    def __init__(
        self,
        name: str,
        namespace: str,
        index: int,
        group: str,
        registry: str,
        client_for: ClientFor,
        cls: type[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        self._client = client_for(namespace, registry)
        # Placed: the group's pending reasons stop saying it waits for a node.
        self._client.registry.ref("placed", placed_key(namespace, group), index)
        self._name = name
        self._ended = threading.Event()
        self._exit: SystemExit | None = None
        self._context = ActorContext(
            RayActorHandle(name, namespace), index, group, ShutdownEvent(self._on_end, name)
        )
        self._init_error: BaseException | None = None
        try:
            with binding(self._client, actor=self._context):
                self._instance = cls(*args, **kwargs)
        except BaseException as exc:  # reported by fray_ready, with its own type
            self._init_error = exc

    def fray_ready(self) -> bool:
        if self._init_error is not None:
            raise self._init_error
        return True

    def fray_lifetime(self) -> str | None:
        """Answers once the actor has ended itself through its ``shutdown_event``: ``None``
        when it succeeded, what failed after ``fail(exc)`` or a ``SystemExit``. (Runs in
        :data:`LIFETIME_GROUP`, so it never holds up the user's calls.)"""
        self._ended.wait()
        if self._exit is not None:
            return f"exited (SystemExit({self._exit.code!r}))"
        failure = self._context.failure
        return None if failure is None else f"{type(failure).__name__}: {failure}"

    def _on_end(self) -> None:
        self._ended.set()
        failure = self._context.failure
        if failure is None:
            return  # takes no more calls; its group stops it once it has seen the end
        # A failure: the process goes, and Ray restarts it while max_restarts allows.
        import ray

        logger.warning("actor %s failed (%s); ending its process", self._name, failure)
        ray.kill(ray.get_runtime_context().current_actor, no_restart=False)


_RESERVED = frozenset(("fray_ready", "fray_lifetime", CALL_METHOD))


def _invoke(host: ActorHost, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Runs the user's ``method`` with the actor's context bound."""
    if host._init_error is not None:
        raise ActorDiedError(f"actor {host._name} failed to start")
    if host._ended.is_set():
        if host._context.failure is not None:  # its process is going; Ray may restart it
            raise ActorUnavailableError(
                f"actor {host._name} failed; Ray restarts it while max_restarts allows"
            )
        raise ActorDiedError(f"actor {host._name} has ended (its shutdown_event is set)")
    try:
        with binding(host._client, actor=host._context):
            return getattr(host._instance, method)(*args, **kwargs)
    except SystemExit as exc:
        # The actor ends for good, as on every backend: an intentional exit, which Ray
        # does not restart (a plain SystemExit would be restarted when max_restarts != 0).
        # The pending lifetime call is answered first: Ray's exit waits for running calls.
        from ray.actor import exit_actor

        host._exit = exc
        host._ended.set()
        exit_actor()
        raise


def _forward(method: str, ray_name: str | None = None) -> Any:
    """An actor method calling the user's ``method``. The generated class is pickled by
    value, so this closure refers only to ``_invoke`` (pickled by reference) and a name."""

    def call(self: ActorHost, *args: Any, **kwargs: Any) -> Any:
        return _invoke(self, method, args, kwargs)

    call.__name__ = call.__qualname__ = ray_name or method
    return call


def _lifetime(self: ActorHost) -> str | None:
    return ActorHost.fray_lifetime(self)


def host_class(cls: type[Any]) -> type[ActorHost]:
    """An :class:`ActorHost` subclass with one forwarding method per public method of
    ``cls``, so a call is a plain Ray actor call (same cost as calling a Ray actor)."""
    import ray

    methods = {
        name: _forward(name)
        for name in dir(cls)
        if not name.startswith("_") and name not in _RESERVED and callable(getattr(cls, name))
    }
    if any("__call__" in vars(k) for k in cls.__mro__ if k is not object):
        methods[CALL_METHOD] = _forward("__call__", CALL_METHOD)
    _lifetime.__name__ = _lifetime.__qualname__ = "fray_lifetime"
    methods["fray_lifetime"] = ray.method(concurrency_group=LIFETIME_GROUP)(_lifetime)
    return type(f"Fray{cls.__name__}", (ActorHost,), methods)
