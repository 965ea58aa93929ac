"""Behaviour every backend's job handle shares."""

from __future__ import annotations

from fray._types import JobStatus
from fray.errors import JobFailedError

__all__ = ["check_result"]


def check_result(job_id: str, status: JobStatus, error: str | None, *, is_callable: bool) -> None:
    """Raises what ``JobHandle.result()`` raises for a finished job with no value to return:
    it did not succeed, or it is a command job."""
    if status is not JobStatus.SUCCEEDED:
        raise JobFailedError(job_id, status, error or "the job was stopped")
    if not is_callable:
        raise JobFailedError(job_id, status, "a command job has no return value; read its logs()")
