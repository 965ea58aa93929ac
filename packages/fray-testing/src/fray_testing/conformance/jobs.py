"""Jobs: submit, status, wait, get_job, list_jobs, wait_all, replicas."""

from __future__ import annotations

import pytest

from fray import Client, JobHandle, JobInfo, JobStatus, wait_all
from fray.errors import JobAlreadyExistsError, JobNotFoundError
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance._base import ConformanceTests

__all__ = ["JobTests"]


class JobTests(ConformanceTests):
    """Submitting jobs and following them to the end."""

    def test_client_satisfies_protocol(self, client: Client) -> None:
        assert isinstance(client, Client)
        assert isinstance(client.scheme, str) and client.scheme

    def test_callable_job_succeeds(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.add, 2, 3))
        assert job.wait(timeout=self.timeout) is JobStatus.SUCCEEDED
        assert job.result(timeout=self.timeout) == 5

    def test_handle_satisfies_protocol(self, client: Client) -> None:
        job = client.submit(self.request(ep.add, 1, 1, name="proto"))
        assert isinstance(job, JobHandle)
        assert isinstance(job.job_id, str)
        assert "proto" in job.job_id
        job.wait(timeout=self.timeout)

    def test_status_after_wait_is_final(self, client: Client) -> None:
        job = client.submit(self.request(ep.add, 1, 2))
        job.wait(timeout=self.timeout)
        assert job.status() is JobStatus.SUCCEEDED
        assert job.status().is_finished

    def test_wait_again_returns_same_status(self, client: Client) -> None:
        job = client.submit(self.request(ep.add, 1, 2))
        first = job.wait(timeout=self.timeout)
        assert job.wait(timeout=self.timeout) is first is JobStatus.SUCCEEDED

    def test_args_and_kwargs_reach_the_callable(self, client: Client) -> None:
        self.require("runs_user_code")
        request = self.request(ep.join_words, "a", "b", "c", fn_kwargs={"sep": "+"})
        assert client.submit(request).result(timeout=self.timeout) == "a+b+c"

    def test_each_submit_is_a_new_job(self, client: Client) -> None:
        if self.capabilities.unique_job_names:
            pytest.skip("names are unique on this backend: a second submit adopts the first")
        request = self.request(ep.add, 1, 1)
        first, second = client.submit(request), client.submit(request)
        assert first.job_id != second.job_id
        wait_all([first, second], timeout=self.timeout)

    def test_running_name_is_adopted_or_refused(self, client: Client) -> None:
        self.require("unique_job_names")
        request = self.request(ep.run_until_terminated, name="unique")
        job = client.submit(request)
        try:
            assert client.submit(request, adopt_existing=True).job_id == job.job_id
            with pytest.raises(JobAlreadyExistsError):
                client.submit(request, adopt_existing=False)
        finally:
            job.terminate()

    def test_get_job_reattaches_by_id(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.echo, "again"))
        job.wait(timeout=self.timeout)
        same = client.get_job(job.job_id)
        assert same.job_id == job.job_id
        assert same.status() is JobStatus.SUCCEEDED
        assert same.result(timeout=self.timeout) == "again"

    def test_get_job_of_unknown_id_raises_not_found(self, client: Client) -> None:
        with pytest.raises(JobNotFoundError) as caught:
            client.get_job("no-such-job-0123")
        assert isinstance(caught.value, LookupError)
        assert "no-such-job-0123" in str(caught.value)

    def test_list_jobs_shows_jobs_in_submission_order(self, client: Client) -> None:
        jobs = [client.submit(self.request(ep.add, i, i, name=f"listed{i}")) for i in range(3)]
        wait_all(jobs, timeout=self.timeout)
        listed = client.list_jobs()
        assert all(isinstance(info, JobInfo) for info in listed)
        ids = [info.job_id for info in listed]
        positions = [ids.index(job.job_id) for job in jobs]
        assert positions == sorted(positions)
        names = {info.job_id: info.name for info in listed}
        assert names[jobs[0].job_id].startswith("listed0")

    def test_info_of_succeeded_job(self, client: Client) -> None:
        request = self.request(ep.add, 1, 1)
        job = client.submit(request)
        job.wait(timeout=self.timeout)
        info = job.info()
        assert info.job_id == job.job_id
        assert info.name == request.name
        assert info.status is JobStatus.SUCCEEDED
        assert (info.attempts, info.failures, info.preemptions) == (1, 0, 0)
        assert info.error is None

    def test_wait_all_returns_statuses_in_input_order(self, client: Client) -> None:
        jobs = [client.submit(self.request(ep.add, i, 1)) for i in range(4)]
        assert wait_all(jobs, timeout=self.timeout) == [JobStatus.SUCCEEDED] * 4

    def test_wait_all_with_no_time_left_still_reports_finished_jobs(self, client: Client) -> None:
        jobs = [client.submit(self.request(ep.add, i, 1)) for i in range(3)]
        for job in jobs:
            job.wait(timeout=self.timeout)
        assert wait_all(jobs, timeout=0) == [JobStatus.SUCCEEDED] * 3

    def test_wait_all_of_nothing_returns_empty_list(self, client: Client) -> None:
        del client
        assert wait_all([], timeout=self.timeout) == []

    def test_replicas_each_run_and_result_is_a_list(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.echo, "r", replicas=3))
        assert job.result(timeout=self.timeout) == ["r", "r", "r"]
        assert job.info().replicas == 3
