# pyright: standard
"""Actor groups on Iris: a group is one Iris job with an ``actor`` port per replica.

Each replica builds its actor, serves it with Iris's actor server and registers the endpoint
``<group job id>/<group>-<index>`` (see ``_task.host_actor``); the group learns its members'
states by asking: the endpoints registered, the constructor errors in the results store, and
the state of the hosting job.
"""

from __future__ import annotations

import time
from typing import Any

from iris.cluster.types import Entrypoint as IrisEntrypoint
from iris.cluster.types import is_task_finished

from fray import ActorConfig, Entrypoint, JobRequest, JobStatus, ResourceConfig
from fray.backend import ActorMember, BaseActorGroup
from fray.errors import ActorDiedError, ActorError
from fray_iris import _iris
from fray_iris._actor_handle import IrisActorHandle, forget_endpoints
from fray_iris._convert import to_iris_request, translate_errors
from fray_iris._task import host_actor

__all__ = ["IrisActorGroup", "actor_job"]

_LOOK_FIRST_S = 0.05  # the first pause between two looks at a group that is starting
_LOOK_MAX_S = 0.5
_GONE = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED)


_UNLIMITED_RETRIES = 1000  # Iris's retries for "restart without limit"


def group_restarts(config: ActorConfig, resources: ResourceConfig) -> int:
    """How many times a group's actor restarts after it dies (-1: without limit): its
    ``max_restarts``, or, where that is ``None``, Ray's default (without limit on
    preemptible resources, never on the others)."""
    if config.max_restarts is not None:
        return config.max_restarts
    return -1 if resources.preemptible else 0


