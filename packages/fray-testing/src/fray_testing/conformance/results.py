"""Results: ``result()`` returns the callable's value on every backend."""

from __future__ import annotations

import pytest

from fray import Client, JobStatus
from fray.errors import JobFailedError
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance._base import ConformanceTests

__all__ = ["ResultTests"]


class ResultTests(ConformanceTests):
    """Return values travel back to the caller intact."""

    def test_result_waits_for_the_job(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.add, 20, 22))
        assert job.result(timeout=self.timeout) == 42
        assert job.status() is JobStatus.SUCCEEDED

    def test_result_of_structured_value(self, client: Client) -> None:
        self.require("runs_user_code")
        value = {"losses": [1.5, 0.25], "step": 7, "tags": ("a", "b"), "done": None}
        assert client.submit(self.request(ep.echo, value)).result(timeout=self.timeout) == value

    def test_result_of_user_defined_class(self, client: Client) -> None:
        self.require("runs_user_code")
        result = client.submit(self.request(ep.make_point, 3, 4)).result(timeout=self.timeout)
        assert result == ep.Point(3, 4)

    def test_result_none(self, client: Client) -> None:
        job = client.submit(self.request(ep.return_none))
        assert job.result(timeout=self.timeout) is None

    def test_result_twice_gives_the_same_value(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.echo, [1, 2, 3]))
        assert job.result(timeout=self.timeout) == job.result(timeout=self.timeout) == [1, 2, 3]

    def test_result_of_large_value(self, client: Client) -> None:
        self.require("runs_user_code")
        value = list(range(200_000))
        assert client.submit(self.request(ep.echo, value)).result(timeout=self.timeout) == value

    def test_result_of_process_job(self, client: Client) -> None:
        self.require("runs_user_code", "process_isolation")
        job = client.submit(self.request(ep.make_point, 5, 6, isolation="process"))
        assert job.result(timeout=self.timeout) == ep.Point(5, 6)

    def test_result_of_command_job_raises(self, client: Client) -> None:
        self.require("supports_command_jobs")
        job = client.submit(self.python_command("print('no value here')"))
        assert job.wait(timeout=self.timeout) is JobStatus.SUCCEEDED
        with pytest.raises(JobFailedError):
            job.result(timeout=self.timeout)
