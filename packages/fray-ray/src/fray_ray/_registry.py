"""The job registry: one small Ray actor per driver process, and a client's link to it.

Jobs submitted by the driver are tracked in the driver; the registry is where the rest of
the job tree meets. Jobs submitted from inside a job (by a worker's client) record
themselves here, so the driver can list them, re-attach to them by id and stop them with
their parent; running jobs stream their output here in batches so ``logs(follow=True)``
sees lines while the job runs. Trivial jobs never touch it.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import collections
import logging
import os
import secrets
import threading
import time
from typing import Any

from fray.backend import DEFAULT_JOB_HISTORY, job_history_limit
from fray_ray._convert import HEAD_NODE_RESOURCE

__all__ = ["REGISTRY_NAMESPACE", "JobRegistry", "RegistryLink", "driver_registry"]

logger = logging.getLogger("fray.ray")

REGISTRY_NAMESPACE = "fray-internal"

_MAX_LINES = 100_000  # per job; older lines are dropped first
_MAX_PLACED = 10_000  # attempts whose placed replicas are kept; the oldest go first
_FINISHED = ("succeeded", "failed", "stopped")
_FINAL_FIELDS = ("status", "finished_at", "error", "exit_code")


class JobRegistry:
    """Records keyed by job id. Plain class; made a Ray actor by the client.

    Like a client's own history it keeps every unfinished job and the last ``limit``
    finished ones (record, output and result); older finished ones are dropped first.
    """

    def __init__(self, limit: int = DEFAULT_JOB_HISTORY) -> None:
        self._lock = threading.Lock()
        self._limit = limit
        self._records: dict[str, dict[str, Any]] = {}
        self._logs: dict[str, list[str]] = {}
        self._children: dict[str, dict[str, None]] = {}  # ordered sets of child ids
        self._results: dict[str, Any] = {}
        self._stops: set[str] = set()
        self._finished: collections.OrderedDict[str, None] = collections.OrderedDict()
        # Replicas that started, by attempt key (jobs with a scheduling_timeout only).
        self._placed: collections.OrderedDict[str, set[int]] = collections.OrderedDict()

    def ping(self) -> bool:
        return True

    def put(self, job_id: str, fields: dict[str, Any]) -> None:
        """Creates or updates a job's record (JobInfo fields)."""
        with self._lock:
            record = self._records.setdefault(job_id, {"job_id": job_id})
            if record.get("status") in _FINISHED:  # a late update never reopens a job
                fields = {k: v for k, v in fields.items() if k not in _FINAL_FIELDS}
            record.update(fields)
            parent = record.get("parent")
            if parent is not None:
                self._children.setdefault(parent, {})[job_id] = None
            if record.get("status") in _FINISHED:
                self._ended(job_id)

    def finish(self, job_id: str, fields: dict[str, Any], result: Any, lines: list[str]) -> None:
        """Records a finished job: its final fields, return value and whole output."""
        with self._lock:
            self._records.setdefault(job_id, {"job_id": job_id}).update(fields)
            self._results[job_id] = result
            self._logs[job_id] = list(lines[-_MAX_LINES:])
            self._ended(job_id)

    def _ended(self, job_id: str) -> None:
        """Under the lock: ``job_id`` is finished; drops the oldest finished jobs beyond
        the limit."""
        finished = self._finished
        if job_id in finished:
            return
        finished[job_id] = None
        while len(finished) > self._limit:
            old, _ = finished.popitem(last=False)  # the oldest to finish
            record = self._records.pop(old, None) or {}
            self._logs.pop(old, None)
            self._results.pop(old, None)
            self._stops.discard(old)
            self._children.pop(old, None)
            siblings = self._children.get(record.get("parent") or "")
            if siblings is not None:
                siblings.pop(old, None)

    def get(self, job_id: str) -> dict[str, Any] | None:
        with self._lock:
            record = self._records.get(job_id)
            if record is None:
                return None
            return {**record, "children": tuple(self._children.get(job_id, ()))}

    def children(self, job_id: str) -> list[str]:
        with self._lock:
            return list(self._children.get(job_id, ()))

    def descendants(self, job_id: str) -> list[str]:
        """Every job below ``job_id``, deepest first."""
        with self._lock:
            found: list[str] = []
            stack = list(self._children.get(job_id, ()))
            while stack:
                child = stack.pop()
                found.append(child)
                stack.extend(self._children.get(child, ()))
            return found[::-1]

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return [
                {**record, "children": tuple(self._children.get(job_id, ()))}
                for job_id, record in self._records.items()
            ]

    def ended(self, job_id: str) -> None:
        """A job the driver tracks itself ended: its streamed output is no longer read
        (the driver has it whole)."""
        with self._lock:
            self._logs.pop(job_id, None)
            self._ended(job_id)

    def append_logs(self, job_id: str, lines: list[str]) -> None:
        with self._lock:
            if job_id in self._finished:  # a late batch: the record has the whole output
                return
            buffer = self._logs.setdefault(job_id, [])
            buffer.extend(lines)
            if len(buffer) > _MAX_LINES:
                del buffer[: len(buffer) - _MAX_LINES]

    def logs(self, job_id: str, start: int = 0) -> list[str]:
        with self._lock:
            return list(self._logs.get(job_id, ())[start:])

    def result(self, job_id: str) -> tuple[bool, Any]:
        with self._lock:
            if job_id in self._results:
                return True, self._results[job_id]
            return False, None

    def placed(self, key: str, index: int) -> None:
        """Replica ``index`` of the attempt ``key`` (``job_id#attempt``) started on a node."""
        with self._lock:
            self._placed.setdefault(key, set()).add(index)
            if len(self._placed) > _MAX_PLACED:
                self._placed.popitem(last=False)

    def placed_replicas(self, key: str) -> list[int]:
        """The replicas of the attempt ``key`` that started so far."""
        with self._lock:
            return sorted(self._placed.get(key, ()))

    def request_stop(self, job_ids: list[str]) -> None:
        """Marks jobs as to be stopped; their owners see it on their next check."""
        with self._lock:
            now = time.time()
            for job_id in job_ids:
                self._stops.add(job_id)
                record = self._records.get(job_id)
                if record is not None and record.get("status") in ("pending", "running"):
                    record.update(status="stopped", finished_at=now)
                    self._ended(job_id)

    def stop_requested(self, job_id: str) -> bool:
        with self._lock:
            return job_id in self._stops


