"""Retries and budgets: failures count against ``max_retries_failure``, preemptions against
``max_retries_preemption``; N retries mean N+1 attempts, exactly."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from fray import Client, JobHandle, JobStatus
from fray.errors import JobFailedError
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance._base import ConformanceTests

__all__ = ["RetryTests"]


class RetryTests(ConformanceTests):
    """Each attempt follows a plan (``S`` succeed, ``F`` fail, ``P`` preempted)."""

    def test_an_attempt_past_its_timeout_ends_the_job_without_retry(self, client: Client) -> None:
        """``JobRequest.timeout`` is a deadline per attempt: the attempt is stopped and the
        job fails, whatever ``max_retries_failure`` is left (as Iris enforces it)."""
        self.require("runs_jobs_concurrently")
        job = client.submit(self.request(ep.run_until_terminated, timeout=1, max_retries_failure=2))
        with pytest.raises(JobFailedError, match=r"ran longer than timeout=1s") as caught:
            job.wait(timeout=self.timeout)
        assert isinstance(caught.value.__cause__, TimeoutError)
        info = job.info()
        assert (info.attempts, info.preemptions) == (1, 0)

    def planned(self, client: Client, tmp_path: Path, plan: str, **budgets: int) -> JobHandle:
        """Submits a job whose attempts follow ``plan``; preempting attempts need a process
        of their own where the backend can give one."""
        counter = tmp_path / f"attempts-{plan}"
        fields: dict[str, Any] = dict(budgets)
        if "P" in plan and self.capabilities.process_isolation:
            fields["isolation"] = "process"
        return client.submit(
            self.request(ep.follow_plan, str(counter), plan, os.getpid(), name="plan", **fields)
        )

    def test_no_retry_by_default(self, client: Client, tmp_path: Path) -> None:
        self.require("runs_user_code")
        job = self.planned(client, tmp_path, "FS")
        assert job.wait(timeout=self.timeout, raise_on_failure=False) is JobStatus.FAILED
        assert (job.info().attempts, job.info().failures) == (1, 1)

    def test_failures_retried_until_success(self, client: Client, tmp_path: Path) -> None:
        self.require("runs_user_code")
        job = self.planned(client, tmp_path, "FFS", max_retries_failure=2)
        assert job.result(timeout=self.timeout) == 3
        info = job.info()
        assert (info.status, info.attempts, info.failures, info.preemptions) == (
            JobStatus.SUCCEEDED,
            3,
            2,
            0,
        )

    def test_failure_budget_is_exact(self, client: Client, tmp_path: Path) -> None:
        self.require("runs_user_code")
        job = self.planned(client, tmp_path, "F", max_retries_failure=2)
        with pytest.raises(JobFailedError) as caught:
            job.wait(timeout=self.timeout)
        assert isinstance(caught.value.__cause__, ep.ConformanceError)
        assert "attempt 3 failed" in str(caught.value)
        info = job.info()
        assert (info.attempts, info.failures) == (3, 3)

    def test_preemptions_retried_until_success(self, client: Client, tmp_path: Path) -> None:
        self.require("runs_user_code", "supports_preemption_injection")
        job = self.planned(client, tmp_path, "PPS", max_retries_preemption=2)
        assert job.result(timeout=self.timeout) == 3
        info = job.info()
        assert (info.status, info.attempts, info.preemptions, info.failures) == (
            JobStatus.SUCCEEDED,
            3,
            2,
            0,
        )

    def test_preemption_budget_is_exact(self, client: Client, tmp_path: Path) -> None:
        self.require("runs_user_code", "supports_preemption_injection")
        job = self.planned(client, tmp_path, "P", max_retries_preemption=1)
        with pytest.raises(JobFailedError) as caught:
            job.wait(timeout=self.timeout)
        assert "preempt" in str(caught.value).lower()
        info = job.info()
        assert (info.status, info.attempts, info.preemptions) == (JobStatus.FAILED, 2, 2)

    def test_zero_preemption_budget_means_one_attempt(self, client: Client, tmp_path: Path) -> None:
        self.require("runs_user_code", "supports_preemption_injection")
        job = self.planned(client, tmp_path, "PS", max_retries_preemption=0)
        assert job.wait(timeout=self.timeout, raise_on_failure=False) is JobStatus.FAILED
        assert (job.info().attempts, job.info().preemptions) == (1, 1)

    def test_budgets_are_counted_separately(self, client: Client, tmp_path: Path) -> None:
        self.require("runs_user_code", "supports_preemption_injection")
        job = self.planned(client, tmp_path, "PFS", max_retries_failure=1, max_retries_preemption=1)
        assert job.result(timeout=self.timeout) == 3
        info = job.info()
        assert (info.attempts, info.preemptions, info.failures) == (3, 1, 1)
