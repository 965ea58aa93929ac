"""Failures and errors: what a user sees when a job fails."""

from __future__ import annotations

import secrets

import pytest

from fray import Client, EnvironmentConfig, JobStatus, wait_all
from fray.errors import FrayError, JobFailedError
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance._base import ConformanceTests

__all__ = ["FailureTests"]


class FailureTests(ConformanceTests):
    """A job whose code raises ends FAILED, and the user's exception reaches the caller."""

    def test_failed_job_status_is_failed(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.raise_value_error, "bad input"))
        assert job.wait(timeout=self.timeout, raise_on_failure=False) is JobStatus.FAILED
        assert job.status() is JobStatus.FAILED

    def test_wait_raises_job_failed_error(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.raise_value_error, "bad input"))
        with pytest.raises(JobFailedError) as caught:
            job.wait(timeout=self.timeout)
        assert isinstance(caught.value, FrayError)
        assert isinstance(caught.value, RuntimeError)

    def test_job_failed_error_chains_the_user_exception(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.raise_value_error, "bad input 17"))
        with pytest.raises(JobFailedError) as caught:
            job.wait(timeout=self.timeout)
        cause = caught.value.__cause__
        assert type(cause) is ValueError
        assert str(cause) == "bad input 17"

    def test_job_failed_error_message_has_type_and_text(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.raise_value_error, "bad input 23"))
        with pytest.raises(JobFailedError) as caught:
            job.wait(timeout=self.timeout)
        assert "ValueError" in str(caught.value)
        assert "bad input 23" in str(caught.value)

    def test_job_failed_error_names_job_and_status(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.raise_value_error, "x"))
        with pytest.raises(JobFailedError) as caught:
            job.wait(timeout=self.timeout)
        assert caught.value.job_id == job.job_id
        assert caught.value.status is JobStatus.FAILED
        assert job.job_id in str(caught.value)

    def test_user_exception_type_is_kept(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.raise_conformance_error, "own type"))
        with pytest.raises(JobFailedError) as caught:
            job.wait(timeout=self.timeout)
        assert isinstance(caught.value.__cause__, ep.ConformanceError)
        assert "ConformanceError" in str(caught.value)

    def test_info_records_the_failure(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.raise_value_error, "recorded"))
        job.wait(timeout=self.timeout, raise_on_failure=False)
        info = job.info()
        assert info.status is JobStatus.FAILED
        assert (info.attempts, info.failures, info.preemptions) == (1, 1, 0)
        assert info.error is not None
        assert "ValueError" in info.error and "recorded" in info.error

    def test_result_of_failed_job_raises_with_cause(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.raise_value_error, "no value"))
        with pytest.raises(JobFailedError) as caught:
            job.result(timeout=self.timeout)
        assert type(caught.value.__cause__) is ValueError

    def test_every_wait_on_a_failed_job_raises(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.raise_value_error, "twice"))
        for _ in range(2):
            with pytest.raises(JobFailedError):
                job.wait(timeout=self.timeout)

    def test_system_exit_fails_the_job(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.exit_with, 3))
        with pytest.raises(JobFailedError) as caught:
            job.wait(timeout=self.timeout)
        assert "SystemExit" in str(caught.value)
        assert job.status() is JobStatus.FAILED

    def test_unpicklable_exception_still_reports_type_and_text(self, client: Client) -> None:
        self.require("runs_user_code", "process_isolation")
        job = client.submit(self.request(ep.raise_unpicklable, "holds a lock", isolation="process"))
        with pytest.raises(JobFailedError) as caught:
            job.wait(timeout=self.timeout)
        assert "UnpicklableError" in str(caught.value)
        assert "holds a lock" in str(caught.value)

    def test_wait_all_raises_for_a_failed_job(self, client: Client) -> None:
        self.require("runs_user_code")
        ok = client.submit(self.request(ep.add, 1, 1))
        bad = client.submit(self.request(ep.raise_value_error, "in a batch"))
        with pytest.raises(JobFailedError) as caught:
            wait_all([ok, bad], timeout=self.timeout)
        assert caught.value.job_id == bad.job_id
        assert type(caught.value.__cause__) is ValueError

    def test_wait_all_without_raising_returns_failed(self, client: Client) -> None:
        self.require("runs_user_code")
        ok = client.submit(self.request(ep.add, 1, 1))
        bad = client.submit(self.request(ep.raise_value_error, "reported"))
        statuses = wait_all([ok, bad], timeout=self.timeout, raise_on_failure=False)
        assert statuses == [JobStatus.SUCCEEDED, JobStatus.FAILED]

    def test_wait_all_fails_fast_while_others_run(self, client: Client) -> None:
        self.require("runs_user_code")
        running = client.submit(self.request(ep.run_until_terminated, name="slow"))
        try:
            bad = client.submit(self.request(ep.raise_value_error, "first to end"))
            with pytest.raises(JobFailedError) as caught:
                wait_all([running, bad], timeout=self.timeout)
            assert caught.value.job_id == bad.job_id
            assert not running.status().is_finished
        finally:
            running.terminate()

    def test_a_failed_command_keeps_its_printed_token_out_of_the_error(
        self, client: Client
    ) -> None:
        """A command that prints a secret env var's value and fails: the job's error (in
        ``info()`` and in the raised error with its causes) never shows the value."""
        self.require("supports_command_jobs", "applies_env_vars")
        token = f"tok-{secrets.token_hex(8)}"
        request = self.python_command(
            "import os, sys; print(os.environ['MY_API_TOKEN'], flush=True); sys.exit(3)",
            environment=EnvironmentConfig(env_vars={"MY_API_TOKEN": token}),
        )
        job = client.submit(request)
        with pytest.raises(JobFailedError) as caught:
            job.wait(timeout=self.timeout)
        error = job.info().error or ""
        assert "3" in error
        assert token not in error
        shown: BaseException | None = caught.value
        while shown is not None:
            assert token not in str(shown), f"{type(shown).__name__} shows the token"
            shown = shown.__cause__ or shown.__context__

    def test_command_exit_code_fails_the_job(self, client: Client) -> None:
        self.require("supports_command_jobs")
        job = client.submit(self.python_command("import sys; print('about to fail'); sys.exit(3)"))
        with pytest.raises(JobFailedError) as caught:
            job.wait(timeout=self.timeout)
        assert "3" in str(caught.value)
        info = job.info()
        assert info.status is JobStatus.FAILED
        assert info.exit_code == 3
