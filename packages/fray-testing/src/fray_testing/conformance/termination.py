"""Termination and cleanup: timeouts, terminate(), shutdown(), nothing left behind."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from fray import Client, JobStatus, wait_all
from fray.errors import FrayError, JobFailedError, JobTimeoutError
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance._base import ConformanceTests

__all__ = ["TerminationTests"]


def _process_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc here: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


class TerminationTests(ConformanceTests):
    """Jobs that do not end on their own, and how they are ended."""

    def test_unfinished_job_is_running(self, client: Client) -> None:
        job = client.submit(self.request(ep.run_until_terminated))
        try:
            self.eventually(lambda: job.status() is JobStatus.RUNNING, "the job to start")
            assert not job.status().is_finished
        finally:
            job.terminate()

    def test_wait_timeout_raises_job_timeout_error(self, client: Client) -> None:
        job = client.submit(self.request(ep.run_until_terminated))
        try:
            with pytest.raises(JobTimeoutError) as caught:
                job.wait(timeout=0.2)
            assert isinstance(caught.value, TimeoutError)
            assert not job.status().is_finished
        finally:
            job.terminate()

    def test_wait_timeout_raises_even_without_raise_on_failure(self, client: Client) -> None:
        job = client.submit(self.request(ep.run_until_terminated))
        try:
            with pytest.raises(JobTimeoutError):
                job.wait(timeout=0.1, raise_on_failure=False)
        finally:
            job.terminate()

    def test_result_timeout_raises_job_timeout_error(self, client: Client) -> None:
        job = client.submit(self.request(ep.run_until_terminated))
        try:
            with pytest.raises(JobTimeoutError):
                job.result(timeout=0.1)
        finally:
            job.terminate()

    def test_terminate_returns_once_stopped(self, client: Client) -> None:
        job = client.submit(self.request(ep.run_until_terminated))
        self.eventually(lambda: job.status() is JobStatus.RUNNING, "the job to start")
        job.terminate()
        assert job.status() is JobStatus.STOPPED

    def test_wait_on_stopped_job_returns_stopped(self, client: Client) -> None:
        job = client.submit(self.request(ep.run_until_terminated))
        job.terminate()
        assert job.wait(timeout=self.timeout) is JobStatus.STOPPED

    def test_result_of_stopped_job_raises_job_failed_error(self, client: Client) -> None:
        job = client.submit(self.request(ep.run_until_terminated))
        job.terminate()
        with pytest.raises(JobFailedError) as caught:
            job.result(timeout=self.timeout)
        assert caught.value.status is JobStatus.STOPPED

    def test_info_of_stopped_job(self, client: Client) -> None:
        job = client.submit(self.request(ep.run_until_terminated))
        job.terminate()
        info = job.info()
        assert info.status is JobStatus.STOPPED
        assert info.failures == 0

    def test_terminate_twice_is_harmless(self, client: Client) -> None:
        job = client.submit(self.request(ep.run_until_terminated))
        job.terminate()
        job.terminate()
        assert job.status() is JobStatus.STOPPED

    def test_terminate_after_success_keeps_succeeded(self, client: Client) -> None:
        job = client.submit(self.request(ep.add, 1, 1))
        job.wait(timeout=self.timeout)
        job.terminate()
        assert job.status() is JobStatus.SUCCEEDED

    def test_wait_all_timeout_raises_and_names_the_job(self, client: Client) -> None:
        job = client.submit(self.request(ep.run_until_terminated))
        try:
            with pytest.raises(JobTimeoutError) as caught:
                wait_all([job], timeout=0.2)
            assert job.job_id in str(caught.value)
        finally:
            job.terminate()

    def test_wait_all_returns_stopped_without_raising(self, client: Client) -> None:
        done = client.submit(self.request(ep.add, 1, 1))
        stopped = client.submit(self.request(ep.run_until_terminated))
        stopped.terminate()
        statuses = wait_all([done, stopped], timeout=self.timeout)
        assert statuses == [JobStatus.SUCCEEDED, JobStatus.STOPPED]

    def test_wait_all_wakes_when_a_job_is_terminated(self, client: Client) -> None:
        job = client.submit(self.request(ep.run_until_terminated))
        self.eventually(lambda: job.status() is JobStatus.RUNNING, "the job to start")
        stopper = threading.Timer(0.1, job.terminate)
        stopper.start()
        try:
            assert wait_all([job], timeout=self.timeout) == [JobStatus.STOPPED]
        finally:
            stopper.join()

    def test_shutdown_stops_running_jobs(self, client: Client) -> None:
        job = client.submit(self.request(ep.run_until_terminated))
        self.eventually(lambda: job.status() is JobStatus.RUNNING, "the job to start")
        client.shutdown()
        assert job.wait(timeout=self.timeout) is JobStatus.STOPPED

    def test_shutdown_twice_is_harmless(self, client: Client) -> None:
        client.shutdown()
        client.shutdown()

    def test_submit_after_shutdown_raises(self, client: Client) -> None:
        client.shutdown()
        with pytest.raises(FrayError):
            client.submit(self.request(ep.add, 1, 1))

    def test_client_as_context_manager_shuts_down(self, client: Client) -> None:
        with client as entered:
            job = entered.submit(self.request(ep.run_until_terminated))
        assert job.wait(timeout=self.timeout) is JobStatus.STOPPED
        with pytest.raises(FrayError):
            client.submit(self.request(ep.add, 1, 1))

    def test_terminate_kills_the_process_tree(self, client: Client, tmp_path: Path) -> None:
        self.require("process_isolation")
        pid_file = tmp_path / "pids"
        job = client.submit(
            self.request(ep.record_pids_then_block, str(pid_file), isolation="process")
        )
        self.eventually(pid_file.exists, "the job to record its process ids")
        pids = [int(pid) for pid in pid_file.read_text().split()]
        assert all(_process_alive(pid) for pid in pids)
        job.terminate()
        assert job.status() is JobStatus.STOPPED
        self.eventually(
            lambda: not any(_process_alive(pid) for pid in pids),
            f"processes {pids} (job and its child) to be gone",
        )