# ---------------------------------------------------------------------------------------------
# The client side


_registries: dict[tuple[str, str], tuple[str, Any]] = {}
_registries_lock = threading.Lock()


def driver_registry() -> tuple[str, Any]:
    """The name and actor of this driver process's job registry in the connected Ray
    session: one actor, shared by every RayClient of the process, created on first use,
    gone with the driver."""
    import ray

    context = ray.get_runtime_context()
    key = (str(context.gcs_address), str(context.get_job_id()))
    with _registries_lock:
        found = _registries.get(key)
        if found is None:
            name = f"fray-registry-{os.getpid()}-{secrets.token_hex(3)}"
            options: dict[str, Any] = {
                "name": name,
                "namespace": REGISTRY_NAMESPACE,
                "num_cpus": 0,
                "max_concurrency": 1,
                "max_restarts": -1,  # a lost registry comes back (empty) instead of failing
                "max_task_retries": -1,
            }
            if HEAD_NODE_RESOURCE in ray.cluster_resources():  # off preemptible nodes
                options["resources"] = {HEAD_NODE_RESOURCE: 0.001}
            actor = ray.remote(JobRegistry).options(**options).remote(job_history_limit())
            found = _registries[key] = (name, actor)
        return found


def forget_registries() -> None:
    """Forgets every registry this process made (its Ray is about to stop)."""
    with _registries_lock:
        _registries.clear()


class RegistryLink:
    """A client's calls to the job registry. The registry is a shared view of the job tree,
    not the source of truth for the jobs a client runs: a call that fails is logged and
    answers nothing, so losing the registry never fails a job or a ``terminate()``.

    Args:
        name: The registry actor's name (in ``REGISTRY_NAMESPACE``).
        actor: Its handle, if at hand; otherwise looked up on first use.
        quiet: Log failures at debug level (a client inside a job: its driver may be gone).
    """

    __slots__ = ("_actor", "name", "quiet")

    def __init__(self, name: str, actor: Any = None, *, quiet: bool = False) -> None:
        self.name = name
        self._actor = actor
        self.quiet = quiet

    def call(self, method: str, *args: Any, wait: bool = True) -> Any:
        """Calls ``method`` on the registry; its answer with ``wait`` (``None`` on failure)."""
        import ray

        try:
            actor = self._actor
            if actor is None:
                actor = self._actor = ray.get_actor(self.name, namespace=REGISTRY_NAMESPACE)
            ref = getattr(actor, method).remote(*args)
            return ray.get(ref, timeout=60) if wait else None
        except Exception as exc:
            log = logger.debug if self.quiet else logger.warning
            log("job registry %s unreachable: %s", self.name, str(exc).splitlines()[0])
            return None

    def get(self, job_id: str) -> dict[str, Any] | None:
        """A job's record (JobInfo fields and its children), if the registry has it."""
        return self.call("get", job_id)

    def logs(self, job_id: str) -> list[str]:
        """A job's output as recorded or streamed so far."""
        return self.call("logs", job_id) or []

    def result(self, job_id: str) -> tuple[bool, Any]:
        """``(True, value)`` once a job's return value is recorded, else ``(False, None)``."""
        return self.call("result", job_id) or (False, None)

    def children(self, job_id: str) -> list[str]:
        """The jobs submitted from ``job_id``."""
        return self.call("children", job_id) or []

    def descendants(self, job_id: str) -> list[str]:
        """Every job below ``job_id``, deepest first."""
        return self.call("descendants", job_id) or []

    def records(self) -> list[dict[str, Any]]:
        """Every record the registry keeps."""
        return self.call("list") or []
