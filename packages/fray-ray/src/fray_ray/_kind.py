"""The kinds of job on Ray and the client whose jobs' kinds do its hooks.

A job record's ``data`` is its :class:`JobKind`, worked out once per request: a callable
job (Ray tasks), a command job (Ray's Jobs API), a job found by id, or fray-tpu's TPU gang.
:class:`KindClient` hands each of the engine's hooks to the kind, so a client runs several
kinds side by side and no kind is told apart by probing it; :class:`RayJobHandle` asks the
kind for what only some kinds have (a gang's placement, its own failure error).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from fray import JobStatus
from fray.backend import BaseClient, BaseJobHandle, JobRecord, Outcome
from fray.errors import JobFailedError

__all__ = ["JobKind", "KindClient", "RayJobHandle"]

logger = logging.getLogger("fray.ray")
T = TypeVar("T")

_REASON_EVERY_S = 1.0  # a pending reason is read from the cluster at most this often


class JobKind:
    """What one kind of job does for the engine's hooks, with no-ops where a kind has
    nothing to do. ``start`` runs in the thread that submitted the job or reported the
    attempt before (the engine's attempt loop); ``cancel`` on the engine's timer thread
    (it must not block: a kind hands slow work to the client's event thread); the readers
    (``refresh``, ``pending_reason``, ``value``, ``lines``) in the thread of the caller
    asking; ``close`` in the thread that recorded the job's end."""

    children: tuple[str, ...] = ()  # a found job's children, as its own record lists them

    def __init__(self, client: BaseClient) -> None:
        self.client = client
        self._reason: tuple[float, str | None] | None = None  # when read, and what

    def start(self, job: JobRecord) -> None:
        """Starts the job's current attempt (``_start_attempt``)."""
        raise NotImplementedError

    def cancel(self, job: JobRecord) -> float:
        """Begins stopping the current attempt; returns its grace (``_cancel_attempt``)."""
        raise NotImplementedError

    def refresh(self, job: JobRecord) -> float | None:
        """Brings the record up to date (``_refresh``); by default it is kept so."""
        return None

    def collect(self, job: JobRecord, into: dict[Any, Any]) -> bool:
        """Adds the Ray refs whose end would end the current attempt to ``into`` (for
        whoever waits: see ``fray_ray._tasks.await_ends``); ``True`` where this kind's
        ends are learnt through such refs (even when it has none at the moment)."""
        del job, into
        return False

    def pending_reason(self, job: JobRecord) -> str | None:
        """Why the job waits for a place, where the cluster can say."""
        return None

    def value(self, job: JobRecord) -> Any:
        """The value of the SUCCEEDED job (``_result``)."""
        return job.value

    def lines(self, job: JobRecord) -> list[str]:
        """The job's output lines so far."""
        return [line for _ts, line in job.log.snapshot()]

    def failure(self, job: JobRecord) -> JobFailedError:
        """The error a FAILED job raises from ``wait()`` and ``result()``."""
        error = JobFailedError(job.job_id, job.status, job.error)
        error.__cause__ = job.cause
        return error

    def placement(self) -> list[dict[str, Any]]:
        """Where the current (or last) attempt runs, host by host, where the kind knows."""
        return []

    def wait_for_attempt(self, job: JobRecord, attempt: int, timeout: float) -> bool:
        """Whether attempt ``attempt`` has started (a kind that can tell waits for it)."""
        del timeout
        return job.attempts >= attempt

    def close(self, job: JobRecord) -> None:
        """The job has ended."""

    def cached_reason(self, read: Callable[[], str | None]) -> str | None:
        """``read()``, at most once a second per job (the reason is read from the
        cluster); a reading that fails is no reason (a courtesy: never fail a caller)."""
        now = time.monotonic()
        last = self._reason
        if last is None or now - last[0] >= _REASON_EVERY_S:
            try:
                reason = read()
            except Exception as exc:
                logger.debug("reading a pending reason failed: %s", exc)
                reason = None
            last = self._reason = (now, reason)
        return last[1]


class RayJobHandle(BaseJobHandle):
    """A handle to a job on Ray (``fray.JobHandle``). A TPU gang job that fails raises
    :class:`fray_tpu.TpuJobFailedError` (a ``JobFailedError``) with its counts and reason,
    and its :meth:`placement` and :meth:`host_results` say where it ran and what each host
    returned."""

    __slots__ = ()

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished; see ``fray.JobHandle.wait``.

        Raises:
            TpuJobFailedError: A TPU gang job FAILED (``TpuSchedulingError`` if its slices
                could not be gathered in time) and ``raise_on_failure`` is set.
            JobFailedError: Any other job FAILED and ``raise_on_failure`` is set.
            JobTimeoutError: ``timeout`` passed first.
        """
        status = super().wait(timeout, raise_on_failure=False)
        if status is JobStatus.FAILED and raise_on_failure:
            job = self._job
            raise job.data.failure(job)
        return status

    def host_results(self, timeout: float | None = None) -> list[Any]:
        """Every host's (replica's) return value as a list, slice by slice for a TPU gang
        (also for one host).

        Raises:
            JobFailedError: The job did not succeed.
        """
        value = self.result(timeout)
        return list(self._job.value or []) if self._job.replicas > 1 else [value]

    def placement(self) -> list[dict[str, Any]]:
        """Where the current (or last) attempt runs: for a TPU gang, slice, worker, node id
        and IP per host; empty for jobs Ray places task by task."""
        return self._job.data.placement()

    def wait_for_attempt(self, attempt: int, timeout: float) -> bool:
        """Blocks until attempt ``attempt`` has started (a gang's: its hosts are placed, as
        :meth:`placement` then says); ``False`` on timeout or job end."""
        job = self._job
        return job.data.wait_for_attempt(job, attempt, timeout)


class KindClient(BaseClient):
    """A client of the engine whose jobs' kinds (:class:`JobKind`, each record's
    ``data``) do the work of its hooks: ``RayClient`` and fray-tpu's client of
    ``run_on_pod``."""

    handle_type = RayJobHandle

    def __init__(self) -> None:
        super().__init__()
        self._kind_states: dict[type[Any], Any] = {}

    def kind_state(self, cls: type[T]) -> T:
        """The one ``cls()`` of this client, made on first use: what the jobs of one kind
        share for the client's lifetime (a TPU gang's lost nodes)."""
        with self._lock:
            state = self._kind_states.get(cls)
            if state is None:
                state = self._kind_states[cls] = cls()
            return state

    def _start_attempt(self, job: JobRecord) -> Outcome | None:
        job.data.start(job)
        return None

    def _cancel_attempt(self, job: JobRecord) -> float:
        return job.data.cancel(job)

    def _refresh(self, job: JobRecord) -> float | None:
        return job.data.refresh(job)

    def _pending_reason(self, job: JobRecord) -> str | None:
        return job.data.pending_reason(job)

    def _result(self, job: JobRecord) -> Any:
        return job.data.value(job)

    def _after_end(self, job: JobRecord) -> None:
        super()._after_end(job)
        job.data.close(job)
