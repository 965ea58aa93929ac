"""What runs inside an Iris task: the wrapper around a job's callable and the actor host.

Both are module-level functions, so Iris pickles them by reference and the task imports
this module (fray-iris must be installed where tasks run, which it is: it is a dependency
of every Fray program that uses Iris).
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
import types
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from fray_iris._results import ResultStore
from fray_iris.environment_variables import FRAY_IRIS_RESULTS_URL

__all__ = ["fray_job_id", "host_actor", "is_loopback", "run_callable", "serving_hosts"]


def fray_job_id(wire: str) -> str:
    """Fray's id for an Iris job id: the wire id without its ``/<user>/`` prefix."""
    parts = wire.strip("/").split("/")
    return "/".join(parts[1:]) if len(parts) > 1 else parts[0]


def _enter_task(results_url: str | None) -> tuple[str, int]:
    """Sets Fray's env for this task; returns (job wire id, task index).

    Reads Iris's task env (``IRIS_TASK_ID`` is ``/<user>/<job...>/<index>[:<attempt>]``)
    directly: importing the Iris client costs seconds, on every task start.
    """
    raw = os.environ.get("IRIS_TASK_ID", "")
    task_wire = raw.split(":", 1)[0].rstrip("/")
    job_wire, _, index_text = task_wire.rpartition("/")
    if not job_wire or not index_text.isdigit():
        raise RuntimeError(
            f"fray_iris task code runs only inside an Iris task (IRIS_TASK_ID={raw!r})"
        )
    index = int(index_text)
    os.environ["FRAY_JOB_ID"] = fray_job_id(job_wire)
    os.environ["FRAY_TASK_INDEX"] = str(index)
    os.environ["FRAY_NUM_TASKS"] = os.environ.get("IRIS_NUM_TASKS", "1")
    if results_url:
        os.environ[FRAY_IRIS_RESULTS_URL] = results_url
    return job_wire, index


def run_callable(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    results_url: str | None,
    tpu: tuple[str, int] | None = None,
) -> None:
    """Runs a job's callable and stores its return value or exception in the results store.

    The exception is re-raised after it is stored, so Iris sees the failure (and keeps its
    own error text) and the exit code is the one Python gives it. On a TPU job (``tpu`` is
    the slice type and its VM count) each replica gets the slice env a real TPU VM has,
    where the machine has not set it: ``TPU_WORKER_ID`` and ``TPU_ACCELERATOR_TYPE``.
    """
    job_wire, index = _enter_task(results_url)
    if tpu is not None:
        variant, vms = tpu
        os.environ.setdefault("TPU_WORKER_ID", str(index % vms))
        os.environ.setdefault("TPU_ACCELERATOR_TYPE", variant)
    store = ResultStore(results_url) if results_url else None
    path = store.task_path(job_wire, index) if store else ""
    if store is not None:
        store.remove(path)  # a record left by an earlier job of the same name
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:
        if store is not None:
            # Imported only here: importing fray (pydantic, the request types) takes
            # hundreds of milliseconds, which every task start would pay for nothing.
            from fray.backend import portable_error

            store.write(path, ("error", portable_error(exc), traceback.format_exc()))
        sys.stdout.flush()
        raise
    if store is not None:
        try:
            store.write(path, ("ok", value))
        except Exception as exc:
            message = f"the job's return value could not be stored: {type(exc).__name__}: {exc}"
            store.write(path, ("error", RuntimeError(message), message))
            raise RuntimeError(message) from exc
    sys.stdout.flush()


def is_loopback(address: str | None) -> bool:
    """Whether the controller at ``address`` runs on this machine."""
    host = urlparse(address or "").hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


def serving_hosts(info: Any) -> tuple[str, str]:
    """Where a server in this task listens and the address it is reached at, from the
    task's Iris ``JobInfo``: loopback when the controller is on this machine (a one-machine
    cluster), else ``IRIS_BIND_HOST`` (default every interface) and the task's advertised
    host."""
    if is_loopback(info.controller_address):
        return "127.0.0.1", "127.0.0.1"
    return os.environ.get("IRIS_BIND_HOST", "0.0.0.0"), info.advertise_host


class _Serving:
    """Runs an actor's methods: at most ``limit`` at once, with ``current_actor()`` set, and
    with exceptions that always travel back. A method raising ``SystemExit`` ends the actor:
    that call and every later one raise ``ActorDiedError``, and the task exits."""

    def __init__(self, instance: Any, limit: int, context: Any, name: str) -> None:
        self.instance = instance
        self.gate = threading.Semaphore(limit)
        self.context = context
        self.name = name
        self.closed = False
        self.on_exit: Callable[[], None] = lambda: None

    def wrap(self, method: Callable[..., Any]) -> Callable[..., Any]:
        from fray.backend import bind_actor, portable_error, unbind_actor
        from fray.errors import ActorDiedError

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.closed:
                raise ActorDiedError(f"actor {self.name} has exited")
            with self.gate:
                token = bind_actor(self.context)
                try:
                    return method(*args, **kwargs)
                except SystemExit as exc:
                    self.closed = True
                    self.on_exit()
                    raise ActorDiedError(
                        f"actor {self.name} exited (SystemExit {exc.code!r}) in this call"
                    ) from None
                except BaseException as exc:
                    raise portable_error(exc) from None
                finally:
                    unbind_actor(token)

        return call

    def namespace(self) -> types.SimpleNamespace:
        methods: dict[str, Callable[..., Any]] = {}
        for name in dir(self.instance):
            if name.startswith("_"):
                continue
            attr = getattr(self.instance, name, None)
            if callable(attr):
                methods[name] = self.wrap(attr)
        return types.SimpleNamespace(**methods)


