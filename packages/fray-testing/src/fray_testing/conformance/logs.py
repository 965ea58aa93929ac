"""Logs: what a job printed, as lines, with children on request."""

from __future__ import annotations

from fray import Client, JobStatus
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance._base import ConformanceTests

__all__ = ["LogTests"]


class LogTests(ConformanceTests):
    """``logs()`` returns the job's stdout and stderr lines, without newlines."""

    def test_logs_hold_printed_lines_in_order(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.print_lines, "alpha", "beta", "gamma"))
        job.wait(timeout=self.timeout)
        lines = list(job.logs())
        assert [line for line in lines if line in ("alpha", "beta", "gamma")] == [
            "alpha",
            "beta",
            "gamma",
        ]
        assert not any(line.endswith("\n") for line in lines)

    def test_each_replica_line_starts_with_its_index(self, client: Client) -> None:
        """Lines of a job with several replicas say whose they are: ``[i] `` first, ``i``
        the replica's index (whole lines: a line is never split or merged)."""
        self.require("runs_user_code")
        job = client.submit(self.request(ep.print_lines, "from a replica", replicas=2))
        job.wait(timeout=self.timeout)
        lines = [line for line in job.logs() if line.endswith("from a replica")]
        assert sorted(lines) == ["[0] from a replica", "[1] from a replica"]

    def test_logs_is_a_tuple_and_follow_an_iterator_of_strings(self, client: Client) -> None:
        """``logs()`` is a tuple from every call (the predecessor's return type);
        ``logs(follow=True)`` an iterator that ends with the job."""
        self.require("runs_user_code")
        job = client.submit(self.request(ep.print_lines, "only"))
        job.wait(timeout=self.timeout)
        logs = job.logs()
        assert isinstance(logs, tuple) and logs == job.logs()
        assert all(isinstance(line, str) for line in logs)
        followed = job.logs(follow=True)
        assert iter(followed) is followed
        assert tuple(followed) == logs

    def test_one_print_with_newlines_gives_several_lines(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.print_lines, "first\nsecond"))
        job.wait(timeout=self.timeout)
        lines = list(job.logs())
        assert lines.index("first") + 1 == lines.index("second")

    def test_last_line_without_newline_is_kept(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.write_unterminated, "no newline at the end"))
        job.wait(timeout=self.timeout)
        assert "no newline at the end" in list(job.logs())

    def test_logs_include_stderr(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.print_to_stderr, "to stderr"))
        job.wait(timeout=self.timeout)
        assert "to stderr" in list(job.logs())

    def test_logs_of_failed_job_are_kept(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.print_then_fail, "before the crash", "crash"))
        assert job.wait(timeout=self.timeout, raise_on_failure=False) is JobStatus.FAILED
        assert "before the crash" in list(job.logs())

    def test_follow_yields_every_line_and_ends(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.print_lines, "one", "two", "three"))
        followed = list(job.logs(follow=True))
        assert [line for line in followed if line in ("one", "two", "three")] == [
            "one",
            "two",
            "three",
        ]
        assert job.status().is_finished

    def test_logs_with_children_prefix_child_lines(self, client: Client) -> None:
        self.require("runs_user_code")
        child_name = self.name("printer")
        job = client.submit(
            self.request(ep.print_and_spawn, "from the parent", child_name, "from the child")
        )
        child_id = job.result(timeout=self.timeout)
        lines = list(job.logs(include_children=True))
        assert "from the parent" in lines
        assert f"[{child_id}] from the child" in lines

    def test_logs_without_children_leave_child_lines_out(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(
            self.request(ep.print_and_spawn, "parent only", self.name("printer"), "child only")
        )
        job.wait(timeout=self.timeout)
        lines = list(job.logs())
        assert "parent only" in lines
        assert not any("child only" in line for line in lines)

    def test_command_job_output_is_in_logs(self, client: Client) -> None:
        self.require("supports_command_jobs")
        job = client.submit(self.python_command("print('hello from a command')"))
        assert job.wait(timeout=self.timeout) is JobStatus.SUCCEEDED
        assert "hello from a command" in list(job.logs())