def actor_job(
    actor_class: type[Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    name: str,
    count: int,
    resources: ResourceConfig,
    config: ActorConfig,
    results_url: str | None,
) -> tuple[JobRequest, IrisEntrypoint, dict[str, Any]]:
    """The request, entrypoint and submit arguments of an actor group's job.

    An actor whose process dies (killed, or ``fail()``) is restarted as on Ray: up to
    ``config.max_restarts`` times (-1: without limit; ``None``: without limit on preemptible
    resources, never on the others), as Iris retries of the actor's task.
    """
    restarts = group_restarts(config, resources)
    # One attempt more than restarts: the attempt after the last restart only stores that
    # the actor died and exits 0 (see _task.host_actor), so that Iris does not fail the job,
    # and stop the group's other actors, when one actor runs out of restarts.
    retries = _UNLIMITED_RETRIES if restarts < 0 else restarts + 1
    request = JobRequest(
        name=name,
        entrypoint=Entrypoint.from_callable(host_actor),
        resources=resources.model_copy(update={"replicas": 1}),
        replicas=count,
        max_retries_failure=retries,
        max_retries_preemption=retries,
        priority=config.priority,
    )
    entry = IrisEntrypoint.from_callable(
        host_actor,
        actor_class,
        tuple(args),
        dict(kwargs),
        name,
        config,
        restarts,
        results_url,
    )
    return request, entry, to_iris_request(request).kwargs()


def _task_end(name: str, task: Any) -> tuple[JobStatus, BaseException | None] | None:
    """FAILED, for an actor whose task has finished without storing its end: its process
    died with no restarts left (the job goes on while its other actors run)."""
    if task is None or not is_task_finished(task.state):
        return None
    why = task.error or f"exit code {task.exit_code}"
    return JobStatus.FAILED, ActorDiedError(f"actor {name} died with no restarts left: {why}")


class IrisActorGroup(BaseActorGroup):
    """``count`` actors served by one Iris job; see ``fray.ActorGroup``.

    An actor is RUNNING while its endpoint is registered; SUCCEEDED once it set its
    ``shutdown_event``; FAILED once its constructor, a ``SystemExit`` in a method or a
    ``fail(exc)`` with no restarts left stored an error; and FAILED or STOPPED with the job.
    While it restarts it is PENDING.
    """

    polls = True

    def __init__(
        self, session: Any, name: str, count: int, job: Any, config: ActorConfig | None = None
    ) -> None:
        wire = job.iris_job_id
        retries = (config or ActorConfig()).max_task_retries or 0
        members = [
            ActorMember(
                i,
                f"{name}-{i}",
                IrisActorHandle(f"{wire}/{name}-{i}", wire, session.address, retries=retries),
            )
            for i in range(count)
        ]
        super().__init__(name, members)
        self._session = session
        self._job = job
        self._delay = _LOOK_FIRST_S
        self._job_stopped_by_client = False

    @property
    def job(self) -> Any:
        """The Iris job that hosts the actors."""
        return self._job

    # -- hooks -------------------------------------------------------------------------------

    def _refresh(self, timeout: float) -> None:
        if timeout <= 0:
            self._delay = _LOOK_FIRST_S
            self._look()
            return
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(self._delay, left))
            self._delay = min(self._delay * 1.5, _LOOK_MAX_S)
            if self._look():
                return

    def _stop(self, members: list[ActorMember]) -> None:
        forget_endpoints([m.handle.endpoint for m in members])
        if not self._job_stopped_by_client:
            self._job.terminate()

    def stop_with_client(self) -> None:
        """Shuts the group down, leaving its job to the client, which stops all its jobs at
        once."""
        self._job_stopped_by_client = True
        self.shutdown()

    # -- looking -----------------------------------------------------------------------------

    def _look(self) -> bool:
        """Learns each member's state; returns whether any changed."""
        live = [m for m in self._members if m.status not in _GONE]
        if self._stopped or not live:
            return False
        # An endpoint counts while its task runs: 0.2.227 keeps a dead attempt's endpoint.
        tasks = self._tasks()
        ready = {i for i in self._ready_indices() if _task_end("", tasks.get(i)) is None}
        if all(m.index in ready for m in live):
            return any([m.set_status(JobStatus.RUNNING) for m in live])
        changed = False
        job_status = self._job.status()
        ended = None
        if job_status.is_finished:
            info = self._job.info()
            ended = ActorError(
                f"the job hosting actor group {self.name} ended {info.status.value}"
                + (f": {info.error}" if info.error else "")
            )
        for member in live:
            end = None if member.index in ready else self._stored_end(member.index)
            if end is None and ended is None and member.index not in ready:
                end = _task_end(member.name, tasks.get(member.index))
            if end is not None:
                changed |= member.set_status(*end)
            elif ended is not None:
                gone = JobStatus.FAILED if job_status is JobStatus.FAILED else JobStatus.STOPPED
                changed |= member.set_status(gone, ended)
            elif member.index in ready:
                changed |= member.set_status(JobStatus.RUNNING)
            else:
                changed |= member.set_status(JobStatus.PENDING)
        return changed

    def _ready_indices(self) -> set[int]:
        prefix = f"{self._job.iris_job_id}/{self.name}-"
        with translate_errors(f"actors of {self.name}"):
            found = _iris.endpoints_under(self._session.raw, prefix)
        count = len(self._members)
        ready: set[int] = set()
        for endpoint in found:
            suffix = endpoint.name[len(prefix) :]
            if suffix.isdigit() and int(suffix) < count:
                ready.add(int(suffix))
        return ready

    def _tasks(self) -> dict[int, Any]:
        """The group's tasks (Iris ``TaskStatus`` protos), by actor index."""
        with translate_errors(f"actors of {self.name}"):
            found = _iris.list_tasks(self._session.raw, self._job._wire)
        return {_iris.task_index(task): task for task in found}

    def _stored_end(self, index: int) -> tuple[JobStatus, BaseException | None] | None:
        """How actor ``index`` ended, from what it stored: SUCCEEDED (its shutdown_event), or
        FAILED with the error (its constructor raised, it exited, or it failed for good)."""
        store = self._session.results
        if store is None:
            return None
        record = store.read(store.actor_path(self._job.iris_job_id, index))
        if record is None:
            return None
        if record[0] == "error":
            return JobStatus.FAILED, record[1]
        return JobStatus.SUCCEEDED, None
