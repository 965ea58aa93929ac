"""The parts of TPU gang jobs that need no Ray (``fray_tpu.ray.gang`` re-exports them): the
engine client whose jobs' data objects do the work of its hooks, the handle users hold, and
the error a failed gang raises."""

from __future__ import annotations

from typing import Any

from fray import JobStatus
from fray.backend import BaseClient, BaseJobHandle, JobRecord, Outcome
from fray.errors import JobFailedError
from fray_tpu._errors import TpuJobFailedError, TpuSchedulingError

__all__ = ["JobDataClient", "TpuJobHandle", "gang_failure"]


class JobDataClient(BaseClient):
    """A client of the engine whose jobs' ``data`` objects do the work of its hooks: each has
    ``start(job)`` (``_start_attempt``), ``cancel(job) -> grace`` (``_cancel_attempt``),
    ``refresh(job)``, ``pending_reason(job)``, ``value(job)`` (``_result``) and ``close()``
    (after the job's end). :class:`GangJob` is one such kind; fray-ray's ``RayClient`` has
    its own kinds besides."""

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
        job.data.close()


def gang_failure(job: JobRecord) -> TpuJobFailedError:
    """The error a failed gang job raises: its counts, why it ended and its first cause."""
    if getattr(job.data, "claim_stopped", False):
        reason = "scheduling"
    elif (job.error or "").startswith("preempted "):
        reason = "preemption"
    else:
        reason = "failure"
    cls = TpuSchedulingError if reason == "scheduling" else TpuJobFailedError
    error = cls(
        job.job_id,
        job.status,
        job.error,
        attempts=job.attempts,
        preemptions=job.preemptions,
        failures=job.failures,
        reason=reason,
    )
    error.__cause__ = job.cause
    return error


class TpuJobHandle(BaseJobHandle):
    """Handle to a TPU gang job on Ray; implements ``fray.JobHandle``.

    ``result()`` is the list of per-host return values ordered slice by slice, then by
    worker id within a slice (a single value when the job has one replica). A gang job that
    fails raises :class:`~fray_tpu.TpuJobFailedError` (its attempts, preemptions, failures
    and reason; the first problem chained as ``__cause__``).
    """

    __slots__ = ()

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished; see ``fray.JobHandle.wait``.

        Raises:
            TpuJobFailedError: A gang job FAILED (``TpuSchedulingError`` if its slices could
                not be gathered in time) and ``raise_on_failure`` is set.
            JobFailedError: Any other job FAILED and ``raise_on_failure`` is set.
            JobTimeoutError: ``timeout`` passed first.
        """
        status = super().wait(timeout, raise_on_failure=False)
        job = self._job
        if status is JobStatus.FAILED and raise_on_failure:
            if hasattr(job.data, "claim_stopped"):  # a gang job
                raise gang_failure(job)
            raise JobFailedError(job.job_id, status, job.error) from job.cause
        return status

    def host_results(self, timeout: float | None = None) -> list[Any]:
        """Every host's return value as a list, slice by slice (also for one host).

        Raises:
            TpuJobFailedError: The job did not succeed.
        """
        self.result(timeout)
        return list(self._job.value or [])

    def placement(self) -> list[dict[str, Any]]:
        """Where the current (or last) attempt runs: slice, worker, node id and IP per host."""
        gang = self._job.data
        return list(getattr(gang, "placement", None) or [])

    def wait_for_attempt(self, attempt: int, timeout: float) -> bool:
        """Blocks until attempt ``attempt`` has started (a gang's: its hosts are placed, as
        :meth:`placement` then says); ``False`` on timeout or job end."""
        job, gang = self._job, self._job.data
        if not hasattr(gang, "launched"):
            return job.attempts >= attempt
        with gang.cond:
            gang.cond.wait_for(lambda: gang.launched >= attempt or job.is_done, timeout)
            return gang.launched >= attempt
