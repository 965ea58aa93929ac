"""A client's job bookkeeping: what its jobs report to and its handles read from.

The jobs of one :class:`~fray_ray.RayClient` share its history (every unfinished job and the
last finished ones), its link to the job registry, the progress signal and deferred watch
of callable jobs, the pool that settles their attempts, and Ray's Jobs API for command jobs.
A job holds this book, not the client.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from fray import JobStatus
from fray.backend import JobHistory
from fray.errors import BackendUnavailableError
from fray_ray._drive import Progress
from fray_ray._registry import RegistryLink
from fray_ray._watcher import WATCH_AFTER, Watcher

__all__ = ["BookedJob", "JobBook"]


class BookedJob(Protocol):
    """What the book asks of a job (``fray_ray._record.RayJob``)."""

    @property
    def job_id(self) -> str: ...

    @property
    def parent(self) -> str | None: ...

    @property
    def status(self) -> JobStatus: ...

    @property
    def value(self) -> Any: ...

    @property
    def lines(self) -> Sequence[str]: ...

    @property
    def attempts(self) -> int: ...

    @property
    def is_done(self) -> bool: ...

    def record(self) -> dict[str, Any]:
        """Its JobInfo fields, as sent to the registry."""
        ...

    def terminate(self) -> None:
        """Stops it and its children."""
        ...


class JobBook:
    """The bookkeeping a client's jobs share.

    Args:
        namespace: The client's namespace (its actors, and its jobs' clients).
        registry: The link to the job registry of the client's driver.
        echo_logs: Jobs also print their output in the workers.
        mirrors: The client runs inside a job or actor: its jobs are recorded in the
            registry as they start and end, so the driver sees the whole tree.
        dashboard: The Ray dashboard's address, if known (command jobs need it).

    Attributes:
        lock: Guards ``history`` and ``tpu_jobs``.
        history: The client's jobs by id (``fray_ray._record.RayJob``).
        tpu_jobs: Its TPU gang jobs (fray-tpu's handles), kept the same way.
        progress: Moved on by every retry and end of a callable job.
        watcher: Gives attempts nobody waits on completion callbacks.
        executor: Settles the attempts of callable jobs that did not simply succeed.
    """

    def __init__(
        self,
        namespace: str,
        registry: RegistryLink,
        *,
        echo_logs: bool,
        mirrors: bool,
        dashboard: str | None = None,
    ) -> None:
        self.namespace = namespace
        self.registry = registry
        self.registry_name = registry.name
        self.echo_logs = echo_logs
        self.mirrors = mirrors
        self.lock = threading.Lock()
        self.history: JobHistory[Any] = JobHistory()
        self.tpu_jobs: JobHistory[Any] = JobHistory()
        self.progress = Progress()
        # A command job is never watched: every id in the queue is a callable job's.
        self.watcher = Watcher(WATCH_AFTER, self.history.running.get)
        self.executor = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="fray-ray")
        self._dashboard = dashboard
        self._jobs_api: Any = None

    def add(self, job: BookedJob) -> None:
        """Records a new job (before it starts: a nested one in the registry too, so its
        parent sees it at once)."""
        with self.lock:
            self.history.add(job.job_id, job)
        if self.mirrors:
            self.registry.call("put", job.job_id, job.record(), wait=True)

    def started(self, job: BookedJob) -> None:
        """A nested job's first attempt started: the registry learns its new state."""
        if self.mirrors and not job.is_done:
            self.registry.call("put", job.job_id, job.record(), wait=True)

    def job_finished(self, job: BookedJob) -> None:
        """Called once per job when it ends: it may age out of the history; a nested job's
        end is recorded in the registry."""
        with self.lock:
            self.history.finished(job.job_id)
        if self.mirrors:
            value = job.value if job.status is JobStatus.SUCCEEDED else None
            self.registry.call("finish", job.job_id, job.record(), value, job.lines, wait=True)
        elif job.lines or job.attempts > 1:  # it may have streamed output to the registry
            self.registry.call("ended", job.job_id, wait=False)

    def end_children_of(self, job_id: str) -> None:
        """Stops the children of a job that has ended (children die with their parent)."""
        running = self.history.running
        if not running:
            return
        with self.lock:
            children = [j for j in running.values() if j.parent == job_id and not j.is_done]
        for child in children:
            child.terminate()

    def stop_descendants(self, job_id: str, *, include_self: bool = False) -> None:
        """Marks every job below ``job_id`` as stopped and stops the ones this client owns."""
        ids = self.registry.descendants(job_id)
        if include_self:
            ids.append(job_id)
        with self.lock:
            running = self.history.running
            local = [running[i] for i in ids if i in running and not running[i].is_done]
            local += [j for j in running.values() if j.parent == job_id and not j.is_done]
        for job in local:
            job.terminate()
        if ids:
            self.registry.call("request_stop", ids, wait=True)

    def children_of(self, job_id: str) -> list[str]:
        """Ids of the jobs submitted from ``job_id``: this client's and the registry's."""
        with self.lock:
            local = [j.job_id for j in self.history.jobs.values() if j.parent == job_id]
        remote = self.registry.children(job_id)
        return local + [c for c in remote if c not in local]

    def jobs_api(self) -> Any:
        """Ray's ``JobSubmissionClient`` for this cluster (command jobs need the dashboard).

        Raises:
            BackendUnavailableError: The Jobs API is not reachable.
        """
        if self._jobs_api is None:
            import ray
            from ray.job_submission import JobSubmissionClient

            address = self._dashboard or ray.get_runtime_context().gcs_address
            try:
                self._jobs_api = JobSubmissionClient(address)
            except Exception as exc:
                raise BackendUnavailableError(
                    "command jobs on Ray run through Ray's Jobs API, which needs the Ray "
                    f"dashboard; it is not reachable ({type(exc).__name__}: {exc}). Start Ray "
                    "with the dashboard, or run the command from a callable job"
                ) from exc
        return self._jobs_api

    def close(self, wait: bool) -> None:
        """Watches what is still queued and lets the settling pool go (the client's jobs
        have been stopped)."""
        self.watcher.stop()
        self.executor.shutdown(wait=wait)