_EXIT_DELAY_S = 0.5  # lets the call that ended the actor send its answer


def host_actor(
    actor_class: type[Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    group_name: str,
    config: Any,
    restarts: int,
    results_url: str | None,
) -> None:
    """Runs one actor of a group in this task: builds it, serves it on the ``actor`` port and
    registers its endpoint ``<job id>/<group>-<index>``; then serves until the job is stopped
    or the actor ends itself.

    ``config`` is the group's ``ActorConfig``; ``restarts`` its restart budget (-1: no
    limit), counted in Iris attempts (a lost worker's included, as Ray counts a lost node's).
    The job allows one attempt more, which only stores that the actor died. The actor's end
    is stored in the results store, where the group reads it, and the task exits 0, so the
    group's other actors keep running: a constructor that raised (its exception), a
    ``SystemExit`` in a method, a ``shutdown_event`` set (SUCCEEDED), a ``fail(exc)`` with no
    restarts left (FAILED). A ``fail(exc)`` with restarts left stores nothing and exits 1:
    Iris runs the task again, a fresh instance, as it does for a task whose process died.
    """
    from iris.actor.server import ActorServer
    from iris.client.client import iris_ctx
    from iris.cluster.client.job_info import get_job_info

    from fray import ActorContext
    from fray.backend import ShutdownEvent, bind_actor, call_outcome, restart_allowed, unbind_actor
    from fray.errors import ActorDiedError
    from fray_iris._actor_handle import IrisActorHandle

    job_wire, index = _enter_task(results_url)
    info = get_job_info()
    assert info is not None
    actor_name = f"{group_name}-{index}"
    endpoint = f"{job_wire}/{actor_name}"
    store = ResultStore(results_url) if results_url else None
    record_path = store.actor_path(job_wire, index) if store else ""
    if store is not None and info.attempt_id == 0:
        store.remove(record_path)  # a record left by an earlier group of the same name

    def record(outcome: tuple[Any, ...]) -> None:
        if store is not None:
            store.write(record_path, outcome)

    if 0 <= restarts < info.attempt_id:
        # Its process died (killed, a lost worker, fail()) with no restarts left: Iris ran
        # the task once more only so that this is stored and the job goes on.
        why = f"died with no restarts left (max_restarts={restarts})"
        record(("error", ActorDiedError(f"actor {actor_name} {why}"), ""))
        print(f"[fray] actor {actor_name} {why}", flush=True)
        return

    handle = IrisActorHandle(
        endpoint, job_wire, info.controller_address, retries=config.max_task_retries or 0
    )
    stop = threading.Event()
    exit_code = [0]
    ended: list[Callable[[], None]] = []  # set once serving has started

    def on_shutdown() -> None:
        if ended:
            ended[0]()

    context = ActorContext(handle, index, group_name, ShutdownEvent(on_shutdown, actor_name))
    token = bind_actor(context)
    built = call_outcome(actor_class, args, kwargs)  # catches everything
    unbind_actor(token)
    if built[0] == "error":
        sys.stderr.write(built[2])
        record(built)
        sys.stderr.flush()
        return
    instance = built[1]

    bind, advertise = serving_hosts(info)
    ctx = iris_ctx()
    server = ActorServer(host=bind, port=ctx.get_port("actor"))
    serving = _Serving(instance, config.max_concurrency, context, actor_name)
    server.register(endpoint, serving.namespace())
    port = server.serve_background()
    registry = ctx.registry
    endpoint_id = registry.register(
        endpoint, f"http://{advertise}:{port}", metadata={"fray": "actor"}
    )
    print(f"[fray] actor {actor_name} serving on {advertise}:{port}", flush=True)

    def finish(outcome: tuple[Any, ...] | None, code: int) -> None:
        # Takes no more calls; the call that ended it still answers before the exit.
        serving.closed = True
        if outcome is not None:
            record(outcome)  # before the endpoint goes: the group reads both
        registry.unregister(endpoint_id)
        exit_code[0] = code
        threading.Timer(_EXIT_DELAY_S, stop.set).start()

    def exit_actor() -> None:
        # The actor is gone for good: no restart, and the group's other actors keep going.
        died = ActorDiedError(f"actor {actor_name} exited (SystemExit in a method)")
        finish(("error", died, ""), 0)

    def end_actor() -> None:
        failure = context.failure
        if failure is None:
            finish(("ok", None), 0)  # SUCCEEDED
        elif restart_allowed(info.attempt_id, restarts):
            print(f"[fray] actor {actor_name} failed ({failure!r}); restarting", flush=True)
            finish(None, 1)
        else:
            died = ActorDiedError(f"actor {actor_name} failed: {type(failure).__name__}: {failure}")
            finish(("error", died, ""), 0)

    serving.on_exit = exit_actor
    ended.append(end_actor)
    if context.shutdown_event is not None and context.shutdown_event.is_set():
        end_actor()  # set by the constructor, before there was anything to end
    stop.wait()  # serve until the job is stopped or the actor ends
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code[0])
