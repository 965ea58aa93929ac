"""The job registry: one small Ray actor per driver process, and a client's link to it.

Jobs submitted by the driver are tracked in the driver; the registry is where the rest of
the job tree meets. Jobs submitted from inside a job (by a worker's client) record
themselves here, so the driver can list them, re-attach to them by id and stop them with
their parent; running jobs stream their output here in batches, so ``logs()`` sees lines
while a job runs; replicas of a job with a ``scheduling_timeout`` (and actors as they are
placed) say here that they started. Trivial jobs never touch it.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import os
import secrets
import threading
import time
from typing import Any

from fray.environment_variables import FRAY_JOB_HISTORY
from fray_ray._convert import HEAD_NODE_RESOURCE
from fray_ray.errors import first_line

logger = logging.getLogger("fray.ray")

REGISTRY_NAMESPACE = "fray-internal"

_MAX_LINES = 100_000  # per job; older lines are dropped first
_MAX_PLACED = 10_000  # keys whose placed replicas are kept; the oldest go first
_FINISHED = ("succeeded", "failed", "stopped")
_FINAL_FIELDS = ("status", "finished_at", "error", "exit_code")


class JobRegistry:
    """Records keyed by job id; made an async Ray actor (one event loop, no locks) by
    :func:`driver_registry`. Like a client's own history it keeps every unfinished job and
    the last ``limit`` finished ones (record, output and result)."""

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._records: dict[str, dict[str, Any]] = {}
        self._logs: dict[str, list[str]] = {}
        self._children: dict[str, dict[str, None]] = {}  # ordered sets of child ids
        self._results: dict[str, Any] = {}
        self._finished: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._placed: collections.OrderedDict[str, set[int]] = collections.OrderedDict()
        self._placing = asyncio.Condition()  # notified whenever one is placed

    async def put(self, job_id: str, fields: dict[str, Any]) -> None:
        """Creates or updates a job's record (JobInfo fields); a finished one stays so."""
        record = self._records.setdefault(job_id, {"job_id": job_id})
        if record.get("status") in _FINISHED:
            fields = {k: v for k, v in fields.items() if k not in _FINAL_FIELDS}
        record.update(fields)
        parent = record.get("parent")
        if parent is not None:
            self._children.setdefault(parent, {})[job_id] = None
        if record.get("status") in _FINISHED:
            self._ended(job_id)

    async def finish(
        self, job_id: str, fields: dict[str, Any], result: Any, lines: list[str]
    ) -> None:
        """Records a finished job: its final fields, return value and whole output."""
        await self.put(job_id, fields)
        self._results[job_id] = result
        self._logs[job_id] = lines[-_MAX_LINES:]

    def _ended(self, job_id: str) -> None:
        """``job_id`` is finished; drops the oldest finished jobs beyond the limit."""
        finished = self._finished
        if job_id in finished:
            return
        finished[job_id] = None
        while len(finished) > self._limit:
            old, _ = finished.popitem(last=False)
            record = self._records.pop(old, None) or {}
            for table in (self._logs, self._results, self._children):
                table.pop(old, None)
            self._children.get(record.get("parent", ""), {}).pop(old, None)

    def _shown(self, record: dict[str, Any]) -> dict[str, Any]:
        """A record as readers get it: with its children's ids."""
        return {**record, "children": tuple(self._children.get(record["job_id"], ()))}

    async def get(self, job_id: str) -> dict[str, Any] | None:
        record = self._records.get(job_id)
        return None if record is None else self._shown(record)

    async def children(self, job_id: str) -> list[str]:
        return list(self._children.get(job_id, ()))

    async def descendants(self, job_id: str) -> list[str]:
        """Every job below ``job_id``, deepest first."""
        found: list[str] = []
        for child in self._children.get(job_id, ()):
            found += await self.descendants(child)
            found.append(child)
        return found

    async def list(self) -> list[dict[str, Any]]:
        return [self._shown(record) for record in self._records.values()]

    async def ended(self, job_id: str) -> None:
        """A job the driver tracks itself ended: its streamed output is no longer read
        (the driver has it whole)."""
        self._logs.pop(job_id, None)
        self._ended(job_id)

    async def append_logs(self, job_id: str, lines: list[str]) -> None:
        if job_id in self._finished:  # a late batch: the record has the whole output
            return
        buffer = self._logs.setdefault(job_id, [])
        buffer.extend(lines)
        del buffer[:-_MAX_LINES]  # the oldest beyond the limit

    async def logs(self, job_id: str) -> list[str]:
        return list(self._logs.get(job_id, ()))

    async def result(self, job_id: str) -> tuple[bool, Any]:
        """Whether the job's return value is kept, and the value."""
        return job_id in self._results, self._results.get(job_id)

    async def request_stop(self, job_ids: list[str]) -> None:
        """Marks unfinished jobs stopped (their owners are gone or stop them)."""
        now = time.time()
        for job_id in job_ids:
            if self._records.get(job_id, {}).get("status") in ("pending", "running"):
                await self.put(job_id, {"status": "stopped", "finished_at": now})

    async def placed(self, key: str, index: int) -> None:
        """Replica (or actor) ``index`` of ``key`` (a job's attempt, an actor group) started
        on a node."""
        self._placed.setdefault(key, set()).add(index)
        self._placed.move_to_end(key)
        while len(self._placed) > _MAX_PLACED:
            self._placed.popitem(last=False)
        async with self._placing:
            self._placing.notify_all()

    async def wait_placed(self, key: str, count: int, timeout: float) -> list[int]:
        """The indexes of ``key`` that started, once ``count`` have (or after ``timeout``;
        with ``count`` 0, at once)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout), self._placing:
                await self._placing.wait_for(lambda: len(self._placed.get(key, ())) >= count)
        return sorted(self._placed.get(key, ()))


_registries: dict[tuple[str, str], tuple[str, Any]] = {}
_registries_lock = threading.Lock()


def driver_registry() -> tuple[str, Any]:
    """The name and actor of this driver process's job registry in the connected Ray
    session: one actor, shared by every RayClient of the process, created on first use,
    gone with the driver."""
    import ray

    context = ray.get_runtime_context()
    key = (context.gcs_address, context.get_job_id())
    with _registries_lock:
        found = _registries.get(key)
        if found is None:
            name = f"fray-registry-{os.getpid()}-{secrets.token_hex(3)}"
            head = HEAD_NODE_RESOURCE in ray.cluster_resources()  # off preemptible nodes
            history = os.environ.get(FRAY_JOB_HISTORY, "").strip()  # as the driver's clients
            actor = (
                ray.remote(JobRegistry)
                .options(
                    name=name,
                    namespace=REGISTRY_NAMESPACE,
                    num_cpus=0,
                    max_restarts=-1,  # a lost registry comes back (empty) instead of failing
                    max_task_retries=-1,
                    resources={HEAD_NODE_RESOURCE: 0.001} if head else None,
                )
                .remote(int(history) if history.isdigit() else 10_000)
            )
            found = _registries[key] = (name, actor)
        return found


def forget_registries() -> None:
    """Forgets every registry this process made (its Ray is about to stop)."""
    with _registries_lock:
        _registries.clear()


@dataclasses.dataclass(slots=True)
class RegistryLink:
    """A client's calls to the job registry. The registry is a shared view of the job tree,
    not the source of truth for the jobs a client runs: a call that fails is logged and
    answers nothing, so losing the registry never fails a job or a ``terminate()``.

    Attributes:
        name: The registry actor's name (in ``REGISTRY_NAMESPACE``).
        actor: Its handle, if at hand; otherwise looked up on first use.
        quiet: Log failures at debug level (a client inside a job: its driver may be gone).
    """

    name: str
    actor: Any = None
    quiet: bool = dataclasses.field(default=False, kw_only=True)

    def ref(self, method: str, *args: Any) -> Any:
        """Starts a call; its ObjectRef (``None`` if the registry is unreachable)."""
        import ray

        try:
            if self.actor is None:
                self.actor = ray.get_actor(self.name, namespace=REGISTRY_NAMESPACE)
            return getattr(self.actor, method).remote(*args)
        except Exception as exc:
            self._failed(exc)
            return None

    def call(self, method: str, *args: Any, default: Any = None) -> Any:
        """Calls ``method`` and waits for its answer (``default`` on failure)."""
        import ray

        ref = self.ref(method, *args)
        if ref is None:
            return default
        try:
            return ray.get(ref, timeout=60)
        except Exception as exc:
            self._failed(exc)
            return default

    def _failed(self, exc: BaseException) -> None:
        log = logger.debug if self.quiet else logger.warning
        log("job registry %s unreachable: %s", self.name, first_line(exc))
